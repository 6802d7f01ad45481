package mcpchannel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// latchBin and countupBin are the real binaries the process tests run.
var latchBin, countupBin, taskupBin string

func TestMain(m *testing.M) {
	testbin.Main(m, []string{
		"github.com/latchhq/latch/controlplane/cmd/latch",
		"github.com/latchhq/latch/controlplane/mcpchannel/internal/countup",
		"github.com/latchhq/latch/controlplane/mcpchannel/internal/taskup",
	}, []*string{&latchBin, &countupBin, &taskupBin})
}

// counter is one counting upstream's state directory.
type counter struct {
	t   *testing.T
	dir string
}

func newCounter(t *testing.T) *counter {
	t.Helper()
	return &counter{t: t, dir: t.TempDir()}
}

func (c *counter) effects() []string {
	b, err := os.ReadFile(filepath.Join(c.dir, "effects"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func (c *counter) hold() {
	if err := os.WriteFile(filepath.Join(c.dir, "hold"), nil, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

func (c *counter) release() { os.Remove(filepath.Join(c.dir, "hold")) }

func (c *counter) waitHolding(n int) {
	c.t.Helper()
	testbin.Eventually(c.t, fmt.Sprintf("the upstream to hold call %d", n), func() bool {
		_, err := os.Stat(filepath.Join(c.dir, fmt.Sprintf("holding.%d", n)))
		return err == nil
	})
}

// pid is the upstream's process ID. A bad pid file fails the test: PID 0
// or -1 handed to kill(2) would signal the test's own process group.
func (c *counter) pid() int {
	c.t.Helper()
	return readPid(c.t, c.dir)
}

// serveHTTP runs the counter as an HTTP upstream (its own process, outside
// the control plane) and returns its URL.
func (c *counter) serveHTTP() string {
	c.t.Helper()
	cmd := exec.Command(countupBin, "--state", c.dir, "--http", "127.0.0.1:0")
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var url string
	testbin.Eventually(c.t, "the HTTP upstream to listen", func() bool {
		b, err := os.ReadFile(filepath.Join(c.dir, "url"))
		url = string(b)
		return err == nil && url != ""
	})
	return url
}

const contracts = `
tools:
  counter.add_note:
    upstream: counter
    tool: add_note
    replay: %s
    idempotency_argument: request_id
    attach_window: 1h
    fingerprint: {ignore: [], secret: []}
  counter.count:
    upstream: counter
    tool: count
    replay: read_only
  counter.fail:
    upstream: counter
    tool: fail
    replay: review
`

func stdioCatalog(t *testing.T, c *counter, replay string) string {
	return writeCatalog(t, fmt.Sprintf("upstreams:\n  counter:\n    transport: stdio\n    command: [%q, --state, %q]\n    timeout: 20s\n", countupBin, c.dir)+fmt.Sprintf(contracts, replay))
}

func httpCatalog(t *testing.T, url, replay string) string {
	return writeCatalog(t, fmt.Sprintf("upstreams:\n  counter:\n    transport: http\n    url: %s\n    allow_private: true\n    timeout: 20s\n", url)+fmt.Sprintf(contracts, replay))
}

func writeCatalog(t *testing.T, text string) string {
	p := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

type latch struct {
	cmd    *exec.Cmd
	stderr *testbin.Buffer
}

// startLatch runs `latch serve` (with flags) as a real process and waits
// for its socket.
func startLatch(t *testing.T, data, catalog string, flags ...string) *latch {
	t.Helper()
	cmd := exec.Command(latchBin, append([]string{"serve", "--data", data, "--catalog", catalog, "--log-level", "debug",
		"--vault-key-file", filepath.Join(data, "vault.key"), "--trusted-actor", "alice"}, flags...)...)
	l := &latch{cmd: cmd, stderr: &testbin.Buffer{}}
	cmd.Stderr = l.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("latch serve log:\n%s", l.stderr.String())
		}
	})
	testbin.Eventually(t, "latch serve to open its socket", func() bool {
		c, err := net.Dial("unix", datadir.Socket(data))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return l
}

func (l *latch) kill() {
	l.cmd.Process.Signal(syscall.SIGKILL)
	l.cmd.Wait()
}

func dial(t *testing.T, data string) *grpc.ClientConn {
	t.Helper()
	sock := datadir.Socket(data)
	conn, err := grpc.NewClient("passthrough:///latch", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func client(t *testing.T, data string) controlplanev1.ControlPlaneClient {
	return controlplanev1.NewControlPlaneClient(dial(t, data))
}

func submit(t *testing.T, c controlplanev1.ControlPlaneClient, tool, args string) *controlplanev1.SubmitResponse {
	t.Helper()
	r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: tool, Arguments: []byte(args)})
	if err != nil {
		t.Fatalf("Submit(%s, %s) = %v", tool, args, err)
	}
	return r
}

// waitState polls the execution until it is in one of want (bounded at
// 90s: after an upstream or the control plane is killed, recovery waits 1,
// 2, 4, 8, 16, 32s between its rounds, and an upstream restarted on a
// loaded machine may miss the first ones).
func waitState(t *testing.T, c controlplanev1.ControlPlaneClient, id string, want ...recordv1.State) *controlplanev1.GetResponse {
	t.Helper()
	var last *controlplanev1.GetResponse
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		r, err := c.Get(context.Background(), &controlplanev1.GetRequest{ExecutionId: id})
		if err == nil {
			last = r
			for _, w := range want {
				if r.GetExecution().GetState() == w {
					return r
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("execution %s is %v (%s), want %v", id, last.GetExecution().GetState(), last.GetExecution().GetReason(), want)
	return nil
}

// TestUpstreamToolsAreCalledWithIdentity: over stdio and HTTP, an upstream
// tool with a contract is listed and called with the execution ID in _meta
// and in its idempotency argument; its answer classes are kept as results;
// a tool without a contract is not listed.
func TestUpstreamToolsAreCalledWithIdentity(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			up := newCounter(t)
			var catalog string
			if transport == "stdio" {
				catalog = stdioCatalog(t, up, "idempotency_key")
			} else {
				catalog = httpCatalog(t, up.serveHTTP(), "idempotency_key")
			}
			data := t.TempDir()
			startLatch(t, data, catalog)
			c := client(t, data)

			lt, err := c.ListTools(context.Background(), &controlplanev1.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]*controlplanev1.Tool{}
			for _, tl := range lt.GetTools() {
				names[tl.GetName()] = tl
			}
			for _, want := range []string{"counter.add_note", "counter.count", "counter.fail"} {
				if names[want] == nil {
					t.Errorf("ListTools lacks %s: %v", want, lt.GetTools())
				}
			}
			if names["counter.rpc_error"] != nil || names["rpc_error"] != nil {
				t.Errorf("ListTools lists rpc_error, which has no contract")
			}
			if s := string(names["counter.add_note"].GetInputSchema()); strings.Contains(s, "request_id") || !strings.Contains(s, `"text"`) {
				t.Errorf("add_note's advertised schema = %s, want the upstream's without request_id (Latch sets it)", s)
			}

			r := submit(t, c, "counter.add_note", `{"text":"disk full"}`)
			id := r.GetExecution().GetId()
			got := waitState(t, c, id, recordv1.State_STATE_COMPLETED)
			if got.GetExecution().GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED {
				t.Errorf("outcome = %v, want succeeded", got.GetExecution().GetOutcome())
			}
			var res struct {
				Content           []map[string]any `json:"content"`
				StructuredContent map[string]any   `json:"structuredContent"`
			}
			if err := json.Unmarshal(got.GetResult().GetBody(), &res); err != nil || len(res.Content) != 1 || res.StructuredContent["note"] != "noted: disk full" {
				t.Errorf("stored result = %s (%v), want the content blocks and structured content", got.GetResult().GetBody(), err)
			}
			if eff := up.effects(); len(eff) != 1 || eff[0] != id+" "+id+" disk full" {
				t.Errorf("upstream effects = %q, want one carrying %s as request_id and in _meta", eff, id)
			}
			// The same intent again attaches: no second call.
			again := submit(t, c, "counter.add_note", `{"text":"disk full"}`)
			if again.GetExecution().GetId() != id || again.GetDisposition() != recordv1.Disposition_DISPOSITION_ATTACHED {
				t.Errorf("retry = %s %v, want attached to %s", again.GetExecution().GetId(), again.GetDisposition(), id)
			}

			f := submit(t, c, "counter.fail", `{}`)
			got = waitState(t, c, f.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
			if got.GetExecution().GetOutcome() != recordv1.Outcome_OUTCOME_FAILED_AT_TARGET || !strings.Contains(string(got.GetResult().GetBody()), "the disk is full") {
				t.Errorf("isError call: outcome %v result %s, want failed_at_target with the content", got.GetExecution().GetOutcome(), got.GetResult().GetBody())
			}
			if len(up.effects()) != 1 {
				t.Errorf("upstream effects = %d, want 1", len(up.effects()))
			}
		})
	}
}

// TestUpstreamKilledWhileHoldingCall: the stdio upstream is SIGKILLed while
// it holds a call. A review tool rests at needs_review with no effect; an
// idempotency_key tool is sent again under the same execution ID once the
// control plane has restarted the upstream, and has exactly one effect.
func TestUpstreamKilledWhileHoldingCall(t *testing.T) {
	for _, tc := range []struct {
		replay  string
		want    recordv1.State
		effects int
	}{
		{"review", recordv1.State_STATE_NEEDS_REVIEW, 0},
		{"idempotency_key", recordv1.State_STATE_COMPLETED, 1},
	} {
		t.Run(tc.replay, func(t *testing.T) {
			up := newCounter(t)
			data := t.TempDir()
			startLatch(t, data, stdioCatalog(t, up, tc.replay))
			c := client(t, data)
			up.hold()
			r := submit(t, c, "counter.add_note", `{"text":"charge card"}`)
			up.waitHolding(1)
			pid := up.pid()
			// Stopped first, so the held handler never sees the release the
			// next process needs (it must not hold).
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			up.release()
			syscall.Kill(pid, syscall.SIGKILL)
			got := waitState(t, c, r.GetExecution().GetId(), tc.want)
			t.Logf("state %v reason %q", got.GetExecution().GetState(), got.GetExecution().GetReason())
			if n := len(up.effects()); n != tc.effects {
				t.Errorf("upstream effects = %d, want %d", n, tc.effects)
			}
			if tc.want == recordv1.State_STATE_NEEDS_REVIEW && !strings.Contains(got.GetExecution().GetReason(), "review") {
				t.Errorf("needs_review reason = %q, want it to say an operator decides", got.GetExecution().GetReason())
			}
		})
	}
}

// TestLatchKilledWhileUpstreamHoldsCall: the control plane is SIGKILLed
// while the HTTP upstream holds a call, which then completes. After the
// restart, a review tool is needs_review (the effect happened, Latch cannot
// know: visible); an idempotency_key tool is sent again under the same key
// and the upstream's dedupe answers: exactly one effect, completed.
func TestLatchKilledWhileUpstreamHoldsCall(t *testing.T) {
	for _, tc := range []struct {
		replay string
		want   recordv1.State
	}{
		{"review", recordv1.State_STATE_NEEDS_REVIEW},
		{"idempotency_key", recordv1.State_STATE_COMPLETED},
	} {
		t.Run(tc.replay, func(t *testing.T) {
			up := newCounter(t)
			catalog := httpCatalog(t, up.serveHTTP(), tc.replay)
			data := t.TempDir()
			l := startLatch(t, data, catalog)
			c := client(t, data)
			up.hold()
			r := submit(t, c, "counter.add_note", `{"text":"ship it"}`)
			id := r.GetExecution().GetId()
			up.waitHolding(1)
			l.kill()
			up.release()
			testbin.Eventually(t, "the held call to complete at the upstream", func() bool { return len(up.effects()) == 1 })

			startLatch(t, data, catalog)
			c = client(t, data)
			got := waitState(t, c, id, tc.want)
			if n := len(up.effects()); n != 1 {
				t.Errorf("upstream effects = %d, want exactly 1", n)
			}
			if tc.want == recordv1.State_STATE_COMPLETED && !strings.Contains(string(got.GetResult().GetBody()), `"replayed":true`) {
				t.Errorf("recovered result = %s, want the upstream's stored answer for the key", got.GetResult().GetBody())
			}
		})
	}
}

// TestSchemaChangeHoldsTool: the upstream restarts with a changed input
// schema; the tool is held (not_executed, nothing sent), a reload does not
// release it, and the operator's accept brings the new schema into force.
func TestSchemaChangeHoldsTool(t *testing.T) {
	up := newCounter(t)
	data := t.TempDir()
	catalog := stdioCatalog(t, up, "review")
	startLatch(t, data, catalog)
	c := client(t, data)
	first := submit(t, c, "counter.add_note", `{"text":"one"}`)
	waitState(t, c, first.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)

	if err := os.WriteFile(filepath.Join(up.dir, "variant"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := up.pid()
	syscall.Kill(old, syscall.SIGKILL)
	testbin.Eventually(t, "the control plane to restart the upstream", func() bool {
		b, err := os.ReadFile(filepath.Join(up.dir, "pid"))
		return err == nil && string(b) != strconv.Itoa(old)
	})
	var got *controlplanev1.GetResponse
	testbin.Eventually(t, "the changed schema to hold the tool", func() bool {
		r := submit(t, c, "counter.add_note", fmt.Sprintf(`{"text":"two %d"}`, time.Now().UnixNano()))
		got = waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_NOT_EXECUTED, recordv1.State_STATE_COMPLETED)
		// not_executed for want of a session (the restart) is not the hold.
		return got.GetExecution().GetState() == recordv1.State_STATE_NOT_EXECUTED && strings.Contains(got.GetExecution().GetReason(), "held")
	})
	if !strings.Contains(got.GetExecution().GetReason(), "held") {
		t.Errorf("held call's reason = %q, want it to say the tool is held", got.GetExecution().GetReason())
	}
	n := len(up.effects())
	if n != 1 {
		t.Errorf("effects while held = %d, want 1 (the call before the change)", n)
	}

	// A reload does not release it: the change is held until accepted.
	adm := controlplanev1.NewAdminClient(dial(t, data))
	if _, err := adm.ReloadCatalog(context.Background(), &controlplanev1.ReloadCatalogRequest{}); err != nil {
		t.Fatalf("ReloadCatalog = %v", err)
	}
	if listed(t, c, "counter.add_note") != nil {
		t.Errorf("after a reload counter.add_note is exposed with the changed schema; want it held until accepted")
	}
	ar, err := adm.AcceptUpstreamTool(context.Background(), &controlplanev1.AcceptUpstreamToolRequest{Tool: "counter.add_note", Actor: "alice"})
	if err != nil || !ar.GetChanged() || !strings.Contains(ar.GetDiff(), "input_schema") {
		t.Fatalf("AcceptUpstreamTool = %v, %v; want the schema change accepted with its diff", ar, err)
	}
	r := submit(t, c, "counter.add_note", `{"text":"three","extra":"x"}`)
	waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	if got := len(up.effects()); got != n+1 {
		t.Errorf("effects after reload = %d, want %d", got, n+1)
	}
}

// TestCatalogUpstreamTools: `latch catalog upstream-tools` lists what the
// upstream offers, which tools are exposed under a contract, the
// annotations as hints, and a contract stub for the others; a held tool
// says so.
func TestCatalogUpstreamTools(t *testing.T) {
	up := newCounter(t)
	data := t.TempDir()
	startLatch(t, data, stdioCatalog(t, up, "review"))
	out, err := exec.Command(latchBin, "catalog", "upstream-tools", "counter", "--data", data).CombinedOutput()
	if err != nil {
		t.Fatalf("latch catalog upstream-tools: %v\n%s", err, out)
	}
	for _, want := range []string{
		"upstream counter (stdio " + countupBin,
		"add_note\n  exposed as counter.add_note",
		"rpc_error\n  not exposed: no contract in the catalog",
		"  called without a task: it does not advertise tasks for tools/call",
		"annotations (the upstream's hints, not trusted): readOnlyHint=false destructiveHint=true idempotentHint=true",
		`"required":["text"],"type":"object"}`,
		"  counter.rpc_error:\n    upstream: counter\n    tool: rpc_error\n    replay: review\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("upstream-tools output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "  counter.add_note:\n") {
		t.Errorf("upstream-tools output has a stub for add_note, which has a contract:\n%s", out)
	}

	// The upstream changes add_note's schema: the listing says it is held.
	os.WriteFile(filepath.Join(up.dir, "variant"), []byte("2"), 0o644)
	old := up.pid()
	syscall.Kill(old, syscall.SIGKILL)
	testbin.Eventually(t, "the listing to show add_note held", func() bool {
		out, _ = exec.Command(latchBin, "catalog", "upstream-tools", "counter", "--data", data).CombinedOutput()
		return strings.Contains(string(out), "HELD as counter.add_note: held: the upstream changed the input schema of counter.add_note since it was accepted")
	})

	out, err = exec.Command(latchBin, "catalog", "upstream-tools", "nosuch", "--data", data).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no such upstream") {
		t.Errorf("upstream-tools nosuch = %v:\n%s\nwant a failure naming the unknown upstream", err, out)
	}
}

// TestUpstreamAnswerClasses: a JSON-RPC error is completed with the error
// as the result; invalid params proves the call was refused before running
// (not_executed); an upstream that is down was never written to
// (not_executed, zero effects).
func TestUpstreamAnswerClasses(t *testing.T) {
	up := newCounter(t)
	url := up.serveHTTP()
	catalog := writeCatalog(t, fmt.Sprintf("upstreams:\n  counter:\n    transport: http\n    url: %s\n    allow_private: true\n    timeout: 20s\n", url)+fmt.Sprintf(contracts, "review")+`
  counter.rpc_error:
    upstream: counter
    tool: rpc_error
    replay: review
`)
	data := t.TempDir()
	startLatch(t, data, catalog)
	c := client(t, data)

	r := submit(t, c, "counter.rpc_error", `{}`)
	got := waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED, recordv1.State_STATE_NOT_EXECUTED)
	if got.GetExecution().GetState() != recordv1.State_STATE_COMPLETED || got.GetExecution().GetOutcome() != recordv1.Outcome_OUTCOME_FAILED_AT_TARGET ||
		!strings.Contains(string(got.GetResult().GetBody()), "backend exploded") || !strings.Contains(got.GetResult().GetSummary(), "-32000") {
		t.Errorf("JSON-RPC error: %v %v result %s / %q, want completed, failed_at_target, the error as the result", got.GetExecution().GetState(), got.GetExecution().GetOutcome(), got.GetResult().GetBody(), got.GetResult().GetSummary())
	}

	r = submit(t, c, "counter.add_note", `{"text":""}`) // the schema allows it; the upstream refuses: invalid params
	got = waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_NOT_EXECUTED, recordv1.State_STATE_COMPLETED)
	if got.GetExecution().GetState() != recordv1.State_STATE_NOT_EXECUTED || !strings.Contains(got.GetExecution().GetReason(), "-32602") {
		t.Errorf("invalid params: %v (%s), want not_executed citing -32602", got.GetExecution().GetState(), got.GetExecution().GetReason())
	}

	// The upstream goes down: nothing can be written.
	syscall.Kill(up.pid(), syscall.SIGKILL)
	testbin.Eventually(t, "the upstream to stop listening", func() bool {
		conn, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp"))
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
	r = submit(t, c, "counter.add_note", `{"text":"while down"}`)
	got = waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_NOT_EXECUTED, recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.State_STATE_NEEDS_REVIEW, recordv1.State_STATE_COMPLETED)
	if got.GetExecution().GetState() != recordv1.State_STATE_NOT_EXECUTED {
		t.Errorf("upstream down: %v (%s), want not_executed", got.GetExecution().GetState(), got.GetExecution().GetReason())
	}
	if n := len(up.effects()); n != 0 {
		t.Errorf("upstream effects = %d, want 0", n)
	}
}

// TestHTTPUpstreamCredentialFromVault: the upstream accepts only the vault's
// bearer token; until it is in the vault the tools are held (the upstream
// refuses Latch); once it is and the catalog is reloaded, calls carry it.
func TestHTTPUpstreamCredentialFromVault(t *testing.T) {
	up := newCounter(t)
	const token = "s3cret-upstream-token"
	cmd := exec.Command(countupBin, "--state", up.dir, "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "COUNTUP_TOKEN="+token)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var url string
	testbin.Eventually(t, "the HTTP upstream to listen", func() bool {
		b, err := os.ReadFile(filepath.Join(up.dir, "url"))
		url = string(b)
		return err == nil && url != ""
	})
	catalog := writeCatalog(t, fmt.Sprintf("upstreams:\n  counter:\n    transport: http\n    url: %s\n    allow_private: true\n    credential: counter-token\n", url)+fmt.Sprintf(contracts, "review"))
	data := t.TempDir()
	l := startLatch(t, data, catalog)
	c := client(t, data)
	if _, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "counter.add_note", Arguments: []byte(`{"text":"x"}`)}); err == nil {
		t.Fatal("add_note was accepted before the upstream could be reached with its credential; want it held (unknown tool)")
	}
	put := exec.Command(latchBin, "vault", "put", "counter-token", "--kind", "bearer", "--data", data)
	put.Stdin = strings.NewReader(token + "\n")
	if out, err := put.CombinedOutput(); err != nil {
		t.Fatalf("latch vault put: %v\n%s", err, out)
	}
	if out, err := exec.Command(latchBin, "catalog", "reload", "--data", data).CombinedOutput(); err != nil {
		t.Fatalf("latch catalog reload: %v\n%s", err, out)
	}
	r := submit(t, c, "counter.add_note", `{"text":"with the vault's token"}`)
	waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	if n := len(up.effects()); n != 1 {
		t.Errorf("upstream effects = %d, want 1", n)
	}
	auth, _ := os.ReadFile(filepath.Join(up.dir, "auth"))
	for _, a := range strings.Fields(strings.ReplaceAll(string(auth), "Bearer ", "Bearer_")) {
		if a != "Bearer_"+token {
			t.Errorf("the upstream was sent Authorization %q; want only the vault's bearer token", a)
		}
	}
	if len(auth) == 0 {
		t.Errorf("the upstream was never sent the vault's token")
	}
	if strings.Contains(l.stderr.String(), token) {
		t.Errorf("the control plane's log carries the upstream token")
	}
}

// TestUpstreamReachedAfterStartIsExposed: an HTTP upstream that is down when
// the control plane starts has its tools held; when it comes up, the
// control plane reloads the catalog itself (trigger upstream_reached) and
// the tools are exposed.
func TestUpstreamReachedAfterStartIsExposed(t *testing.T) {
	up := newCounter(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // reserved: the upstream listens here once the control plane runs
	catalog := httpCatalog(t, "http://"+addr+"/mcp", "review")
	data := t.TempDir()
	startLatch(t, data, catalog)
	c := client(t, data)
	if _, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "counter.add_note", Arguments: []byte(`{"text":"x"}`)}); err == nil {
		t.Fatal("add_note was accepted while its upstream was down at start; want it held")
	}
	cmd := exec.Command(countupBin, "--state", up.dir, "--http", addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	testbin.Eventually(t, "the upstream's tools to be exposed", func() bool {
		lt, err := c.ListTools(context.Background(), &controlplanev1.ListToolsRequest{})
		if err != nil {
			return false
		}
		for _, tl := range lt.GetTools() {
			if tl.GetName() == "counter.add_note" {
				return true
			}
		}
		return false
	})
	r := submit(t, c, "counter.add_note", `{"text":"after start"}`)
	waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
}

// TestSecretArgumentRedactedFromResult: a secret argument the upstream
// echoes is [REDACTED] in the stored result.
func TestSecretArgumentRedactedFromResult(t *testing.T) {
	up := newCounter(t)
	catalog := writeCatalog(t, fmt.Sprintf("upstreams:\n  counter:\n    transport: stdio\n    command: [%q, --state, %q]\n", countupBin, up.dir)+`
tools:
  counter.add_note:
    upstream: counter
    tool: add_note
    replay: review
    fingerprint: {secret: [text]}
`)
	data := t.TempDir()
	startLatch(t, data, catalog)
	c := client(t, data)
	r := submit(t, c, "counter.add_note", `{"text":"hunter2-secret-value"}`)
	got := waitState(t, c, r.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	if b := string(got.GetResult().GetBody()); strings.Contains(b, "hunter2-secret-value") || !strings.Contains(b, "[REDACTED]") {
		t.Errorf("stored result = %s, want the secret argument redacted", b)
	}
	if s := got.GetResult().GetSummary(); strings.Contains(s, "hunter2") {
		t.Errorf("summary = %q carries the secret", s)
	}
	if n := len(up.effects()); n != 1 {
		t.Errorf("upstream effects = %d, want 1 (the upstream got the value in clear)", n)
	}
}
