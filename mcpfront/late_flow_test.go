package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/internal/mcpwire"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// pushedPhrase is what an answer's note says when the outcome will be
// pushed (notes.go pushedTail).
func pushedPhrase(id string) string {
	return "sends the outcome to this session when execution " + id + " resolves"
}

//nolint:staticcheck // SA1019: notifications/message is the late results' notification (late.go)
type logParams = mcp.LoggingMessageParams

// logWaiter collects the notifications/message a go-sdk client receives.
type logWaiter struct{ ch chan *logParams }

func newLogWaiter() *logWaiter { return &logWaiter{ch: make(chan *logParams, 100)} }

func (w *logWaiter) handle(p *logParams) {
	select {
	case w.ch <- p:
	default: // more than the test reads
	}
}

// next waits (bounded) for the next message.
func (w *logWaiter) next(t testing.TB) *logParams {
	t.Helper()
	select {
	case p := <-w.ch:
		return p
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/message within 30s")
		return nil
	}
}

// none reports a message received so far.
func (w *logWaiter) none(t testing.TB) {
	t.Helper()
	select {
	case p := <-w.ch:
		t.Errorf("notifications/message %+v received, want none", p)
	default:
	}
}

// waitTapOpen waits (bounded) until session sid's GET stream is open in
// the front: the SDK sent its headers, and from then on writes to it.
func waitTapOpen(t testing.TB, f *Front, sid string) {
	t.Helper()
	for range 3000 { // 30 s: a loaded CI machine's bound
		if v, ok := f.taps.Load(sid); ok {
			tap := v.(*streamTap)
			tap.mu.Lock()
			open := tap.open
			tap.mu.Unlock()
			if open {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("session %s has no open GET stream in the front after 30s", sid)
}

func checkLateMessage(t testing.TB, p *logParams, id, state, outcome string) {
	t.Helper()
	data, _ := p.Data.(map[string]any)
	note, _ := data["note"].(string)
	read, _ := data["read_with"].(map[string]any)
	args, _ := read["arguments"].(map[string]any)
	if data["execution_id"] != id || data["state"] != state || data["outcome"] != outcome {
		t.Errorf("notifications/message data = %v, want execution %s %s/%s", data, id, state, outcome)
	}
	if !strings.Contains(note, id) || !strings.Contains(note, ToolExecutionStatus) || read["tool"] != ToolExecutionStatus || args["execution_id"] != id {
		t.Errorf("notifications/message data = %v, want a note naming %s and how to read it (%s)", data, id, ToolExecutionStatus)
	}
	if p.Logger != lateLogger || p.Meta[metaLateExecution] != id {
		t.Errorf("notifications/message logger %q _meta %v, want %q and %s=%s", p.Logger, p.Meta, lateLogger, metaLateExecution, id)
	}
}

// A call that outlasts the front's wait answers "still running" and says
// the outcome will be pushed; when the target answers, the go-sdk client
// receives notifications/message naming the execution, its end and how to
// read it, and reading it gives the full result.
func TestLateResultPushedToSession(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	st := newTestStack(t, stackOptions{WaitBound: 100 * time.Millisecond, Metrics: m})
	logs := newLogWaiter()
	cs := st.connect(t, "alice", clientOptions{Era: eraSession, StandaloneSSE: true, Logging: logs.handle})
	waitTapOpen(t, st.Front, cs.ID())

	res, cr := call(t, cs, "slow_job", map[string]any{"job": "late-1"})
	id := cr.ExecutionID
	if res.IsError || cr.State != "dispatched" || !strings.Contains(cr.Note, pushedPhrase(id)) || !strings.Contains(cr.Note, "do not retry") || !strings.Contains(cr.Note, ToolExecutionStatus) {
		t.Fatalf("call past the wait bound = IsError %v %+v; want dispatched, do not retry, pushed and how to read it", res.IsError, cr)
	}
	if n := testutil.ToFloat64(m.lateWatches); n != 1 {
		t.Errorf("latch_mcp_late_watches = %v, want 1", n)
	}
	// Reading it while it runs is one more answer: still one follow.
	_, status := call(t, cs, ToolExecutionStatus, map[string]any{"execution_id": id})
	if !strings.Contains(status.Note, pushedPhrase(id)) {
		t.Errorf("status read of the running execution: note %q, want it to say the outcome will be pushed", status.Note)
	}
	if n := testutil.ToFloat64(m.lateWatches); n != 1 {
		t.Errorf("latch_mcp_late_watches after a status read = %v, want 1 (one follow per execution and session)", n)
	}

	st.effect.release()
	p := logs.next(t)
	checkLateMessage(t, p, id, "completed", "succeeded")
	if p.Level != "notice" {
		t.Errorf("notifications/message level = %q, want notice", p.Level)
	}
	_, final := call(t, cs, ToolExecutionStatus, map[string]any{"execution_id": id})
	if final.State != "completed" && final.State != "delivered" || final.Result == nil || strings.Contains(final.Note, pushedPhrase(id)) {
		t.Errorf("status read after the push = %+v, want the completed result, no push promised", final)
	}
	waitCounter(t, m.latePushed.WithLabelValues(pushMessage, "sent"), 1, "latch_mcp_late_results_pushed_total{message,sent}")
	logs.none(t)
	if n := st.effect.count("/slow"); n != 1 {
		t.Errorf("effect count = %d, want 1", n)
	}
}

// A 2025-11-25 client that made a task and holds its session's GET stream
// open gets notifications/tasks/status for the task when it completes.
func TestLateTaskStatusPushed(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	st := newTestStack(t, stackOptions{Metrics: m})
	c := st.rpc(t, "alice", eraSession)
	events := c.stream(t)
	waitTapOpen(t, st.Front, c.session)

	id := c.callTask("slow_job", map[string]any{"job": "late-task"})["taskId"].(string)
	st.waitArrived(t)
	st.effect.release()
	var params map[string]any
	for params == nil {
		select {
		case msg, ok := <-events:
			if !ok {
				t.Fatal("the GET stream ended before the task's status notification")
			}
			if p, _ := msg["params"].(map[string]any); msg["method"] == mcpwire.NotificationTasksStatus && p["taskId"] == id {
				params = p
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no notifications/tasks/status within 30s")
		}
	}
	rel, _ := params["_meta"].(map[string]any)[MetaRelatedTask].(map[string]any)
	msg, _ := params["statusMessage"].(string)
	if params["status"] != "completed" || !strings.Contains(msg, id) || rel["taskId"] != id || params["createdAt"] == nil || params["lastUpdatedAt"] == nil {
		t.Errorf("notifications/tasks/status params = %v, want task %s completed, as tasks/get answers it", params, id)
	}
	if got := c.get(id); got["status"] != "completed" {
		t.Errorf("tasks/get after the notification = %v, want completed", got)
	}
	waitCounter(t, m.latePushed.WithLabelValues(pushTaskStatus, "sent"), 1, "latch_mcp_late_results_pushed_total{task_status,sent}")
}

// A session that closes before the execution resolves gets nothing, and
// the front's follow of it ends with the session: no goroutine is left.
func TestLateResultNotPushedAfterSessionClosed(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	st := newTestStack(t, stackOptions{WaitBound: 100 * time.Millisecond, Metrics: m})
	logs := newLogWaiter()
	cs := st.connect(t, "alice", clientOptions{Era: eraSession, StandaloneSSE: true, Logging: logs.handle})
	_, cr := call(t, cs, "slow_job", map[string]any{"job": "late-closed"})
	if !strings.Contains(cr.Note, pushedPhrase(cr.ExecutionID)) {
		t.Fatalf("call past the wait bound: note %q, want the push promised", cr.Note)
	}
	_ = cs.Close()

	ended := func() bool {
		w, sessions := st.Front.late.counts()
		return w == 0 && sessions == 0 && testutil.ToFloat64(m.lateUnpushed.WithLabelValues(lateSessionClosed)) == 1 &&
			!goroutineRunning("(*Front).followLate") && !goroutineRunning("(*Front).lateOpen")
	}
	for i := 0; i < 3000 && !ended(); i++ { // 30 s
		time.Sleep(10 * time.Millisecond)
	}
	if !ended() {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "mcpfront.(*Front).late") || strings.Contains(g, "mcpfront.(*Front).follow") {
				t.Logf("goroutine: %s", g)
			}
		}
		w, sessions := st.Front.late.counts()
		t.Fatalf("after the session closed: %d follows, %d sessions, unpushed{session_closed} %v, follow goroutine running %v; want all gone",
			w, sessions, testutil.ToFloat64(m.lateUnpushed.WithLabelValues(lateSessionClosed)), goroutineRunning("(*Front).followLate"))
	}
	st.effect.release()
	st.waitState(t, cr.ExecutionID, recordv1.State_STATE_COMPLETED)
	if n := testutil.ToFloat64(m.latePushed.WithLabelValues(pushMessage, "sent")); n != 0 {
		t.Errorf("latch_mcp_late_results_pushed_total{message,sent} = %v, want 0", n)
	}
	logs.none(t)
}

// A 2026-07-28 call has no session to push to: its note says how to read
// the outcome, and nothing is followed.
func TestLateResultNotPromisedWithoutSession(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	st := newTestStack(t, stackOptions{WaitBound: 100 * time.Millisecond, Metrics: m})
	cs := st.connect(t, "alice", clientOptions{Era: eraStateless})
	_, cr := call(t, cs, "slow_job", map[string]any{"job": "late-stateless"})
	if cr.State != "dispatched" || strings.Contains(cr.Note, "sends the outcome") || !strings.Contains(cr.Note, ToolExecutionStatus+" with execution_id "+cr.ExecutionID) {
		t.Errorf("stateless call past the wait bound = %+v; want dispatched, how to read it, no push promised", cr)
	}
	if w, _ := st.Front.late.counts(); w != 0 {
		t.Errorf("follows = %d, want 0", w)
	}
}

// The follow survives a control-plane restart: it asks again, and pushes
// the outcome of an approval given after the restart.
func TestLateResultAcrossControlPlaneRestart(t *testing.T) {
	effect := newEffectServer(t)
	cat := testCatalog()
	cat.Targets["effect"].BaseURL = effect.srv.URL
	key, _ := fingerprint.GenerateKey()
	cp := &restartableCP{t: t, dir: t.TempDir(), cat: cat, key: key}
	cp.start()
	t.Cleanup(func() { cp.stop() })
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return cp.lis.Load().DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := controlplanev1.NewControlPlaneClient(conn)
	m := NewMetrics(prometheus.NewRegistry())
	front, err := New(Config{Logger: testLogger(t), ControlPlane: client, PersonWait: 50 * time.Millisecond, Metrics: m}) // loopback actor "local"
	if err != nil {
		t.Fatal(err)
	}
	if err := front.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(front.HTTPHandler())
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close(); _ = front.Close() })
	st := &testStack{URL: hs.URL + "/mcp", tokens: map[string]string{}}
	logs := newLogWaiter()
	cs := st.connect(t, "local", clientOptions{Era: eraSession, StandaloneSSE: true, Logging: logs.handle})
	waitTapOpen(t, front, cs.ID())

	_, cr := call(t, cs, "approved_job", map[string]any{"job": "late-restart"})
	id := cr.ExecutionID
	if cr.State != "awaiting_approval" || !strings.Contains(cr.Note, pushedPhrase(id)) {
		t.Fatalf("approval-gated call = %+v, want awaiting_approval with the push promised", cr)
	}
	cp.stop()
	cp.start()
	waitReady(t, conn)
	if _, err := client.Approve(t.Context(), &controlplanev1.ApproveRequest{ExecutionId: id, Operator: "ops"}); err != nil {
		t.Fatalf("Approve after the restart: %v", err)
	}
	checkLateMessage(t, logs.next(t), id, "completed", "succeeded")
	if n := effect.count("/approved"); n != 1 {
		t.Errorf("effect count = %d, want 1", n)
	}
}

// waitCounter waits (bounded) for c to reach want: the front counts a push
// once its write returned, which may be after the client read it.
func waitCounter(t testing.TB, c prometheus.Collector, want float64, name string) {
	t.Helper()
	for range 3000 { // 30 s
		if testutil.ToFloat64(c) == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%s = %v, want %v", name, testutil.ToFloat64(c), want)
}

// goroutineRunning reports whether a goroutine's stack names fn.
func goroutineRunning(fn string) bool {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return bytes.Contains(buf[:n], []byte("mcpfront."+fn))
}

// stream opens the session's GET stream and sends each JSON-RPC message it
// carries on the channel, until the test ends.
func (c *rpcClient) stream(t testing.TB) <-chan map[string]any {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.session)
	req.Header.Set("Mcp-Protocol-Version", c.era)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		_ = resp.Body.Close()
		t.Fatalf("GET stream: HTTP %d", resp.StatusCode)
	}
	ch := make(chan map[string]any, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(data), &m) != nil {
				continue
			}
			select {
			case ch <- m:
			default: // more than the test reads
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ch
}
