package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/telemetry"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// TestObserveMetrics: the latch_observe_* counters follow the observations
// of submitted executions and the unknown outcomes of observed dispatches;
// enforced executions leave them alone.
func TestObserveMetrics(t *testing.T) {
	cat, err := tools.Parse("c.yaml", []byte(`
targets:
  api: {channel: http, base_url: "http://api.internal.test:7412", mode: observe}
tools:
  create: {target: api, request: {method: POST, path: /c}}
`))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	tm, err := telemetry.New(telemetry.Config{Registry: reg, Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tm.Close)
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	submit := func(x *recordv1.Execution) {
		_, done := tm.Submit(context.Background(), "create")
		done(recordv1.Disposition_DISPOSITION_NEW, x, nil)
	}
	submit(&recordv1.Execution{Id: "act_1", Tool: "create", AcceptedAt: timestamppb.New(t0), Observation: &recordv1.Observation{}})
	submit(&recordv1.Execution{Id: "act_2", Tool: "create", AcceptedAt: timestamppb.New(t0.Add(2 * time.Second)), Observation: &recordv1.Observation{
		PriorExecutionId: "act_1", PriorState: recordv1.State_STATE_DISPATCHED, PriorAcceptedAt: timestamppb.New(t0), WouldNeedApproval: true}})
	submit(&recordv1.Execution{Id: "act_3", Tool: "create", AcceptedAt: timestamppb.New(t0)}) // enforced
	_, done := tm.Attempt(context.Background(), engine.AttemptDispatch, engine.Call{Execution: &recordv1.Execution{Id: "act_2", Tool: "create", Observation: &recordv1.Observation{}}})
	done(engine.Attempt{Class: engine.Unknown})

	m := scrape(t, reg)
	tool := labels{"tool": "create"}
	for _, c := range []struct {
		name string
		want float64
	}{
		{"latch_observe_calls_total", 2},
		{"latch_observe_would_attach_total", 1},
		{"latch_observe_concurrent_duplicates_total", 1},
		{"latch_observe_would_need_approval_total", 1},
		{"latch_observe_would_hold_uncertain_total", 1},
		{"latch_observe_duplicate_gap_seconds", 1},
	} {
		if got := value(m, c.name, tool); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, tool, got, c.want)
		}
	}
}
