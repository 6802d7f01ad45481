package httpchannel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/httpdispatch"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/testing/testlog"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// laggingOrders is an orders API whose status endpoint lags behind its
// writes, like a service with a queue in front of its database: a POST is
// held (the order is not yet committed) until the test releases it, and
// while it is held the by-key lookup answers 404 for a key it has received.
// Once released, the order is committed and the lookup answers 200 with the
// stored answer.
type laggingOrders struct {
	release chan struct{}
	// cut closes the client's connection as soon as the order is received
	// (the order goes on), instead of letting the client time out.
	cut bool

	mu        sync.Mutex
	held      map[string]bool   // client_ref → request received, not committed
	committed map[string][]byte // client_ref → stored answer
	effects   int
	absentFor int // 404s answered for a key the target had received
	arrived   chan struct{}
	done      chan struct{}
}

func newLaggingOrders(cut bool) *laggingOrders {
	return &laggingOrders{release: make(chan struct{}), cut: cut, held: map[string]bool{}, committed: map[string][]byte{},
		arrived: make(chan struct{}, 8), done: make(chan struct{}, 8)}
}

func (o *laggingOrders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/orders":
		var in struct {
			SKU       string `json:"sku"`
			ClientRef string `json:"client_ref"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.ClientRef == "" {
			http.Error(w, "want {sku, client_ref}", http.StatusBadRequest)
			return
		}
		o.mu.Lock()
		if o.held[in.ClientRef] || o.committed[in.ClientRef] != nil {
			o.mu.Unlock()
			http.Error(w, "duplicate client_ref", http.StatusConflict)
			return
		}
		o.held[in.ClientRef] = true
		o.mu.Unlock()
		o.arrived <- struct{}{}
		if o.cut {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic("laggingOrders: cannot hijack: " + err.Error())
			}
			conn.Close()
		}
		<-o.release // the client is cut off or times out meanwhile; the work goes on
		answer := fmt.Appendf(nil, `{"order_id":"ord_1","sku":%q,"client_ref":%q}`, in.SKU, in.ClientRef)
		o.mu.Lock()
		delete(o.held, in.ClientRef)
		o.committed[in.ClientRef] = answer
		o.effects++
		o.mu.Unlock()
		o.done <- struct{}{}
		if !o.cut {
			w.WriteHeader(http.StatusCreated)
			w.Write(answer) //nolint:errcheck // the client is long gone
		}
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/orders/by-key/"):
		key := strings.TrimPrefix(r.URL.Path, "/v1/orders/by-key/")
		o.mu.Lock()
		answer, held := o.committed[key], o.held[key]
		if answer == nil && held {
			o.absentFor++
		}
		o.mu.Unlock()
		if answer == nil {
			http.Error(w, "no such order", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer) //nolint:errcheck // test server
	default:
		http.NotFound(w, r)
	}
}

func (o *laggingOrders) counts() (effects, absentFor int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.effects, o.absentFor
}

const laggingCatalog = `
targets:
  orders:
    channel: http
    base_url: "%s"
    allow_private: true
    status: {path: "/v1/orders/by-key/{execution_id}"}
    settle: 1h
tools:
  place_order:
    description: Place an order; the execution ID travels in the body as client_ref.
    input_schema: {type: object, required: [sku], properties: {sku: {type: string}}}
    target: orders
    request: {method: POST, path: /v1/orders, body: {sku: "{{sku}}", client_ref: "{{execution_id}}"}}
    timeout: %s
    replay: status_query
`

// manualClock advances 1 ms per reading (so backoffs elapse) and jumps when
// the test says so.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Millisecond)
	return c.now
}

func (c *manualClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestLaggingStatusEndpointIsNotEvidence is issue 10's reproduction on the
// real engine, the real HTTP channel and a Badger store: the target holds
// the request past the dispatch timeout and its status endpoint answers 404
// for the key meanwhile. The 404 must not make the execution not_executed;
// the agent's re-issue attaches to the same execution; once the order is
// committed the next query finds it, and the target counts one effect.
func TestLaggingStatusEndpointIsNotEvidence(t *testing.T) {
	for _, tt := range []struct {
		name    string
		cut     bool
		timeout time.Duration
	}{
		{"dispatch timeout", false, 300 * time.Millisecond},
		{"connection cut while held", true, time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) { laggingStatusEndpoint(t, tt.cut, tt.timeout) })
	}
}

func laggingStatusEndpoint(t *testing.T, cut bool, timeout time.Duration) {
	orders := newLaggingOrders(cut)
	ts := httptest.NewServer(orders)
	t.Cleanup(ts.Close)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(orders.release) }) }
	t.Cleanup(release) // before ts.Close, which waits for the held handler

	kv, err := badgerkv.Open(t.TempDir(), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := tools.Parse("orders.yaml", []byte(fmt.Sprintf(laggingCatalog, ts.URL, timeout)))
	if err != nil {
		t.Fatal(err)
	}
	d, err := httpdispatch.New(httpdispatch.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	ch, err := New(Config{Dispatcher: d})
	if err != nil {
		t.Fatal(err)
	}
	fp, err := fingerprint.New(bytes.Repeat([]byte{5}, 32))
	if err != nil {
		t.Fatal(err)
	}
	clk := &manualClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	e, err := engine.New(engine.Config{
		Logger: testlog.New(t, hclog.Debug),
		Store:  st, Catalog: cat, Fingerprinter: fp, Clock: clk.Now,
		Channels: map[tools.Channel]engine.Channel{tools.ChannelHTTP: ch},
		Recovery: engine.RecoveryConfig{Interval: 5 * time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); st.Close() })

	submit := func() *engine.SubmitResult {
		t.Helper()
		r, err := e.Submit(t.Context(), engine.SubmitInput{Actor: "agent", Tool: "place_order", Arguments: json.RawMessage(`{"sku":"book-7"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := submit()
	id := first.Execution.GetId()
	<-orders.arrived

	// The dispatch times out while the order is held; recovery asks at
	// once and gets 404, which is early: the next query waits for the
	// settle point.
	x := waitExec(t, e, id, "an early absence journaled", func(x *recordv1.Execution) bool {
		return x.GetState() == recordv1.State_STATE_OUTCOME_UNKNOWN && x.GetNextRecoveryAt() != nil &&
			x.GetNextRecoveryAt().AsTime().Equal(x.GetLastSentAt().AsTime().Add(timeout+time.Hour))
	})
	if _, absent := orders.counts(); absent == 0 {
		t.Fatal("the status endpoint never answered 404 for the held key; the test did not reproduce the hole")
	}
	if x.GetRecoveryAttempts() != 0 {
		t.Errorf("recovery_attempts = %d, want 0: an early absence uses up no attempt", x.GetRecoveryAttempts())
	}

	// The agent's client was cut off; it re-issues the same call.
	again := submit()
	if again.Execution.GetId() != id || again.Disposition == recordv1.Disposition_DISPOSITION_NEW {
		t.Fatalf("re-issue = %s %s, want it attached to %s", again.Disposition, again.Execution.GetId(), id)
	}

	release()
	<-orders.done
	clk.Add(2 * time.Hour) // past the settle point: recovery asks again
	x = waitExec(t, e, id, "completed", func(x *recordv1.Execution) bool {
		return x.GetState() == recordv1.State_STATE_COMPLETED
	})
	if x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED || x.GetTargetStatus() != http.StatusOK {
		t.Errorf("completed with outcome %s, status %d; want succeeded with the status endpoint's 200", x.GetOutcome(), x.GetTargetStatus())
	}
	res, err := st.Result(id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.GetBody()), `"order_id":"ord_1"`) {
		t.Errorf("result body = %s, want the stored answer", res.GetBody())
	}
	if effects, _ := orders.counts(); effects != 1 {
		t.Errorf("the target counted %d effects, want 1", effects)
	}
	hist, err := st.History(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hist {
		if h.GetTo() == recordv1.State_STATE_NOT_EXECUTED {
			t.Errorf("journal records not_executed: %s", h.GetReason())
		}
	}
}

func waitExec(t *testing.T, e *engine.Engine, id, what string, ok func(*recordv1.Execution) bool) *recordv1.Execution {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w, err := e.Watch(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	var last *recordv1.Execution
	for x := range w {
		last = x
		if ok(x) {
			return x
		}
		if lifecycle.Settled(x.GetState()) {
			break // it will not change any more
		}
	}
	t.Fatalf("execution %s never reached %s; last seen %s: %s", id, what, last.GetState(), last.GetReason())
	return nil
}

const codesCatalog = `
targets:
  std:
    channel: http
    base_url: "%[1]s"
    allow_private: true
    idempotency_header: Idempotency-Key
    status: {path: "/s/{execution_id}"}
  custom:
    channel: http
    base_url: "%[1]s"
    allow_private: true
    idempotency_header: Idempotency-Key
    status: {path: "/s/{execution_id}", absent: [404], in_progress: [200, 423]}
tools:
  std_op:
    target: std
    request: {method: POST, path: /op}
    replay: status_query
  custom_op:
    target: custom
    request: {method: POST, path: /op}
    replay: status_query
`

// TestQueryAnswers checks what each status endpoint answer proves, with the
// default contract and with a target that overrides it, and what a re-send's
// "still in progress" answers mean.
func TestQueryAnswers(t *testing.T) {
	var mu sync.Mutex
	status := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		code := status
		mu.Unlock()
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"answer":%d}`, code)
	}))
	t.Cleanup(ts.Close)
	cat, err := tools.Parse("c.yaml", []byte(fmt.Sprintf(codesCatalog, ts.URL)))
	if err != nil {
		t.Fatal(err)
	}
	d, err := httpdispatch.New(httpdispatch.Config{DefaultTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	ch, err := New(Config{Dispatcher: d})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tool string
		code int
		want engine.AttemptClass
	}{
		{"std_op", 200, engine.Observed},
		{"std_op", 204, engine.Observed},
		{"std_op", 202, engine.Unknown},
		{"std_op", 409, engine.Unknown},
		{"std_op", 425, engine.Unknown},
		{"std_op", 404, engine.Absent},
		{"std_op", 410, engine.Absent},
		{"std_op", 500, engine.Unknown},
		{"std_op", 403, engine.Unknown},
		{"custom_op", 200, engine.Unknown},
		{"custom_op", 423, engine.Unknown},
		{"custom_op", 201, engine.Observed},
		{"custom_op", 410, engine.Unknown},
		{"custom_op", 404, engine.Absent},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.tool, tt.code), func(t *testing.T) {
			mu.Lock()
			status = tt.code
			mu.Unlock()
			a := ch.Query(t.Context(), callFor(cat, tt.tool, "act_q", nil))
			if a.Class != tt.want {
				t.Fatalf("Query answered %d = %+v, want class %v", tt.code, a, tt.want)
			}
			if a.Class == engine.Absent && a.Durable {
				t.Errorf("an HTTP absence was marked durable: %+v", a)
			}
			if a.Class == engine.Observed && (a.Result.GetStatus() != int32(tt.code) || tt.code != 204 && !strings.Contains(string(a.Result.GetBody()), fmt.Sprint(tt.code))) {
				t.Errorf("result = %d %s, want the status endpoint's own answer", a.Result.GetStatus(), a.Result.GetBody())
			}
		})
	}
	for _, code := range []int{409, 425} {
		mu.Lock()
		status = code
		mu.Unlock()
		c := callFor(cat, "std_op", "act_r", nil)
		c.Recovery = true
		if a := ch.Dispatch(t.Context(), c); a.Class != engine.Unknown {
			t.Errorf("recovery re-send answered %d = %+v, want Unknown (still in progress)", code, a)
		}
		c.Recovery = false
		if a := ch.Dispatch(t.Context(), c); a.Class != engine.Observed {
			t.Errorf("first dispatch answered %d = %+v, want Observed (the target's answer)", code, a)
		}
	}
}
