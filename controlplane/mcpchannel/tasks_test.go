package mcpchannel_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// taskCatalog runs taskup (a go-sdk-free upstream that runs charge as a
// task, with a durable task store in dir) as stdio upstream "tasker".
func taskCatalog(t *testing.T, dir string, modern bool) string {
	t.Helper()
	argv := fmt.Sprintf("[%q, --state, %q]", taskupBin, dir)
	if modern {
		argv = fmt.Sprintf("[%q, --state, %q, --modern]", taskupBin, dir)
	}
	return writeCatalog(t, fmt.Sprintf(`
upstreams:
  tasker:
    transport: stdio
    command: %s
    timeout: 20s
`, argv)+taskerTools)
}

func taskEffects(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "effects"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestUpstreamTaskCompletes: over stdio and over Streamable HTTP, in both
// protocol eras (on HTTP 2025-11-25 has a session; 2026-07-28 is
// sessionless, the upstream refusing a request whose Mcp-Method or Mcp-Name
// header does not match its body), a tool the upstream runs as a task is
// called task-augmented; its task ID is on the execution, the task's result
// is the stored result, one effect. A status_query tool the upstream does
// not run as a task is held (not listed); in 2026-07-28 the server decides
// per call, so plain is listed and answers without a task.
func TestUpstreamTaskCompletes(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		for _, era := range []string{"2025-11-25", "2026-07-28"} {
			t.Run(transport+"/"+era, func(t *testing.T) {
				dir := t.TempDir()
				data := t.TempDir()
				modern := era == "2026-07-28"
				var cat string
				if transport == "stdio" {
					cat = taskCatalog(t, dir, modern)
				} else {
					cat = httpTaskCatalog(t, startTaskServer(t, dir, modern).url)
				}
				l := startLatch(t, data, cat)
				c := client(t, data)
				lt, err := c.ListTools(context.Background(), &controlplanev1.ListToolsRequest{})
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, tl := range lt.GetTools() {
					if strings.HasPrefix(tl.GetName(), "tasker.") {
						names = append(names, tl.GetName())
					}
				}
				want := "tasker.charge"
				if modern {
					want = "tasker.charge tasker.plain"
				}
				if strings.Join(names, " ") != want {
					t.Errorf("listed = %v, want %s", names, want)
				}
				if !modern {
					// Logged before the socket opened, but copied from the
					// process's stderr pipe by a goroutine of its own.
					testbin.Eventually(t, "the log to say why tasker.plain is held (execution.taskSupport)", func() bool {
						return strings.Contains(l.stderr.String(), "execution.taskSupport")
					})
				}
				// The listing says how each tool is called.
				out, err := exec.Command(latchBin, "catalog", "upstream-tools", "tasker", "--data", data).CombinedOutput()
				if err != nil {
					t.Fatalf("latch catalog upstream-tools tasker: %v\n%s", err, out)
				}
				wantCalls := map[string]string{"charge": "  called task-augmented: "}
				if modern {
					wantCalls["plain"] = "  called task-augmented: "
				} else {
					wantCalls["plain"] = `  called without a task: its tool plain does not take tasks (execution.taskSupport is "forbidden")`
				}
				for tool, w := range wantCalls {
					if b := toolBlock(string(out), tool); !strings.Contains(b, w) {
						t.Errorf("upstream-tools block of %s lacks %q:\n%s", tool, w, out)
					}
				}

				r := submit(t, c, "tasker.charge", `{"text":"card 42"}`)
				id := r.GetExecution().GetId()
				got := waitState(t, c, id, recordv1.State_STATE_COMPLETED)
				x := got.GetExecution()
				if x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED || !strings.Contains(string(got.GetResult().GetBody()), "charged: card 42") {
					t.Errorf("outcome %v (%s) result %s, want succeeded with the task's result", x.GetOutcome(), x.GetReason(), got.GetResult().GetBody())
				}
				eff := taskEffects(t, dir)
				if len(eff) != 1 || x.GetTargetTaskId() == "" || !strings.HasPrefix(eff[0], x.GetTargetTaskId()+" "+id+" ") {
					t.Errorf("effects = %q, target_task_id %q: want one effect of that task under %s", eff, x.GetTargetTaskId(), id)
				}
				if modern {
					// plain answers at once in the task-declaring call: no task.
					r := submit(t, c, "tasker.plain", `{}`)
					got := waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
					if got.GetExecution().GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED || got.GetExecution().GetTargetTaskId() != "" {
						t.Errorf("plain: %v (%s) task %q, want succeeded without a task", got.GetExecution().GetOutcome(), got.GetExecution().GetReason(), got.GetExecution().GetTargetTaskId())
					}
				}
			})
		}
	}
}

// TestLatchKilledWhileUpstreamTaskRuns: the control plane is SIGKILLed
// while the upstream (over HTTP: a stdio upstream ends with the control
// plane) runs the task (its ID recorded); the task completes at the
// upstream meanwhile. After the restart recovery asks tasks/get, takes
// the result with tasks/result: completed, exactly one effect. If the
// upstream no longer knows the task when asked (its store lost it), that is
// no proof nothing ran: needs_review, the effect there to see.
func TestLatchKilledWhileUpstreamTaskRuns(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lostTask bool
		want     recordv1.State
	}{
		{"task kept", false, recordv1.State_STATE_COMPLETED},
		{"task lost at the upstream", true, recordv1.State_STATE_NEEDS_REVIEW},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data := t.TempDir()
			srv := startTaskServer(t, dir, false)
			catalog := httpTaskCatalog(t, srv.url)
			l := startLatch(t, data, catalog)
			c := client(t, data)
			id, taskID := submitHeldTask(t, c, dir)
			l.kill()
			os.Remove(filepath.Join(dir, "hold"))
			testbin.Eventually(t, "the task to complete at the upstream", func() bool { return len(taskEffects(t, dir)) == 1 })
			if tc.lostTask {
				// Its store loses the task: stopped, the file removed,
				// started again on the same address.
				srv.cmd.Process.Kill()
				<-srv.exited
				if err := os.Remove(filepath.Join(dir, "tasks", taskID+".json")); err != nil {
					t.Fatal(err)
				}
				u, err := url.Parse(srv.url)
				if err != nil {
					t.Fatal(err)
				}
				srv.start(u.Host)
			}

			startLatch(t, data, catalog)
			c = client(t, data)
			got := waitState(t, c, id, recordv1.State_STATE_COMPLETED, recordv1.State_STATE_NEEDS_REVIEW)
			x := got.GetExecution()
			if x.GetState() != tc.want {
				t.Fatalf("after restart: %v (%s), want %v", x.GetState(), x.GetReason(), tc.want)
			}
			if tc.want == recordv1.State_STATE_COMPLETED && !strings.Contains(string(got.GetResult().GetBody()), "charged: ship it") {
				t.Errorf("result %s, want the task's result", got.GetResult().GetBody())
			}
			if tc.lostTask && !strings.Contains(x.GetReason(), "no longer knows task "+taskID) {
				t.Errorf("needs_review reason = %q, want it to say the upstream no longer knows the task", x.GetReason())
			}
			if eff := taskEffects(t, dir); len(eff) != 1 || !strings.HasPrefix(eff[0], taskID+" ") {
				t.Errorf("effects = %q, want exactly one, of task %s", eff, taskID)
			}
		})
	}
}

func readPid(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 1 {
		t.Fatalf("pid file %s holds %q (%v), want a process ID", filepath.Join(dir, "pid"), b, err)
	}
	return n
}

// exited reports whether process pid has ended: it is gone, or a zombie
// (its parent, a control plane that was SIGKILLed, cannot reap it; the
// process that inherits it may not do so at once).
func exited(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestUpstreamCutAfterCreateTask: the upstream's stream ends right after
// its CreateTaskResult (the process exits; its durable store keeps the
// task). The dispatch is outcome_unknown with the task ID; recovery asks the
// restarted upstream (tasks/get) and completes with exactly one effect.
func TestUpstreamCutAfterCreateTask(t *testing.T) {
	dir := t.TempDir()
	data := t.TempDir()
	startLatch(t, data, taskCatalog(t, dir, false))
	c := client(t, data)
	touch(t, filepath.Join(dir, "cut"))
	r := submit(t, c, "tasker.charge", `{"text":"cut"}`)
	id := r.GetExecution().GetId()
	got := waitState(t, c, id, recordv1.State_STATE_COMPLETED, recordv1.State_STATE_NEEDS_REVIEW)
	x := got.GetExecution()
	if x.GetState() != recordv1.State_STATE_COMPLETED || x.GetTargetTaskId() == "" {
		t.Fatalf("execution %v (%s) task %q, want completed through its recorded task", x.GetState(), x.GetReason(), x.GetTargetTaskId())
	}
	if eff := taskEffects(t, dir); len(eff) != 1 {
		t.Errorf("effects = %q, want exactly one", eff)
	}
	h, err := c.History(context.Background(), &controlplanev1.HistoryRequest{ExecutionId: id})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range h.GetEntries() {
		kinds = append(kinds, lifecycle.EntryKindNameOf(e))
	}
	if k := strings.Join(kinds, " "); !strings.Contains(k, "target_task") || !strings.Contains(k, "recovery") {
		t.Errorf("journal kinds = %s, want the task recorded and the outcome recovered", k)
	}
}

// toolBlock is the paragraph of latch catalog upstream-tools output about
// tool (from its name line to the next blank line).
func toolBlock(out, tool string) string {
	for _, b := range strings.Split(out, "\n\n") {
		if strings.HasPrefix(b, tool+"\n") {
			return b
		}
	}
	return ""
}

// submitHeldTask submits tasker.charge while the upstream holds its tasks
// (the hold file in dir), and waits until the upstream holds the task and
// its ID is recorded on the execution.
func submitHeldTask(t *testing.T, c controlplanev1.ControlPlaneClient, dir string) (id, taskID string) {
	t.Helper()
	touch(t, filepath.Join(dir, "hold"))
	r := submit(t, c, "tasker.charge", `{"text":"ship it"}`)
	id = r.GetExecution().GetId()
	testbin.Eventually(t, "the upstream to hold the task", func() bool {
		_, err := os.Stat(filepath.Join(dir, "holding.1"))
		return err == nil
	})
	testbin.Eventually(t, "the task ID on the execution", func() bool {
		g, err := c.Get(context.Background(), &controlplanev1.GetRequest{ExecutionId: id})
		taskID = g.GetExecution().GetTargetTaskId()
		return err == nil && taskID != ""
	})
	return id, taskID
}

// taskerTools are the contracts of the task upstream's two tools, for the
// stdio and the HTTP catalogs.
const taskerTools = `tools:
  tasker.charge:
    upstream: tasker
    tool: charge
    replay: status_query
    attach_window: 1h
  tasker.plain:
    upstream: tasker
    tool: plain
    replay: status_query
`
