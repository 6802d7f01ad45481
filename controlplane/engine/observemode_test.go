package engine

import (
	"strings"
	"testing"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// observeCatalog is testCatalog's api target with tools in observe mode,
// or (mode enforce) the same contracts enforced: the one catalog change
// that switches them.
func observeCatalog(tb testing.TB, mode tools.Mode) *tools.Catalog {
	tb.Helper()
	cat, err := tools.Parse("observe.yaml", []byte(`
targets:
  api:
    channel: http
    base_url: http://127.0.0.1:1
    allow_private: true
    idempotency_header: Idempotency-Key
    mode: `+string(mode)+`
tools:
  create:
    input_schema: {type: object, required: [name], properties: {name: {type: string}}}
    target: api
    request: {method: POST, path: /create, body: {name: "{{name}}"}}
    replay: idempotency_key
    attach_window: 1h
  approve_me:
    input_schema: {type: object, required: [name], properties: {name: {type: string}}}
    target: api
    request: {method: POST, path: /approve, body: {name: "{{name}}"}}
    replay: review
    approval: every_call
  undecided:
    input_schema: {type: object, required: [name], properties: {name: {type: string}}}
    target: api
    mode: observe
    request: {method: POST, path: /undecided, body: {name: "{{name}}"}}
  look:
    target: api
    request: {method: GET, path: /look}
    replay: read_only
`))
	if err != nil {
		tb.Fatal(err)
	}
	return cat
}

func newObserveHarness(tb testing.TB, ch *fakeChannel, adjust func(*Config)) *harness {
	return newHarnessWith(tb, "", ch, func(c *Config) {
		c.Catalog = observeCatalog(tb, tools.ModeObserve)
		if adjust != nil {
			adjust(c)
		}
	})
}

// TestObserveForwardsDuplicatesAndRecordsTheAttach: two identical calls of
// an observed tool both reach the target, each under its own execution ID;
// the second records the first as the execution enforcement would have
// attached it to. The same calls enforced (one catalog change) reach the
// target once.
func TestObserveForwardsDuplicatesAndRecordsTheAttach(t *testing.T) {
	h := newObserveHarness(t, nil, nil)
	first := h.submit(t, "alice", "create", `{"name":"a"}`)
	x1 := h.waitState(t, first.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	second := h.submit(t, "alice", "create", `{"name":"a"}`)
	if second.Disposition != recordv1.Disposition_DISPOSITION_NEW || second.Execution.GetId() == x1.GetId() {
		t.Fatalf("second call: disposition %v, id %s; want a new execution besides %s", second.Disposition, second.Execution.GetId(), x1.GetId())
	}
	x2 := h.waitState(t, second.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	if got := h.ch.effects.Load(); got != 2 {
		t.Fatalf("effects = %d, want 2: observe mode forwards every call", got)
	}
	if o := x1.GetObservation(); o == nil || o.GetPriorExecutionId() != "" || o.GetReplay() != "idempotency_key" {
		t.Errorf("first observation = %v, want one without a prior, replay idempotency_key", o)
	}
	o := x2.GetObservation()
	if o.GetPriorExecutionId() != x1.GetId() || o.GetPriorState() != recordv1.State_STATE_COMPLETED || o.GetWouldDisposition() != recordv1.Disposition_DISPOSITION_ATTACHED {
		t.Errorf("second observation = %v, want prior %s (completed), would attach", o, x1.GetId())
	}
	if x2.GetFingerprint() != x1.GetFingerprint() {
		t.Errorf("fingerprints differ: %s, %s", x1.GetFingerprint(), x2.GetFingerprint())
	}
	h.ch.mu.Lock()
	for i, obs := range h.ch.observed {
		if !obs {
			t.Errorf("dispatch %d: Call.Observed() = false, want true (the channel must add no idempotency key)", i)
		}
	}
	h.ch.mu.Unlock()
	journal := h.journalOf(t, x2.GetId())
	if !strings.Contains(journal, "enforcement would have attached it to "+x1.GetId()) {
		t.Errorf("journal of %s does not say what enforcement would have done:\n%s", x2.GetId(), journal)
	}

	h.e.SetCatalog(observeCatalog(t, tools.ModeEnforce), "enforce")
	third := h.submit(t, "alice", "create", `{"name":"b"}`)
	h.waitState(t, third.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	fourth := h.submit(t, "alice", "create", `{"name":"b"}`)
	if fourth.Disposition != recordv1.Disposition_DISPOSITION_ATTACHED || fourth.Execution.GetId() != third.Execution.GetId() {
		t.Fatalf("enforced retry: disposition %v, id %s; want attached to %s", fourth.Disposition, fourth.Execution.GetId(), third.Execution.GetId())
	}
	if got := h.ch.effects.Load(); got != 3 {
		t.Errorf("effects = %d, want 3: the enforced retry must not reach the target", got)
	}
	if third.Execution.GetObservation() != nil {
		t.Errorf("an enforced execution carries an observation: %v", third.Execution.GetObservation())
	}
}

// TestObserveDoesNotWaitForApproval: every_call approval is recorded as
// what enforcement would have required; the call is dispatched at once.
func TestObserveDoesNotWaitForApproval(t *testing.T) {
	h := newObserveHarness(t, nil, nil)
	r := h.submit(t, "alice", "approve_me", `{"name":"a"}`)
	x := h.waitState(t, r.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	o := x.GetObservation()
	if !o.GetWouldNeedApproval() || !strings.Contains(o.GetWouldWaitReason(), "requires approval for every call") {
		t.Errorf("observation = %v, want would_need_approval with the approval rule's reason", o)
	}
	if x.GetAuthorizedAt() == nil || h.ch.effects.Load() != 1 {
		t.Errorf("authorized_at %v, effects %d: want authorized and sent once", x.GetAuthorizedAt(), h.ch.effects.Load())
	}
}

// TestObserveUnknownOutcomeIsNotRecovered: a dispatch cut after the write
// rests at outcome_unknown marked would_hold_uncertain, with no recovery
// scheduled; the agent's retry is forwarded again, recorded as the call
// enforcement would have held while it recovered the first.
func TestObserveUnknownOutcomeIsNotRecovered(t *testing.T) {
	h := newObserveHarness(t, &fakeChannel{dispatch: []AttemptClass{Unknown}}, nil)
	first := h.submit(t, "alice", "create", `{"name":"a"}`)
	x1 := h.waitState(t, first.Execution.GetId(), recordv1.State_STATE_OUTCOME_UNKNOWN)
	if !x1.GetObservation().GetWouldHoldUncertain() || x1.GetNextRecoveryAt() != nil {
		t.Errorf("observation %v, next_recovery_at %v: want would_hold_uncertain and no recovery scheduled", x1.GetObservation(), x1.GetNextRecoveryAt())
	}
	retry := h.submit(t, "alice", "create", `{"name":"a"}`)
	x2 := h.waitState(t, retry.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	o := x2.GetObservation()
	if o.GetPriorExecutionId() != x1.GetId() || o.GetPriorState() != recordv1.State_STATE_OUTCOME_UNKNOWN || o.GetWouldDisposition() != recordv1.Disposition_DISPOSITION_RECOVERED {
		t.Errorf("retry observation = %v, want prior %s (outcome_unknown), would recover", o, x1.GetId())
	}
	if h.ch.effects.Load() != 2 {
		t.Errorf("effects = %d, want 2", h.ch.effects.Load())
	}
	h.close()
	if q := h.ch.queries.Load(); q != 0 {
		t.Errorf("recovery queried the target %d times about an observed execution, want 0", q)
	}
	if x, err := h.st.Execution(x1.GetId()); err != nil || x.GetState() != recordv1.State_STATE_OUTCOME_UNKNOWN {
		t.Errorf("observed execution after close: %v, %v; want still outcome_unknown", x, err)
	}
}

// TestEnforcedRetryOfAnObservedUnknown: once the tool is enforced, a call
// of an intent whose observed execution's outcome is unknown attaches to it
// and is not sent (an operator resolves it; nothing can ask the target).
func TestEnforcedRetryOfAnObservedUnknown(t *testing.T) {
	h := newObserveHarness(t, &fakeChannel{dispatch: []AttemptClass{Unknown}}, nil)
	first := h.submit(t, "alice", "create", `{"name":"a"}`)
	h.waitState(t, first.Execution.GetId(), recordv1.State_STATE_OUTCOME_UNKNOWN)
	h.e.SetCatalog(observeCatalog(t, tools.ModeEnforce), "enforce")
	retry := h.submit(t, "alice", "create", `{"name":"a"}`)
	if retry.Execution.GetId() != first.Execution.GetId() || retry.Disposition != recordv1.Disposition_DISPOSITION_RECOVERED {
		t.Errorf("enforced retry = %v %s, want recovered on %s", retry.Disposition, retry.Execution.GetId(), first.Execution.GetId())
	}
	h.close()
	if calls, queries := h.ch.calls.Load(), h.ch.queries.Load(); calls != 1 || queries != 0 {
		t.Errorf("dispatches %d, queries %d; want the one observed dispatch and no query", calls, queries)
	}
}

// TestObserveKeepsRejections: observe mode relaxes the replay contract,
// not authorization: a locked vault still refuses the call.
func TestObserveKeepsRejections(t *testing.T) {
	h := newObserveHarness(t, nil, func(c *Config) { c.Authorizer = &gates{locked: true} })
	r := h.submit(t, "alice", "create", `{"name":"a"}`)
	if r.Disposition != recordv1.Disposition_DISPOSITION_REJECTED || h.ch.calls.Load() != 0 {
		t.Errorf("disposition %v, dispatches %d: want rejected, nothing sent", r.Disposition, h.ch.calls.Load())
	}
}

// TestObserveUndecidedReplay: a tool in observe mode without a replay
// class is forwarded and counted as side-effecting (its duplicates are
// found), its observation saying the replay is still to decide.
func TestObserveUndecidedReplay(t *testing.T) {
	h := newObserveHarness(t, nil, nil)
	a := h.submit(t, "alice", "undecided", `{"name":"a"}`)
	h.waitState(t, a.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	b := h.submit(t, "alice", "undecided", `{"name":"a"}`)
	x := h.waitState(t, b.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	if o := x.GetObservation(); o.GetReplay() != "" || o.GetPriorExecutionId() != a.Execution.GetId() {
		t.Errorf("observation = %v, want no replay and prior %s", o, a.Execution.GetId())
	}
}

// journalOf is the reasons of an execution's journal records, one a line.
func (h *harness) journalOf(tb testing.TB, id string) string {
	tb.Helper()
	hist, err := h.st.History(id)
	if err != nil {
		tb.Fatal(err)
	}
	var b strings.Builder
	for _, e := range hist {
		b.WriteString(e.GetReason() + "\n")
	}
	return b.String()
}
