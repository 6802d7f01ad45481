package observation

import (
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// fakeSource lists executions newest first by ID, page by page, as
// store.List does.
type fakeSource struct {
	xs map[string]*recordv1.Execution
}

func (f *fakeSource) List(flt store.Filter) ([]*recordv1.Execution, error) {
	ids := make([]string, 0, len(f.xs))
	for id := range f.xs {
		ids = append(ids, id)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(ids)))
	var out []*recordv1.Execution
	for _, id := range ids {
		if flt.After != "" && id >= flt.After {
			continue
		}
		if len(out) == flt.Limit {
			break
		}
		out = append(out, f.xs[id])
	}
	return out, nil
}

func (f *fakeSource) Execution(id string) (*recordv1.Execution, error) {
	if x, ok := f.xs[id]; ok {
		return x, nil
	}
	return nil, fmt.Errorf("%w: %s", store.ErrNotFound, id)
}

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }

func execution(id, tool string, accepted time.Duration, st recordv1.State, session, rpcID string, o *recordv1.Observation) *recordv1.Execution {
	x := &recordv1.Execution{Id: id, Tool: tool, State: st, AcceptedAt: at(accepted), Observation: o,
		Evidence: &recordv1.Evidence{McpSessionId: session, JsonrpcId: rpcID}}
	if st != recordv1.State_STATE_AUTHORIZED {
		x.DispatchedAt = at(accepted)
	}
	return x
}

func testCatalog(tb testing.TB) *tools.Catalog {
	tb.Helper()
	cat, err := tools.Parse("observe.yaml", []byte(`
targets:
  api: {channel: http, base_url: "http://api.internal.test:7412", idempotency_header: Idempotency-Key, mode: observe}
tools:
  create:
    target: api
    request: {method: POST, path: /create}
    replay: idempotency_key
  undecided:
    target: api
    request: {method: POST, path: /undecided}
  enforced:
    target: api
    mode: enforce
    request: {method: POST, path: /enforced}
    replay: review
`))
	if err != nil {
		tb.Fatal(err)
	}
	return cat
}

func TestBuild(t *testing.T) {
	obs := func(prior string, st recordv1.State, priorAt time.Duration) *recordv1.Observation {
		o := &recordv1.Observation{Replay: "idempotency_key"}
		if prior != "" {
			o.PriorExecutionId, o.PriorState, o.PriorAcceptedAt = prior, st, at(priorAt)
		}
		return o
	}
	completed, dispatched := recordv1.State_STATE_COMPLETED, recordv1.State_STATE_DISPATCHED
	src := &fakeSource{xs: map[string]*recordv1.Execution{}}
	for _, x := range []*recordv1.Execution{
		execution("act_00", "create", -time.Hour, completed, "s1", "1", obs("", 0, 0)), // before since
		execution("act_01", "create", 0, completed, "s1", "1", obs("", 0, 0)),
		// A retry in a new session 2s later: both reached the target.
		execution("act_02", "create", 2*time.Second, completed, "s2", "1", obs("act_01", completed, 0)),
		// A retry in the same session with a new id while act_02 was in
		// flight; it was proved unsent.
		execution("act_03", "create", 2500*time.Millisecond, recordv1.State_STATE_NOT_EXECUTED, "s2", "2",
			&recordv1.Observation{PriorExecutionId: "act_02", PriorState: dispatched, PriorAcceptedAt: at(2 * time.Second), WouldHoldUncertain: false}),
		execution("act_04", "create", 3*time.Second, recordv1.State_STATE_OUTCOME_UNKNOWN, "s3", "1",
			&recordv1.Observation{Replay: "idempotency_key", WouldHoldUncertain: true, WouldNeedApproval: true}),
		execution("act_05", "enforced", 4*time.Second, completed, "s1", "3", nil),
	} {
		src.xs[x.GetId()] = x
	}
	got, err := Build(src, testCatalog(t), Options{Since: t0.Add(-time.Minute), Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	want := &controlplanev1.ObserveReportResponse{
		Tools: []*controlplanev1.ObservedTool{
			{Tool: "create", Mode: "observe", Replay: "idempotency_key", ContractComplete: true, NextStep: "ready: set mode: enforce",
				Calls: 4, WouldAttach: 2, ReachedTwice: 1, NewRequestId: 1, NewSession: 1, Concurrent: 1, WouldHoldUncertain: 1, WouldNeedApproval: 1,
				GapMinSeconds: 0.5, GapMedianSeconds: 2, GapMaxSeconds: 2},
			{Tool: "undecided", Mode: "observe", NextStep: "needs a contract decision: replay (read_only, idempotency_key, status_query or review)"},
		},
		Pairs: []*controlplanev1.ObservedPair{
			{Tool: "create", ExecutionId: "act_03", PriorExecutionId: "act_02", AcceptedAt: at(2500 * time.Millisecond), GapSeconds: 0.5,
				NewRequestId: true, Concurrent: true, PriorState: dispatched},
			{Tool: "create", ExecutionId: "act_02", PriorExecutionId: "act_01", AcceptedAt: at(2 * time.Second), GapSeconds: 2,
				ReachedTwice: true, NewSession: true, PriorState: completed},
		},
		Scanned: 6, Since: at(-time.Minute), GeneratedAt: at(time.Minute),
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("Build mismatch (-want +got):\n%s", diff)
	}

	// The scan bound is said, not hidden.
	got, err = Build(src, testCatalog(t), Options{MaxScan: 2, Now: t0})
	if err != nil || !got.GetTruncated() || got.GetScanned() != 2 {
		t.Errorf("Build(MaxScan 2) = scanned %d truncated %v, %v; want 2, true", got.GetScanned(), got.GetTruncated(), err)
	}
	if _, err := Build(src, nil, Options{MaxPairs: MaxPairs + 1}); !errors.Is(err, ErrBadOptions) {
		t.Errorf("Build(MaxPairs too large) error = %v, want ErrBadOptions", err)
	}
}
