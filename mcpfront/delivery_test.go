package mcpfront

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/explain"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/mcpwire"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestCallerLeftBeforeTheAnswer: a stateless caller whose stream closes
// while its execution runs is recorded as having left before the answer
// (not delivered, the caller left), and explain says so; the identical
// call made again attaches and is delivered. A session's dropped stream is
// not the caller leaving (its answer waits for a resume): nothing is
// recorded for it, and the story says "delivery not recorded".
func TestCallerLeftBeforeTheAnswer(t *testing.T) {
	tests := []struct {
		era      string
		waitOK   time.Duration
		delivery string
		story    string
	}{
		{eraStateless, time.Minute, lifecycle.CallerLeftName, "No: not delivered, the caller left before the answer"},
		{eraSession, 500 * time.Millisecond, lifecycle.NotRecordedName, "Delivery not recorded"},
	}
	for _, tt := range tests {
		t.Run("era "+tt.era, func(t *testing.T) {
			st := newTestStack(t, stackOptions{WaitBound: tt.waitOK})
			c := newCutter("notifications/progress")
			cs := st.connect(t, "alice", clientOptions{Era: tt.era, RoundTrip: c, MaxRetries: -1})
			args := map[string]any{"job": "leave-" + tt.era}
			errc := make(chan error, 1)
			go func() {
				_, err := callWithProgress(context.Background(), cs, "slow_job", args)
				errc <- err
			}()
			id := st.waitArrived(t)
			<-c.cut
			if err := <-errc; err == nil {
				t.Fatalf("CallTool after a cut without retries = nil error, want an error")
			}
			st.waitCallDone(t)
			st.effect.release() // the answer comes after the caller left
			st.waitState(t, id, recordv1.State_STATE_COMPLETED)
			if tt.delivery == lifecycle.CallerLeftName {
				waitFor(t, "the caller_left record", func() bool {
					return lifecycle.DeliveryOf(st.get(t, id)) == recordv1.Delivery_DELIVERY_CALLER_LEFT
				})
			}
			x := st.get(t, id)
			hist, err := st.CP.History(t.Context(), &controlplanev1.HistoryRequest{ExecutionId: id})
			if err != nil {
				t.Fatal(err)
			}
			r := explain.Explain(x, hist.GetEntries())
			if got := strings.Join(r.Answers[3].Lines, " "); r.Delivery != tt.delivery || !strings.HasPrefix(got, tt.story) {
				t.Fatalf("explain delivery = %q, answer 4 = %q; want %q, starting %q", r.Delivery, got, tt.delivery, tt.story)
			}

			// The agent calls again: it attaches and gets the stored result.
			cs2 := st.connect(t, "alice", clientOptions{Era: tt.era})
			if _, cr := call(t, cs2, "slow_job", args); cr.ExecutionID != id {
				t.Fatalf("the identical call got execution %s, want %s", cr.ExecutionID, id)
			}
			st.waitState(t, id, recordv1.State_STATE_DELIVERED)
			hist, err = st.CP.History(t.Context(), &controlplanev1.HistoryRequest{ExecutionId: id})
			if err != nil {
				t.Fatal(err)
			}
			r = explain.Explain(st.get(t, id), hist.GetEntries())
			if got := strings.Join(r.Answers[3].Lines, " "); r.Delivery != lifecycle.DeliveredName || !strings.HasPrefix(got, "Yes") {
				t.Errorf("explain after the retry: delivery = %q, answer 4 = %q; want delivered, starting Yes", r.Delivery, got)
			}
			if n := st.effect.count("/slow"); n != 1 {
				t.Errorf("effect count = %d, want 1", n)
			}
		})
	}
}

// waitFor polls ok, bounded, as testbin.Eventually does.
func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < 6000 && time.Now().Before(deadline); i++ {
		if ok() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// reportsCP answers MarkDelivered as a control plane that is down (down
// set) or records the reports it is sent.
type reportsCP struct {
	controlplanev1.ControlPlaneClient
	mu   sync.Mutex
	down bool
	got  []string // "<id> <delivery>"
}

func (c *reportsCP) MarkDelivered(_ context.Context, req *controlplanev1.MarkDeliveredRequest, _ ...grpc.CallOption) (*controlplanev1.MarkDeliveredResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return nil, status.Error(codes.Unavailable, "connection refused")
	}
	for _, r := range req.GetReports() {
		c.got = append(c.got, r.GetExecutionId()+" "+lifecycle.DeliveryName(r.GetDelivery()))
	}
	return &controlplanev1.MarkDeliveredResponse{}, nil
}

func (c *reportsCP) recorded() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// TestDeliveryReportsKeptOnDisk: reports the control plane cannot take are
// kept in the state dir when the front stops, and the next front on that
// dir sends them at its start, then removes the file. Another front cannot
// use the dir meanwhile.
func TestDeliveryReportsKeptOnDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "front")
	down := &reportsCP{down: true}
	f, err := New(Config{Logger: testLogger(t), ControlPlane: down, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{ControlPlane: down, StateDir: dir}); !errors.Is(err, ErrStateDirInUse) {
		t.Errorf("a second front on the same state dir: New = %v, want ErrStateDirInUse", err)
	}
	f.expectDelivery("act_a")
	f.markDelivered("act_a")
	f.callerLeft("act_b")
	waitFor(t, "the reports on disk", func() bool { _, err := os.Stat(filepath.Join(dir, queueFile)); return err == nil })
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	up := &reportsCP{}
	f2, err := New(Config{Logger: testLogger(t), ControlPlane: up, StateDir: dir})
	if err != nil {
		t.Fatalf("New on the state dir after the first front closed: %v", err)
	}
	want := []string{"act_a delivered", "act_b not_delivered_caller_left"}
	waitFor(t, "the kept reports to be sent", func() bool { return len(up.recorded()) >= len(want) })
	if err := f2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := up.recorded(); !slices.Equal(got, want) {
		t.Errorf("reports sent by the next front = %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, queueFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after every report was taken: %v, want it removed", queueFile, err)
	}
}

// TestDeliveryQueueBounded: past its bound the queue drops its oldest
// reports, counted in the metric; the newest are kept.
func TestDeliveryQueueBounded(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	f, err := New(Config{Logger: testLogger(t), ControlPlane: &reportsCP{down: true}, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	rs := make([]*controlplanev1.DeliveryReport, maxQueued+5)
	for i := range rs {
		rs[i] = &controlplanev1.DeliveryReport{ExecutionId: fmt.Sprintf("act_%06d", i), Delivery: recordv1.Delivery_DELIVERY_DELIVERED}
	}
	f.deliverMu.Lock()
	f.queueLocked(rs, false)
	n, first := len(f.deliverQ), f.deliverQ[0].GetExecutionId()
	f.deliverMu.Unlock()
	if n != maxQueued || first != "act_000005" {
		t.Errorf("queue after %d reports = %d, first %s; want %d, first act_000005", len(rs), n, first, maxQueued)
	}
	if got := testutil.ToFloat64(m.deliveriesDropped); got != 5 {
		t.Errorf("latch_mcp_delivery_reports_dropped_total = %v, want 5", got)
	}
	if got := testutil.ToFloat64(m.deliveriesQueued); got != maxQueued {
		t.Errorf("latch_mcp_delivery_reports_queued = %v, want %d", got, maxQueued)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDeliveryQueueFileThatDoesNotDecode is moved aside; the front starts.
func TestDeliveryQueueFileThatDoesNotDecode(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, queueFile), []byte("\xff\xff\xff not a queue"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Logger: testLogger(t), ControlPlane: &reportsCP{}, StateDir: dir})
	if err != nil {
		t.Fatalf("New with a damaged queue file = %v, want it moved aside", err)
	}
	defer f.Close()
	aside, _ := filepath.Glob(filepath.Join(dir, queueFile+".bad-*"))
	if len(aside) != 1 {
		t.Errorf("files moved aside = %v, want one", aside)
	}
}

// failingWriter is a response whose client is gone: every write fails.
type failingWriter struct{ h http.Header }

func (w *failingWriter) Header() http.Header       { return w.h }
func (w *failingWriter) WriteHeader(int)           {}
func (w *failingWriter) Write([]byte) (int, error) { return 0, errors.New("write: broken pipe") }

// TestFailedWriteIsTheCallerLeaving: a stateless tools/call whose answer
// cannot be written reports the caller as gone, for the execution the
// front handed out only (a marker inside a target's body is not believed);
// the same failure on a session or a tasks/get reports nothing.
func TestFailedWriteIsTheCallerLeaving(t *testing.T) {
	tests := []struct {
		name, era, method string
		want              []string
	}{
		{"stateless call", mcpwire.Era20260728, "tools/call", []string{"act_x not_delivered_caller_left"}},
		{"session call", eraSession, "tools/call", nil},
		{"stateless tasks/get", mcpwire.Era20260728, mcpwire.MethodTasksGet, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := &reportsCP{}
			f, err := New(Config{Logger: testLogger(t), ControlPlane: cp})
			if err != nil {
				t.Fatal(err)
			}
			f.expectDelivery("act_x")
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":%q,"params":{}}`, tt.method)
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
			r.Header.Set(mcpwire.HeaderProtocolVersion, tt.era)
			f.serveObserved(&failingWriter{h: http.Header{}}, r, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`data: {"result":{"_meta":{"latch/delivery":"act_x"},"structuredContent":{"body":{"latch/delivery":"act_forged"}}}}` + "\n\n"))
			}))
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if got := cp.recorded(); !slices.Equal(got, tt.want) {
				t.Errorf("reports after a failed write = %v, want %v", got, tt.want)
			}
		})
	}
}
