package mcpchannel_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// taskServer is taskup serving Streamable HTTP as its own process (outside
// the control plane), restartable on the same address.
type taskServer struct {
	t      *testing.T
	dir    string
	modern bool
	url    string
	env    []string
	cmd    *exec.Cmd
	exited chan struct{}
}

func startTaskServer(t *testing.T, dir string, modern bool, env ...string) *taskServer {
	t.Helper()
	s := &taskServer{t: t, dir: dir, modern: modern, env: env}
	s.start("127.0.0.1:0")
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.exited
	})
	return s
}

func (s *taskServer) start(addr string) {
	s.t.Helper()
	os.Remove(filepath.Join(s.dir, "url"))
	args := []string{"--state", s.dir, "--http", addr}
	if s.modern {
		args = append(args, "--modern")
	}
	s.cmd = exec.Command(taskupBin, args...)
	s.cmd.Env = append(os.Environ(), s.env...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func(cmd *exec.Cmd) { cmd.Wait(); close(exited) }(s.cmd)
	s.exited = exited
	testbin.Eventually(s.t, "the HTTP task upstream to listen", func() bool {
		b, err := os.ReadFile(filepath.Join(s.dir, "url"))
		if err == nil && len(b) > 0 {
			s.url = string(b)
			return true
		}
		return false
	})
}

// restartAfterExit waits for the process to exit by itself, then starts it
// again on the same address.
func (s *taskServer) restartAfterExit() {
	s.t.Helper()
	testbin.Eventually(s.t, "the HTTP task upstream to exit", func() bool {
		select {
		case <-s.exited:
			return true
		default:
			return false
		}
	})
	u, err := url.Parse(s.url)
	if err != nil {
		s.t.Fatal(err)
	}
	s.start(u.Host)
}

// httpTaskCatalog is taskCatalog with taskup as http upstream "tasker"
// (extra: more upstream fields).
func httpTaskCatalog(t *testing.T, url string, extra ...string) string {
	t.Helper()
	return writeCatalog(t, fmt.Sprintf(`
upstreams:
  tasker:
    transport: http
    url: %s
    allow_private: true
    timeout: 20s%s
`, url, strings.Join(append([]string{""}, extra...), "\n    "))+taskerTools)
}

// TestHTTPUpstreamCutAfterCreateTask: the HTTP upstream's process exits
// right after writing its CreateTaskResult in the event stream (the
// connection cut, the task durable in its store). The dispatch is
// outcome_unknown with the task ID; once the upstream is back on the same
// address (it forgot Latch's session: 404, a new session), recovery asks
// tasks/get and completes with exactly one effect.
func TestHTTPUpstreamCutAfterCreateTask(t *testing.T) {
	dir := t.TempDir()
	data := t.TempDir()
	srv := startTaskServer(t, dir, false)
	l := startLatch(t, data, httpTaskCatalog(t, srv.url))
	c := client(t, data)
	touch(t, filepath.Join(dir, "cut"))
	r := submit(t, c, "tasker.charge", `{"text":"cut"}`)
	id := r.GetExecution().GetId()
	srv.restartAfterExit()
	got := waitState(t, c, id, recordv1.State_STATE_COMPLETED, recordv1.State_STATE_NEEDS_REVIEW)
	x := got.GetExecution()
	if x.GetState() != recordv1.State_STATE_COMPLETED || x.GetTargetTaskId() == "" {
		t.Fatalf("execution %v (%s) task %q, want completed through its recorded task", x.GetState(), x.GetReason(), x.GetTargetTaskId())
	}
	if !strings.Contains(string(got.GetResult().GetBody()), "charged: cut") {
		t.Errorf("result %s, want the task's result", got.GetResult().GetBody())
	}
	if eff := taskEffects(t, dir); len(eff) != 1 || !strings.HasPrefix(eff[0], x.GetTargetTaskId()+" ") {
		t.Errorf("effects = %q, want exactly one, of task %s", eff, x.GetTargetTaskId())
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
	// Logged before the recovery completed, but copied from the process's
	// stderr pipe by a goroutine of its own: waited for, not read once.
	testbin.Eventually(t, "the log to say the restarted upstream's 404 for the old session made Latch connect again", func() bool {
		return strings.Contains(l.stderr.String(), "upstream forgot Latch's session (HTTP 404)")
	})
}

// TestLatchKilledWhileHTTPUpstreamTaskRuns: the control plane is SIGKILLed
// while the HTTP upstream runs the task (its ID recorded); the task
// completes at the upstream meanwhile. After the restart recovery asks
// tasks/get on a new session and takes the result with tasks/result:
// completed, exactly one effect.
func TestLatchKilledWhileHTTPUpstreamTaskRuns(t *testing.T) {
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
	if syscall.Kill(readPid(t, dir), 0) != nil {
		t.Fatal("the HTTP upstream exited with the control plane; it is its own process")
	}

	startLatch(t, data, catalog)
	c = client(t, data)
	got := waitState(t, c, id, recordv1.State_STATE_COMPLETED, recordv1.State_STATE_NEEDS_REVIEW)
	x := got.GetExecution()
	if x.GetState() != recordv1.State_STATE_COMPLETED {
		t.Fatalf("after restart: %v (%s), want completed", x.GetState(), x.GetReason())
	}
	if !strings.Contains(string(got.GetResult().GetBody()), "charged: ship it") {
		t.Errorf("result %s, want the task's result", got.GetResult().GetBody())
	}
	if eff := taskEffects(t, dir); len(eff) != 1 || !strings.HasPrefix(eff[0], taskID+" ") {
		t.Errorf("effects = %q, want exactly one, of task %s", eff, taskID)
	}
}

// TestHTTPUpstreamTaskWithVaultCredential: the task calls Latch sends
// itself (tools/call, tasks/get, tasks/result) carry the vault's credential
// like the SDK's requests: the upstream refuses every request without it.
func TestHTTPUpstreamTaskWithVaultCredential(t *testing.T) {
	const token = "s3cret-task-token"
	dir := t.TempDir()
	data := t.TempDir()
	srv := startTaskServer(t, dir, false, "TASKUP_TOKEN="+token)
	l := startLatch(t, data, httpTaskCatalog(t, srv.url, "credential: tasker-token"))
	put := exec.Command(latchBin, "vault", "put", "tasker-token", "--kind", "bearer", "--data", data)
	put.Stdin = strings.NewReader(token + "\n")
	if out, err := put.CombinedOutput(); err != nil {
		t.Fatalf("latch vault put: %v\n%s", err, out)
	}
	// tasker.plain stays held by design (status_query on a tool that takes
	// no tasks): the reload names it, and --allow-held says it is expected.
	if out, err := exec.Command(latchBin, "catalog", "reload", "--allow-held", "--data", data).CombinedOutput(); err != nil || !strings.Contains(string(out), "tasker.plain: ") {
		t.Fatalf("latch catalog reload --allow-held: %v\n%s\nwant exit 0 naming the held tasker.plain", err, out)
	}
	c := client(t, data)
	r := submit(t, c, "tasker.charge", `{"text":"with the token"}`)
	id := r.GetExecution().GetId()
	got := waitState(t, c, id, recordv1.State_STATE_COMPLETED)
	x := got.GetExecution()
	if x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED || x.GetTargetTaskId() == "" {
		t.Errorf("outcome %v (%s) task %q, want succeeded through a task", x.GetOutcome(), x.GetReason(), x.GetTargetTaskId())
	}
	if eff := taskEffects(t, dir); len(eff) != 1 {
		t.Errorf("effects = %q, want exactly one", eff)
	}
	if strings.Contains(l.stderr.String(), token) {
		t.Errorf("the control plane's log carries the upstream token")
	}
}
