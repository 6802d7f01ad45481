package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/controlplane/store/pgkv"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/testing/pgtest"
	"github.com/latchhq/latch/internal/testing/testbin"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

const testCatalog = `
targets:
  api:
    channel: http
    base_url: http://127.0.0.1:1
    allow_private: true
    idempotency_header: Idempotency-Key
    status: {method: GET, path: "/by-key/{execution_id}"}
    timeout: 1ms
    settle: 0s
  orders:
    channel: http
    base_url: http://127.0.0.1:1
    allow_private: true
    status: {path: "/orders/by-key/{execution_id}"}
    timeout: 1m
    settle: 1h
  here: {channel: local, hostagent_socket: /run/latch-test.sock}
tools:
  order:
    description: Place an order; the key travels in the body.
    input_schema: {type: object, required: [sku], properties: {sku: {type: string}}}
    target: orders
    request: {method: POST, path: /orders, body: {sku: "{{sku}}", client_ref: "{{execution_id}}"}}
    replay: status_query
  deploy:
    description: Deploy.
    input_schema: {type: object, required: [service, version], properties: {service: {type: string}, version: {type: string}, region: {type: string}, note: {type: string}}}
    defaults: {region: us-east-1}
    target: api
    request: {method: POST, path: /deploy, body: {service: "{{service}}", version: "{{version}}"}}
    replay: idempotency_key
    attach_window: 1h
    fingerprint: {ignore: [note]}
  ticket:
    description: Ticket.
    input_schema: {type: object, required: [title], properties: {title: {type: string}}}
    target: api
    request: {method: POST, path: /tickets, body: {title: "{{title}}"}}
    replay: status_query
  rotate:
    description: Rotate.
    input_schema: {type: object, required: [name, new_secret], properties: {name: {type: string}, new_secret: {type: string}}}
    target: api
    request: {method: POST, path: /rotate, body: {name: "{{name}}", secret: "{{new_secret}}"}}
    replay: review
    approval: every_call
    fingerprint: {secret: [new_secret]}
  pay:
    description: Pay.
    input_schema: {type: object, required: [amount], properties: {amount: {type: number}, secret_memo: {type: string}}}
    target: api
    request: {method: POST, path: /pay, body: {amount: "{{amount}}", memo: "{{secret_memo}}"}}
    replay: review
    fingerprint: {secret: [secret_memo]}
  build:
    description: Build one app, a directory under /srv.
    input_schema: {type: object, required: [app], properties: {app: {type: string}}}
    target: here
    command: [/usr/bin/make, "{{app}}"]
    positional_after_double_dash: [app]
    cwd: "/srv/{{app}}"
    replay: status_query
  look:
    description: Look.
    input_schema: {type: object, properties: {}}
    target: api
    request: {method: GET, path: /look}
    replay: read_only
`

// fakeChannel scripts channel answers and counts effects.
type fakeChannel struct {
	mu       sync.Mutex
	dispatch []AttemptClass // answers in order; Observed after the script runs out
	query    []AttemptClass
	effects  atomic.Int32
	calls    atomic.Int32
	queries  atomic.Int32
	seen     []map[string]any
	observed []bool        // Call.Observed of each dispatch
	block    chan struct{} // when set, Dispatch waits on it
	// delay is the last Dispatch's Call.Delay.
	delay time.Duration
	// echo, when set, makes an observed answer repeat every argument in
	// its body, headers, summary and reason, as a careless target would.
	echo bool
}

// echoed is an answer that repeats the call's arguments everywhere.
func echoed(c Call) Attempt {
	var all []string
	for k, v := range c.Arguments {
		all = append(all, fmt.Sprintf("%s=%v", k, v))
	}
	text := strings.Join(all, " ")
	body, _ := json.Marshal(map[string]any{"you_sent": c.Arguments, "html": "<" + text + ">"})
	headers := map[string]string{"X-Echo": text}
	for _, v := range c.Arguments {
		headers[fmt.Sprintf("X-Echo-%v", v)] = "1"
	}
	return Attempt{Class: Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, Reason: "echo " + text,
		Result: &recordv1.Result{Status: 200, Headers: headers, Body: body, Summary: "printed " + text}}
}

func (f *fakeChannel) next(list *[]AttemptClass) AttemptClass {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(*list) == 0 {
		return Observed
	}
	c := (*list)[0]
	*list = (*list)[1:]
	return c
}

func (f *fakeChannel) Dispatch(ctx context.Context, c Call) Attempt {
	f.calls.Add(1)
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	f.delay = c.Delay
	f.seen = append(f.seen, c.Arguments)
	f.observed = append(f.observed, c.Observed())
	f.mu.Unlock()
	switch cl := f.next(&f.dispatch); cl {
	case Observed:
		f.effects.Add(1)
		if f.echo {
			return echoed(c)
		}
		return Attempt{Class: Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, Result: &recordv1.Result{Status: 201, Body: []byte(`{"ok":true}`)}, Reason: "201"}
	case Unknown:
		f.effects.Add(1) // the effect happened; the answer was lost
		return Attempt{Class: Unknown, Reason: "connection reset after the request was written"}
	case finalNotSent:
		return Attempt{Class: NotSent, Final: true, Reason: "gate never opened"}
	default:
		return Attempt{Class: cl, Reason: "dial refused"}
	}
}

// finalNotSent scripts a NotSent that must not be retried under the same ID.
const finalNotSent AttemptClass = 100

// Identity is httpchannel's rule, which the fakes stand in for.
func (f *fakeChannel) Identity(tool *tools.Tool, target *tools.Target) Identity {
	return httpIdentity(tool, target)
}

// httpIdentity is httpchannel.Channel.Identity (which this package cannot
// import): scheme, host and path template.
func httpIdentity(tool *tools.Tool, target *tools.Target) Identity {
	if tool.Request == nil {
		return Identity{}
	}
	base := target.BaseURL
	if u, err := url.Parse(target.BaseURL); err == nil {
		base = u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/")
	}
	return Identity{Method: tool.Request.Method, Target: base + tool.Request.Path}
}

func (f *fakeChannel) Query(ctx context.Context, c Call) Attempt {
	f.queries.Add(1)
	switch cl := f.next(&f.query); cl {
	case Observed:
		if f.echo {
			return echoed(c)
		}
		return Attempt{Class: Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, Result: &recordv1.Result{Status: 200}, Reason: "status 200"}
	default:
		return Attempt{Class: cl, Reason: "scripted"}
	}
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now advances the clock by 1 ms per reading, so backoffs elapse.
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Millisecond)
	return c.now
}
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type harness struct {
	e     *Engine
	st    *store.Store
	ch    *fakeChannel
	clock *clock
	dir   string
}

func TestMain(m *testing.M) { pgtest.Main(m) }

func newHarness(tb testing.TB, badgerDir string, ch *fakeChannel) *harness {
	return newHarnessWith(tb, badgerDir, ch, func(*Config) {})
}

func newHarnessWith(tb testing.TB, badgerDir string, ch *fakeChannel, adjust func(*Config)) *harness {
	tb.Helper()
	var kv store.KV = memkv.New()
	if badgerDir != "" {
		b, err := badgerkv.Open(badgerDir, badgerkv.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		kv = b
	}
	return newHarnessKV(tb, kv, badgerDir, ch, adjust)
}

// newHarnessKV is newHarnessWith on a given backend (closed with the store).
func newHarnessKV(tb testing.TB, kv store.KV, badgerDir string, ch *fakeChannel, adjust func(*Config)) *harness {
	tb.Helper()
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		tb.Fatal(err)
	}
	cat, err := tools.Parse("test.yaml", []byte(testCatalog))
	if err != nil {
		tb.Fatal(err)
	}
	fp, err := fingerprint.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		tb.Fatal(err)
	}
	if ch == nil {
		ch = &fakeChannel{}
	}
	clk := &clock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	cfg := Config{
		Logger: hclog.NewNullLogger(), Store: st, Catalog: cat, Fingerprinter: fp,
		Channels: map[tools.Channel]Channel{tools.ChannelHTTP: ch}, Clock: clk.Now,
		Recovery: RecoveryConfig{Interval: 5 * time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, MaxAttempts: 5},
	}
	adjust(&cfg)
	e, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	h := &harness{e: e, st: st, ch: ch, clock: clk, dir: badgerDir}
	tb.Cleanup(h.close)
	return h
}

var closed sync.Map

func (h *harness) close() {
	if _, done := closed.LoadOrStore(h, true); done {
		return
	}
	h.e.Close()
	h.st.Close()
}

func (h *harness) submit(tb testing.TB, actor, tool, args string) *SubmitResult {
	tb.Helper()
	r, err := h.e.Submit(context.Background(), SubmitInput{Actor: actor, Tool: tool, Arguments: json.RawMessage(args)})
	if err != nil {
		tb.Fatalf("Submit(%s, %s) = %v", tool, args, err)
	}
	return r
}

// waitState waits (bounded) until the execution rests in one of want.
func (h *harness) waitState(tb testing.TB, id string, want ...recordv1.State) *recordv1.Execution {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, err := h.e.Watch(ctx, id, "")
	if err != nil {
		tb.Fatal(err)
	}
	var last *recordv1.Execution
	for x := range ch {
		last = x
		for _, w := range want {
			if x.GetState() == w {
				return x
			}
		}
	}
	tb.Fatalf("execution %s stayed %s, want one of %v", id, lifecycle.Name(last.GetState()), want)
	return nil
}

func TestSubmitDispatchesAndCompletes(t *testing.T) {
	h := newHarness(t, t.TempDir(), nil)
	r := h.submit(t, "alice", "deploy", `{"service":"api","version":"1.2.3"}`)
	if r.Disposition != recordv1.Disposition_DISPOSITION_NEW {
		t.Fatalf("disposition = %v, want new", r.Disposition)
	}
	x := h.waitState(t, r.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	if x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED || x.GetTargetStatus() != 201 || x.GetResultRef() == "" {
		t.Errorf("completed execution = %v, want succeeded, 201, a result_ref", x)
	}
	for name, ts := range map[string]any{"accepted_at": x.GetAcceptedAt(), "authorized_at": x.GetAuthorizedAt(), "dispatched_at": x.GetDispatchedAt(), "completed_at": x.GetCompletedAt()} {
		if ts == nil {
			t.Errorf("%s not stamped", name)
		}
	}
	// session_started, then accepted, authorized, dispatched, completed.
	if got := h.st.JournalSize(); got != 5 {
		t.Errorf("journal size = %d, want 5", got)
	}
	if _, err := h.e.MarkDelivered(t.Context(), x.GetId()); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := h.e.Get(x.GetId(), ""); got.GetState() != recordv1.State_STATE_DELIVERED || got.GetDeliveredAt() == nil {
		t.Errorf("after MarkDelivered: %v", got)
	}
	if got := h.ch.effects.Load(); got != 1 {
		t.Errorf("effects = %d, want 1", got)
	}
	if h.ch.seen[0]["region"] != "us-east-1" {
		t.Errorf("default not materialised in the dispatched arguments: %v", h.ch.seen[0])
	}
	// The accepted record carries the intent and arguments; later records
	// leave them out, and the stored execution keeps them.
	hist, err := h.e.History(x.GetId(), "")
	if err != nil || len(hist) < 4 {
		t.Fatalf("History = %d records, %v", len(hist), err)
	}
	for i, rec := range hist {
		carries := len(rec.GetExecution().GetArguments()) > 0 && len(rec.GetExecution().GetCanonicalIntent()) > 0
		if want := i == 0; carries != want {
			t.Errorf("record %d (%s) carries intent and arguments: %v, want %v", i, rec.GetTo(), carries, want)
		}
	}
	if got, _, _ := h.e.Get(x.GetId(), ""); len(got.GetArguments()) == 0 || len(got.GetCanonicalIntent()) == 0 {
		t.Errorf("stored execution lost its intent or arguments: %v", got)
	}
}

// openPostgres opens a fresh PostgreSQL database on the test server.
func openPostgres(tb testing.TB) store.KV {
	tb.Helper()
	kv, err := pgkv.Open(context.Background(), pgtest.URL(tb), pgkv.Options{Migrate: true})
	if err != nil {
		tb.Fatal(err)
	}
	return kv
}

func TestConcurrentIdenticalSubmitsMakeOneExecution(t *testing.T) {
	for _, backend := range []string{"badger", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var h *harness
			if backend == "postgres" {
				h = newHarnessKV(t, openPostgres(t), "", nil, func(*Config) {})
			} else {
				h = newHarness(t, t.TempDir(), nil)
			}
			concurrentIdenticalSubmits(t, h)
		})
	}
}

func concurrentIdenticalSubmits(t *testing.T, h *harness) {
	const n = 1000
	var wg sync.WaitGroup
	results := make([]*SubmitResult, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Key order and ignored fields differ; the intent does not.
			args := `{"service":"api","version":"2.0.0"}`
			if i%2 == 1 {
				args = fmt.Sprintf(`{"version":"2.0.0","note":"try %d","service":"api"}`, i)
			}
			r, err := h.e.Submit(context.Background(), SubmitInput{Actor: "alice", Tool: "deploy", Arguments: json.RawMessage(args)})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = r
		}()
	}
	wg.Wait()
	ids := map[string]int{}
	news := 0
	for _, r := range results {
		if r == nil {
			continue
		}
		ids[r.Execution.GetId()]++
		if r.Disposition == recordv1.Disposition_DISPOSITION_NEW {
			news++
		}
	}
	if len(ids) != 1 || news != 1 {
		t.Fatalf("%d concurrent identical submits: %d executions, %d new; want 1 and 1", n, len(ids), news)
	}
	for id := range ids {
		h.waitState(t, id, recordv1.State_STATE_COMPLETED)
	}
	if got := h.ch.effects.Load(); got != 1 {
		t.Errorf("effects = %d, want 1", got)
	}
}

func TestMatchingRules(t *testing.T) {
	h := newHarness(t, "", nil)
	args := `{"service":"api","version":"3.0.0"}`
	first := h.submit(t, "alice", "deploy", args)
	h.waitState(t, first.Execution.GetId(), recordv1.State_STATE_COMPLETED)

	again := h.submit(t, "alice", "deploy", args)
	if again.Disposition != recordv1.Disposition_DISPOSITION_ATTACHED || again.Execution.GetId() != first.Execution.GetId() {
		t.Errorf("retry within window: %v %s, want attached to %s", again.Disposition, again.Execution.GetId(), first.Execution.GetId())
	}
	other := h.submit(t, "bob", "deploy", args)
	if other.Disposition != recordv1.Disposition_DISPOSITION_NEW {
		t.Errorf("another actor: disposition %v, want new", other.Disposition)
	}
	scoped, err := h.e.Submit(t.Context(), SubmitInput{Actor: "alice", Tool: "deploy", Arguments: json.RawMessage(args), Scope: "run-7"})
	if err != nil || scoped.Disposition != recordv1.Disposition_DISPOSITION_NEW {
		t.Errorf("explicit run scope: %v %v, want a new execution", scoped.GetDisposition(), err)
	}
	changed := h.submit(t, "alice", "deploy", `{"service":"api","version":"3.0.1"}`)
	if changed.Disposition != recordv1.Disposition_DISPOSITION_NEW {
		t.Errorf("different argument: disposition %v, want new", changed.Disposition)
	}
	repeat := h.submit(t, "alice", "deploy", fmt.Sprintf(`{"service":"api","version":"3.0.0","repeat_of":%q}`, first.Execution.GetId()))
	if repeat.Disposition != recordv1.Disposition_DISPOSITION_NEW || repeat.Execution.GetRepeatOf() != first.Execution.GetId() {
		t.Errorf("repeat_of: %v, want a new execution citing the first", repeat.Disposition)
	}
	h.waitState(t, repeat.Execution.GetId(), recordv1.State_STATE_COMPLETED)

	h.clock.Add(2 * time.Hour)
	late := h.submit(t, "alice", "deploy", args)
	if late.Disposition != recordv1.Disposition_DISPOSITION_NEW {
		t.Errorf("retry after the attach window: %v, want new", late.Disposition)
	}
}

func (r *SubmitResult) GetDisposition() recordv1.Disposition {
	if r == nil {
		return 0
	}
	return r.Disposition
}

func TestBadInputWritesNothing(t *testing.T) {
	h := newHarness(t, "", nil)
	done := h.submit(t, "alice", "deploy", `{"service":"a","version":"1"}`)
	h.waitState(t, done.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	before := h.st.JournalSize()
	tests := []struct {
		name string
		in   SubmitInput
		want error
	}{
		{"unknown tool", SubmitInput{Actor: "a", Tool: "nope", Arguments: json.RawMessage(`{}`)}, ErrUnknownTool},
		{"no actor", SubmitInput{Tool: "deploy", Arguments: json.RawMessage(`{}`)}, ErrInvalidRequest},
		{"missing required", SubmitInput{Actor: "a", Tool: "deploy", Arguments: json.RawMessage(`{"service":"a"}`)}, ErrInvalidArguments},
		{"wrong type", SubmitInput{Actor: "a", Tool: "deploy", Arguments: json.RawMessage(`{"service":1,"version":"1"}`)}, ErrInvalidArguments},
		{"malformed", SubmitInput{Actor: "a", Tool: "deploy", Arguments: json.RawMessage(`{"service":`)}, ErrInvalidArguments},
		{"not an object", SubmitInput{Actor: "a", Tool: "deploy", Arguments: json.RawMessage(`[1]`)}, ErrInvalidArguments},
		{"oversized", SubmitInput{Actor: "a", Tool: "deploy", Arguments: json.RawMessage(`{"service":"` + string(bytes.Repeat([]byte("x"), 1<<20)) + `","version":"1"}`)}, ErrInvalidArguments},
		{"unknown repeat_of", SubmitInput{Actor: "alice", Tool: "deploy", Arguments: json.RawMessage(`{"service":"a","version":"1","repeat_of":"act_nope"}`)}, ErrBadRepeatOf},
		{"foreign repeat_of", SubmitInput{Actor: "mallory", Tool: "deploy", Arguments: json.RawMessage(`{"service":"a","version":"1","repeat_of":"` + done.Execution.GetId() + `"}`)}, ErrBadRepeatOf},
		{"repeat_of on read_only", SubmitInput{Actor: "alice", Tool: "look", Arguments: json.RawMessage(`{"repeat_of":"` + done.Execution.GetId() + `"}`)}, ErrInvalidArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.e.Submit(t.Context(), tt.in)
			if !errors.Is(err, tt.want) {
				t.Errorf("Submit = %v, want %v", err, tt.want)
			}
			// A refusal the caller can act on carries its problem, written
			// for the caller (the API's ErrorInfo "problem").
			switch p := Problem(err); {
			case errors.Is(tt.want, ErrBadRepeatOf):
				if !strings.HasPrefix(p, "repeat_of does not cite a settled execution of this actor and tool: ") {
					t.Errorf("Problem(%v) = %q, want it to say what repeat_of must cite", err, p)
				}
			case errors.Is(tt.want, ErrUnknownTool), errors.Is(tt.want, ErrInvalidArguments):
				if p == "" || strings.HasPrefix(p, "engine:") || strings.HasPrefix(p, "tools:") {
					t.Errorf("Problem(%v) = %q, want the problem without package prefixes", err, p)
				}
			}
		})
	}
	if got := h.st.JournalSize(); got != before {
		t.Errorf("journal grew from %d to %d on refused requests", before, got)
	}
}

func TestUnknownOutcomeRecovery(t *testing.T) {
	tests := []struct {
		name     string
		tool     string
		args     string
		dispatch []AttemptClass
		query    []AttemptClass
		want     recordv1.State
		effects  int32
	}{
		{"idempotency_key re-sends under the same id", "deploy", `{"service":"a","version":"9"}`, []AttemptClass{Unknown, Unknown}, nil, recordv1.State_STATE_COMPLETED, 3},
		{"status_query finds the result", "ticket", `{"title":"t"}`, []AttemptClass{Unknown}, []AttemptClass{Unknown, Observed}, recordv1.State_STATE_COMPLETED, 1},
		{"status_query finds nothing", "ticket", `{"title":"t"}`, []AttemptClass{NotSent, NotSent, NotSent}, nil, recordv1.State_STATE_NOT_EXECUTED, 0},
		{"status_query: target never saw it", "ticket", `{"title":"u"}`, []AttemptClass{Unknown}, []AttemptClass{Absent, Absent}, recordv1.State_STATE_NOT_EXECUTED, 1},
		{"review waits for an operator", "pay", `{"amount":5}`, []AttemptClass{Unknown}, nil, recordv1.State_STATE_NEEDS_REVIEW, 1},
		{"gives up after bounded attempts", "ticket", `{"title":"v"}`, []AttemptClass{Unknown}, []AttemptClass{Unknown, Unknown, Unknown, Unknown, Unknown, Unknown, Unknown}, recordv1.State_STATE_NEEDS_REVIEW, 1},
		{"not sent is re-dispatched", "deploy", `{"service":"b","version":"1"}`, []AttemptClass{NotSent, NotSent}, nil, recordv1.State_STATE_COMPLETED, 1},
		{"final not sent rests at once", "deploy", `{"service":"c","version":"1"}`, []AttemptClass{finalNotSent}, nil, recordv1.State_STATE_NOT_EXECUTED, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, "", &fakeChannel{dispatch: tt.dispatch, query: tt.query})
			r := h.submit(t, "alice", tt.tool, tt.args)
			x := h.waitState(t, r.Execution.GetId(), tt.want)
			// The idempotency_key fake counts an effect per answered send;
			// a real target dedupes them by key (see httpchannel tests).
			if got := h.ch.effects.Load(); got != tt.effects {
				t.Errorf("channel effects = %d, want %d", got, tt.effects)
			}
			if x.GetState() == recordv1.State_STATE_NEEDS_REVIEW {
				res, err := h.e.Resolve(t.Context(), ResolveInput{ID: x.GetId(), Completed: true, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, Reason: "checked the ledger", Operator: "ops"})
				if err != nil || res.GetState() != recordv1.State_STATE_COMPLETED {
					t.Errorf("Resolve = %v, %v; want completed", res, err)
				}
			}
		})
	}
}

func TestCancelOnlyBeforeDispatch(t *testing.T) {
	h := newHarness(t, "", nil)
	r := h.submit(t, "alice", "rotate", `{"name":"db","new_secret":"s3cr3t"}`)
	if r.Execution.GetState() != recordv1.State_STATE_AWAITING_APPROVAL {
		t.Fatalf("every_call tool: state %v, want awaiting_approval", r.Execution.GetState())
	}
	again := h.submit(t, "alice", "rotate", `{"name":"db","new_secret":"s3cr3t"}`)
	if again.Execution.GetId() != r.Execution.GetId() || again.Disposition != recordv1.Disposition_DISPOSITION_ATTACHED {
		t.Errorf("retry while awaiting approval: %v %s, want attached", again.Disposition, again.Execution.GetId())
	}
	if _, err := h.e.Cancel(t.Context(), r.Execution.GetId(), "mallory", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("Cancel by another actor = %v, want ErrNotFound", err)
	}
	x, err := h.e.Cancel(t.Context(), r.Execution.GetId(), "alice", "")
	if err != nil || x.GetState() != recordv1.State_STATE_CANCELLED {
		t.Fatalf("Cancel = %v, %v", x, err)
	}
	done := h.submit(t, "alice", "deploy", `{"service":"c","version":"1"}`)
	h.waitState(t, done.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	if _, err := h.e.Cancel(t.Context(), done.Execution.GetId(), "alice", ""); !errors.Is(err, ErrTooLate) {
		t.Errorf("Cancel after dispatch = %v, want ErrTooLate", err)
	}
}

func TestApproveDispatchesWithSecret(t *testing.T) {
	h := newHarness(t, "", nil)
	r := h.submit(t, "alice", "rotate", `{"name":"db","new_secret":"s3cr3t"}`)
	if _, err := h.e.Approve(t.Context(), r.Execution.GetId(), "ops", "ticket 12"); err != nil {
		t.Fatal(err)
	}
	// rotate is review-class; the fake observes an answer.
	h.waitState(t, r.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	if got := h.ch.seen[0]["new_secret"]; got != "s3cr3t" {
		t.Errorf("dispatched secret argument = %v, want the clear value (memory only)", got)
	}
}

// TestSecretNeverReachesDisk plants a secret argument, runs executions
// through every path, against a target that echoes every argument in its
// body, headers, summary and reason, and proves the secret's bytes are
// nowhere in the data dir nor in anything the engine returns for them.
func TestSecretNeverReachesDisk(t *testing.T) {
	dir := t.TempDir()
	secret := "Zq9-planted-secret-7781</&>"
	jsonSecret, _ := json.Marshal(secret)
	h := newHarness(t, dir, &fakeChannel{dispatch: []AttemptClass{Unknown}, echo: true})
	a := h.submit(t, "alice", "pay", `{"amount":10,"secret_memo":`+string(jsonSecret)+`}`)
	h.waitState(t, a.Execution.GetId(), recordv1.State_STATE_NEEDS_REVIEW)
	b := h.submit(t, "alice", "pay", `{"amount":11,"secret_memo":`+string(jsonSecret)+`}`)
	h.waitState(t, b.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	again := h.submit(t, "alice", "pay", `{"amount":11,"secret_memo":`+string(jsonSecret)+`}`) // attaches
	r := h.submit(t, "alice", "rotate", `{"name":"db","new_secret":`+string(jsonSecret)+`}`)
	h.e.Approve(t.Context(), r.Execution.GetId(), "ops", "ok")
	h.waitState(t, r.Execution.GetId(), recordv1.State_STATE_COMPLETED)

	// What an agent gets back: the execution, its stored result, its history.
	needles := [][]byte{[]byte(secret), jsonSecret[1 : len(jsonSecret)-1], []byte("Zq9-planted-secret-7781")}
	for _, id := range []string{a.Execution.GetId(), b.Execution.GetId(), again.Execution.GetId(), r.Execution.GetId()} {
		x, res, err := h.e.Get(id, "alice")
		if err != nil {
			t.Fatal(err)
		}
		hist, err := h.e.History(id, "alice")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal([]any{x, res, hist})
		for _, n := range needles {
			if bytes.Contains(got, n) {
				t.Errorf("execution %s: what the engine returns holds the secret (%q):\n%s", id, n, got)
			}
		}
		if x.GetState() == recordv1.State_STATE_COMPLETED && !bytes.Contains(res.GetBody(), []byte(redactedMark)) {
			t.Errorf("execution %s: stored body %q shows no redaction, so the echo did not happen", id, res.GetBody())
		}
	}
	h.close()
	found := false
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range needles {
			if bytes.Contains(data, n) {
				t.Errorf("secret (%q) found in %s", n, p)
				found = true
			}
		}
		return nil
	})
	if !found && h.ch.seen[0]["secret_memo"] != secret {
		t.Errorf("the channel did not get the secret, so the test proves nothing")
	}
}

func TestRestartRecoversDispatched(t *testing.T) {
	dir := t.TempDir()
	block := make(chan struct{})
	h := newHarness(t, dir, &fakeChannel{block: block})
	r := h.submit(t, "alice", "ticket", `{"title":"crash"}`)
	h.waitState(t, r.Execution.GetId(), recordv1.State_STATE_DISPATCHED)
	// Simulate the crash: stop the store under the blocked dispatch.
	h.st.Close()
	close(block)
	h.e.Close()

	h2 := newHarness(t, dir, &fakeChannel{query: []AttemptClass{Observed}})
	x := h2.waitState(t, r.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	if h2.ch.calls.Load() != 0 || h2.ch.queries.Load() != 1 {
		t.Errorf("after restart: %d dispatches, %d queries; want 0 and 1 (ask, never re-send)", h2.ch.calls.Load(), h2.ch.queries.Load())
	}
	if x.GetDispatchedAt() == nil {
		t.Error("dispatched_at lost across restart")
	}
}

// TestPendingApprovalsExpireAndVoid runs in a synctest bubble: the expiry
// is the approvals loop's ticker and the TTL on the bubble's clock, so
// time passes only when every goroutine waits.
func TestPendingApprovalsExpireAndVoid(t *testing.T) {
	synctest.Test(t, testPendingApprovalsExpireAndVoid)
}

func testPendingApprovalsExpireAndVoid(t *testing.T) {
	h := newHarnessWith(t, "", nil, func(c *Config) {
		c.Clock = time.Now // the bubble's clock
		c.Recovery.Interval = time.Minute
	})
	args := `{"name":"db","new_secret":"s"}`
	first := h.submit(t, "alice", "rotate", args)
	// Two retries while pending: one card (attached), not three.
	for range 2 {
		if r := h.submit(t, "alice", "rotate", args); r.Execution.GetId() != first.Execution.GetId() {
			t.Fatalf("retry while pending made %s, want attached to %s", r.Execution.GetId(), first.Execution.GetId())
		}
	}
	pending, _ := h.e.List(store.Filter{State: recordv1.State_STATE_AWAITING_APPROVAL})
	if len(pending) != 1 {
		t.Fatalf("%d pending approvals, want 1", len(pending))
	}
	time.Sleep(11*time.Minute + 30*time.Second) // past the default 10m TTL, and a tick after it
	synctest.Wait()
	x := h.waitState(t, first.Execution.GetId(), recordv1.State_STATE_REJECTED)
	if !strings.Contains(x.GetReason(), "approval expired") {
		t.Errorf("reason = %q, want approval expired", x.GetReason())
	}
	second := h.submit(t, "alice", "rotate", args)
	if second.Disposition != recordv1.Disposition_DISPOSITION_NEW || second.Execution.GetState() != recordv1.State_STATE_AWAITING_APPROVAL {
		t.Errorf("retry after expiry: %v %v, want a new execution awaiting approval", second.Disposition, second.Execution.GetState())
	}
	h.e.VoidApprovals(t.Context(), "the vault was locked")
	x, _, _ = h.e.Get(second.Execution.GetId(), "")
	if x.GetState() != recordv1.State_STATE_REJECTED || !strings.Contains(x.GetReason(), "vault was locked") {
		t.Errorf("after VoidApprovals: %v %q, want rejected naming the cause", x.GetState(), x.GetReason())
	}
	if h.ch.calls.Load() != 0 {
		t.Errorf("%d dispatches of unapproved executions", h.ch.calls.Load())
	}
}

// rejectActor is an Authorizer whose one rule knows one bad actor.
type rejectActor string

func (r rejectActor) Rules() []Rule {
	return []Rule{{Name: "actor", Decide: func(_ context.Context, x *recordv1.Execution, _ *tools.Tool) Decision {
		if x.GetActor() == string(r) {
			return Decision{Reject: true, Transient: true, Code: recordv1.ReasonCode_REASON_CODE_UNKNOWN_ACTOR, Reason: "unknown_actor: " + string(r)}
		}
		return Decision{}
	}}}
}

// TestDecisionOrder: policy rejection first, then the session rule, then the
// tool's approval rule; each verdict is journaled with its rule.
func TestDecisionOrder(t *testing.T) {
	h := newHarnessWith(t, "", nil, func(c *Config) {
		c.Authorizer = rejectActor("mallory")
		c.Sessions = SessionConfig{Required: true, Trusted: func(a string) bool { return a == "robot" }}
	})
	ev := &recordv1.Evidence{McpSessionId: "mcp-1", ClientName: "claude"}
	submit := func(actor, tool, args string, ev *recordv1.Evidence) *SubmitResult {
		r, err := h.e.Submit(t.Context(), SubmitInput{Actor: actor, Tool: tool, Arguments: json.RawMessage(args), Evidence: ev})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := submit("mallory", "deploy", `{"service":"a","version":"1"}`, ev); r.Execution.GetState() != recordv1.State_STATE_REJECTED || r.Execution.GetReasonCode() != recordv1.ReasonCode_REASON_CODE_UNKNOWN_ACTOR || !strings.HasPrefix(r.Execution.GetReason(), "unknown_actor") {
		t.Errorf("unknown actor: %v %q, want rejected by the policy rule", r.Execution.GetState(), r.Execution.GetReason())
	}
	if r := submit("robot", "deploy", `{"service":"a","version":"1"}`, ev); r.Execution.GetState() != recordv1.State_STATE_DISPATCHED {
		t.Errorf("trusted actor: %v, want dispatched at once", r.Execution.GetState())
	}
	// A new session of a known actor waits for session authorization.
	first := submit("alice", "deploy", `{"service":"a","version":"2"}`, ev)
	if first.Execution.GetState() != recordv1.State_STATE_AWAITING_APPROVAL || first.Execution.GetReasonCode() != recordv1.ReasonCode_REASON_CODE_SESSION_AUTHORIZATION || !strings.HasPrefix(first.Execution.GetReason(), "session_authorization") {
		t.Fatalf("new session: %v %q, want awaiting session authorization", first.Execution.GetState(), first.Execution.GetReason())
	}
	rot := submit("alice", "rotate", `{"name":"db","new_secret":"s"}`, ev)
	sid := first.Execution.GetSessionId()
	if sid == "" || rot.Execution.GetSessionId() != sid {
		t.Fatalf("session ids %q %q, want one session", sid, rot.Execution.GetSessionId())
	}
	if _, err := h.e.AuthorizeSession(t.Context(), sid, "ops"); err != nil {
		t.Fatal(err)
	}
	h.waitState(t, first.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	x, _, _ := h.e.Get(rot.Execution.GetId(), "")
	if x.GetState() != recordv1.State_STATE_AWAITING_APPROVAL {
		t.Errorf("every_call tool after session authorization: %v, want still awaiting its own approval", x.GetState())
	}
	// Same session, new call: no wait now.
	if r := submit("alice", "deploy", `{"service":"a","version":"3"}`, ev); r.Execution.GetState() != recordv1.State_STATE_DISPATCHED {
		t.Errorf("authorized session: %v, want dispatched", r.Execution.GetState())
	}
	// Another MCP session of alice is a new session; revoking it rejects its pending work.
	other := submit("alice", "deploy", `{"service":"a","version":"4"}`, &recordv1.Evidence{McpSessionId: "mcp-2"})
	if other.Execution.GetState() != recordv1.State_STATE_AWAITING_APPROVAL {
		t.Fatalf("second session: %v, want awaiting authorization", other.Execution.GetState())
	}
	if _, err := h.e.RevokeSession(t.Context(), other.Execution.GetSessionId(), "ops", "not ours"); err != nil {
		t.Fatal(err)
	}
	if x, _, _ := h.e.Get(other.Execution.GetId(), ""); x.GetState() != recordv1.State_STATE_REJECTED {
		t.Errorf("pending execution of a revoked session: %v, want rejected", x.GetState())
	}
	if r := submit("alice", "deploy", `{"service":"a","version":"5"}`, &recordv1.Evidence{McpSessionId: "mcp-2"}); r.Execution.GetState() != recordv1.State_STATE_REJECTED || r.Execution.GetReasonCode() != recordv1.ReasonCode_REASON_CODE_SESSION_REVOKED || !strings.HasPrefix(r.Execution.GetReason(), "session_revoked") {
		t.Errorf("new call in a revoked session: %v %q, want rejected", r.Execution.GetState(), r.Execution.GetReason())
	}
	ss, _ := h.e.Sessions(10)
	if len(ss) != 4 {
		t.Errorf("%d sessions recorded, want 4 (mallory's refused one, robot, alice/mcp-1, alice/mcp-2)", len(ss))
	}
}

// TestApproveAfterDisconnectThenReissue: the agent went away while its call
// awaited approval; the operator approves; the agent re-issues the call: it
// attaches to the approved execution, which was dispatched once.
func TestApproveAfterDisconnectThenReissue(t *testing.T) {
	h := newHarness(t, "", nil)
	args := `{"name":"api","new_secret":"0123456789abcdef"}`
	first := h.submit(t, "alice", "rotate", args)
	if _, err := h.e.Approve(t.Context(), first.Execution.GetId(), "ops", "change 42"); err != nil {
		t.Fatal(err)
	}
	h.waitState(t, first.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	again := h.submit(t, "alice", "rotate", args)
	if again.Execution.GetId() != first.Execution.GetId() || again.Disposition != recordv1.Disposition_DISPOSITION_ATTACHED {
		t.Errorf("re-issued call: %v %s, want attached to %s", again.Disposition, again.Execution.GetId(), first.Execution.GetId())
	}
	if got := h.ch.calls.Load(); got != 1 {
		t.Errorf("dispatches = %d, want 1", got)
	}
}

// A tool with approval: session needs an authorized session even when the
// control plane does not require session authorization in general.
func TestToolApprovalSession(t *testing.T) {
	h := newHarnessWith(t, "", nil, func(c *Config) {})
	cat := h.e.cfg.Catalog
	cat.Tools["deploy"].Approval = tools.ApprovalSession
	defer func() { cat.Tools["deploy"].Approval = tools.ApprovalNone }()
	r := h.submit(t, "alice", "deploy", `{"service":"s","version":"1"}`)
	if r.Execution.GetState() != recordv1.State_STATE_AWAITING_APPROVAL || r.Execution.GetReasonCode() != recordv1.ReasonCode_REASON_CODE_SESSION_AUTHORIZATION || !strings.HasPrefix(r.Execution.GetReason(), "session_authorization") {
		t.Fatalf("approval: session tool in a new session: %v %q, want awaiting session authorization", r.Execution.GetState(), r.Execution.GetReason())
	}
	if _, err := h.e.AuthorizeSession(t.Context(), r.Execution.GetSessionId(), "ops"); err != nil {
		t.Fatal(err)
	}
	h.waitState(t, r.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	if r := h.submit(t, "bob", "look", `{}`); r.Execution.GetState() == recordv1.State_STATE_AWAITING_APPROVAL {
		t.Errorf("a tool without approval: session waited for session authorization")
	}
}

// TestHostileArgumentsStoreNothing: arguments refused for what decoding
// would change or what the templates would let escape are refused by Submit
// with ErrInvalidArguments naming the argument, before anything is stored:
// no execution, no journal record.
func TestHostileArgumentsStoreNothing(t *testing.T) {
	h := newHarness(t, "", nil)
	before := h.st.JournalSize()
	for _, tt := range []struct{ tool, args, want string }{
		{"deploy", `{"service":"api","version":"1","version":"2"}`, "argument version is given twice"},
		{"deploy", `{"service":"api","version":"\udc00"}`, "argument version holds a lone UTF-16 surrogate"},
		{"deploy", "{\"service\":\"api\",\"version\":\"\xff\"}", "argument version is not valid UTF-8"},
		{"build", `{"app":".."}`, `cwd element`},
		{"build", `{"app":"../etc"}`, `argument "app" is used in cwd`},
	} {
		_, err := h.e.Submit(t.Context(), SubmitInput{Actor: "alice", Tool: tt.tool, Arguments: json.RawMessage(tt.args)})
		if !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Submit(%s, %q) = %v, want ErrInvalidArguments containing %q", tt.tool, tt.args, err, tt.want)
		}
	}
	if xs, _ := h.e.List(store.Filter{}); len(xs) != 0 || h.st.JournalSize() != before {
		t.Errorf("after refused calls: %d executions, journal %d -> %d; want nothing stored", len(xs), before, h.st.JournalSize())
	}
}

// A send that reached nothing is tried again under the same execution ID. A
// retry that arrives while it waits must attach to it: if the waiting
// execution said not_executed ("calling again is safe"), the retry would be
// a second execution and both would be sent (found by the fault suite:
// cut-before-receive, immediate re-issue).
func TestRetryDuringRedispatchAttaches(t *testing.T) {
	h := newHarnessWith(t, "", &fakeChannel{dispatch: []AttemptClass{NotSent}}, func(c *Config) {
		// The wait before the second send is MinBackoff/4 = 5s: the retry
		// lands inside it.
		c.Recovery.MinBackoff, c.Recovery.MaxBackoff = 20*time.Second, time.Minute
	})
	r := h.submit(t, "alice", "deploy", `{"service":"redispatch","version":"1"}`)
	id := r.Execution.GetId()
	testbin.Eventually(t, "first send refused", func() bool { return h.ch.calls.Load() >= 1 })
	x := h.waitState(t, id, recordv1.State_STATE_AUTHORIZED)
	if x.GetAttempts() != 1 || !strings.Contains(x.GetReason(), "dispatching again") {
		t.Errorf("between sends: attempts %d, reason %q; want 1 and a reason saying it is sent again", x.GetAttempts(), x.GetReason())
	}
	again := h.submit(t, "alice", "deploy", `{"service":"redispatch","version":"1"}`)
	if again.Execution.GetId() != id || again.Disposition != recordv1.Disposition_DISPOSITION_ATTACHED {
		t.Errorf("retry between sends: %s %v, want attached to %s", again.Execution.GetId(), again.Disposition, id)
	}
	done := h.waitState(t, id, recordv1.State_STATE_COMPLETED)
	if got := h.ch.effects.Load(); got != 1 {
		t.Errorf("effects = %d, want 1", got)
	}
	if done.GetAuthorizedAt().AsTime() != r.Execution.GetAuthorizedAt().AsTime() {
		t.Errorf("authorized_at moved from %v to %v on the second send", r.Execution.GetAuthorizedAt().AsTime(), done.GetAuthorizedAt().AsTime())
	}
}

// TestAnswerSeenDuringShutdownIsRecorded: a target that answers while the
// engine is closing has its answer recorded (completed), not left
// dispatched for start-up recovery to ask again (a target without a status
// query would then need a person). Before the fix the completion's store
// write raced the cancelled context and was dropped about half the time,
// so the test repeats the race.
func TestAnswerSeenDuringShutdownIsRecorded(t *testing.T) {
	for i := range 20 {
		block := make(chan struct{})
		ch := &fakeChannel{block: block}
		h := newHarness(t, "", ch)
		r := h.submit(t, "alice", "deploy", fmt.Sprintf(`{"service":"api","version":"%d"}`, i))
		testbin.Eventually(t, "the dispatch reaching the target", func() bool { return ch.calls.Load() > 0 })
		closed := make(chan struct{})
		go func() { h.e.Close(); close(closed) }()
		testbin.Eventually(t, "the engine closing", func() bool { return h.e.ctx.Err() != nil })
		close(block) // the target answers after the engine began closing
		<-closed
		x, err := h.st.Execution(r.Execution.GetId())
		if err != nil {
			t.Fatal(err)
		}
		if x.GetState() != recordv1.State_STATE_COMPLETED {
			t.Fatalf("round %d: execution %s is %s after a clean shutdown; the target's answer arrived while the engine was closing and must be recorded (completed)", i, x.GetId(), lifecycle.Name(x.GetState()))
		}
		h.st.Close()
	}
}
