package api

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/internal/lifecycle"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestMarkDeliveredMany: one MarkDelivered records execution_id and every
// more_execution_ids; an unknown id among them is the error while the
// others are recorded still; more than the bound is refused whole.
func TestMarkDeliveredMany(t *testing.T) {
	f := newFixture(t)
	f.caller = Caller{Identity: "unix", Operator: true}
	ctx := t.Context()
	var ids []string
	for i := range 4 {
		resp, err := f.svc.Submit(ctx, &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy", Arguments: []byte(fmt.Sprintf(`{"v":"%d"}`, i)), WaitMs: 10_000})
		if err != nil {
			t.Fatal(err)
		}
		if s := resp.GetExecution().GetState(); s != recordv1.State_STATE_COMPLETED {
			t.Fatalf("execution %d is %s, want completed", i, s)
		}
		ids = append(ids, resp.GetExecution().GetId())
	}
	state := func(id string) recordv1.State {
		t.Helper()
		x, _, err := f.eng.Get(id, "")
		if err != nil {
			t.Fatal(err)
		}
		return x.GetState()
	}

	resp, err := f.svc.MarkDelivered(ctx, &controlplanev1.MarkDeliveredRequest{ExecutionId: ids[0], MoreExecutionIds: ids[1:3]})
	if err != nil {
		t.Fatalf("MarkDelivered(3 ids) = %v", err)
	}
	if resp.GetExecution().GetId() != ids[0] || resp.GetExecution().GetState() != recordv1.State_STATE_DELIVERED {
		t.Errorf("answer = %s %s, want %s delivered", resp.GetExecution().GetId(), resp.GetExecution().GetState(), ids[0])
	}
	for _, id := range ids[:3] {
		if s := state(id); s != recordv1.State_STATE_DELIVERED {
			t.Errorf("%s is %s, want delivered", id, s)
		}
	}

	_, err = f.svc.MarkDelivered(ctx, &controlplanev1.MarkDeliveredRequest{ExecutionId: "act_nope", MoreExecutionIds: []string{ids[3]}})
	if status.Code(err) != codes.NotFound {
		t.Errorf("MarkDelivered(unknown, known) = %v, want NotFound", err)
	}
	if s := state(ids[3]); s != recordv1.State_STATE_DELIVERED {
		t.Errorf("%s next to an unknown id is %s, want delivered", ids[3], s)
	}

	_, err = f.svc.MarkDelivered(ctx, &controlplanev1.MarkDeliveredRequest{ExecutionId: ids[0], MoreExecutionIds: make([]string, maxDeliveredPerCall)})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("MarkDelivered(%d ids) = %v, want InvalidArgument", maxDeliveredPerCall+1, err)
	}
}

// TestMarkDeliveredReports: reports say delivered or caller_left, one each;
// the ids next to them (for older control planes) are not read again; a
// report saying neither is refused whole.
func TestMarkDeliveredReports(t *testing.T) {
	f := newFixture(t)
	f.caller = Caller{Identity: "unix", Operator: true}
	ctx := t.Context()
	var ids []string
	for i := range 2 {
		resp, err := f.svc.Submit(ctx, &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy", Arguments: []byte(fmt.Sprintf(`{"v":"r%d"}`, i)), WaitMs: 10_000})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.GetExecution().GetId())
	}
	_, err := f.svc.MarkDelivered(ctx, &controlplanev1.MarkDeliveredRequest{
		ExecutionId: ids[0], // what an older control plane reads
		Reports: []*controlplanev1.DeliveryReport{
			{ExecutionId: ids[0], Delivery: recordv1.Delivery_DELIVERY_DELIVERED},
			{ExecutionId: ids[1], Delivery: recordv1.Delivery_DELIVERY_CALLER_LEFT},
		},
	})
	if err != nil {
		t.Fatalf("MarkDelivered(reports) = %v", err)
	}
	want := map[string][2]string{ids[0]: {"delivered", "delivered"}, ids[1]: {"completed", "not_delivered_caller_left"}}
	for id, w := range want {
		x, _, err := f.eng.Get(id, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]string{lifecycle.Name(x.GetState()), lifecycle.DeliveryName(lifecycle.DeliveryOf(x))}; got != w {
			t.Errorf("%s after the reports = %v, want %v", id, got, w)
		}
	}
	_, err = f.svc.MarkDelivered(ctx, &controlplanev1.MarkDeliveredRequest{Reports: []*controlplanev1.DeliveryReport{{ExecutionId: ids[1]}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("MarkDelivered(a report saying nothing) = %v, want InvalidArgument", err)
	}
}
