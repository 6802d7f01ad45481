package cli

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestExplainNotExecutedSaysItsProof checks that explain never concludes
// "nothing happened" without saying what proves it, and shows recovery
// queries that settled nothing.
func TestExplainNotExecutedSaysItsProof(t *testing.T) {
	now := timestamppb.Now()
	x := &recordv1.Execution{Id: "act_1", Tool: "place_order", Actor: "agent", State: recordv1.State_STATE_NOT_EXECUTED, DispatchedAt: now, Attempts: 1}
	early := &recordv1.JournalEntry{Time: now, Kind: "recovery_query", From: recordv1.State_STATE_OUTCOME_UNKNOWN, To: recordv1.State_STATE_OUTCOME_UNKNOWN,
		Reason: "absent answer, not evidence: status endpoint answered 404; asked before the settle point"}
	tests := []struct {
		kind string
		want string
	}{
		{"recovery", "recovery established from the target that it never acted on it"},
		{"resolve", "an operator decided"},
		{"transition", "never written to the target"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			hist := []*recordv1.JournalEntry{
				{Time: now, To: recordv1.State_STATE_ACCEPTED, Kind: "transition", Execution: x},
				early,
				{Time: now, Kind: tt.kind, From: recordv1.State_STATE_OUTCOME_UNKNOWN, To: recordv1.State_STATE_NOT_EXECUTED, Reason: "the evidence"},
			}
			var b strings.Builder
			explain(&b, x, hist)
			out := b.String()
			if !strings.Contains(out, tt.want) || !strings.Contains(out, "the evidence") {
				t.Errorf("explain(not_executed by %s) =\n%s\nwant it to say %q and the reason", tt.kind, out, tt.want)
			}
			if strings.Contains(out, "nothing happened at the target") {
				t.Errorf("explain says nothing happened without its proof:\n%s", out)
			}
			if !strings.Contains(out, "1 recovery query settled nothing") || !strings.Contains(out, "not evidence") {
				t.Errorf("explain does not show the early recovery query:\n%s", out)
			}
		})
	}
}

// TestExplainPrintsTheStory: after the five answers, explain prints the
// sends with their answers, the evidence a decision rests on and what to
// do, here resolve an execution whose outcome is unknown.
func TestExplainPrintsTheStory(t *testing.T) {
	now := timestamppb.Now()
	x := &recordv1.Execution{Id: "act_1", Tool: "place_order", Actor: "agent", Target: "shop", State: recordv1.State_STATE_OUTCOME_UNKNOWN, DispatchedAt: now, LastSentAt: now, Attempts: 1}
	hist := []*recordv1.JournalEntry{
		{Index: 1, Time: now, To: recordv1.State_STATE_ACCEPTED, Kind: "transition", Execution: x},
		{Index: 2, Time: now, From: recordv1.State_STATE_ACCEPTED, To: recordv1.State_STATE_DISPATCHED, Kind: "transition"},
		{Index: 3, Time: now, From: recordv1.State_STATE_DISPATCHED, To: recordv1.State_STATE_OUTCOME_UNKNOWN, Kind: "transition", Reason: "the connection dropped"},
	}
	var b strings.Builder
	explain(&b, x, hist)
	out := b.String()
	for _, want := range []string{"5. Did the second call attach", "Sends:", "1. dispatch at", "(journal #2)", "the connection dropped", "Evidence:", "Sent to shop at", "What to do:", "latch exec resolve act_1"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain(outcome_unknown) =\n%s\nwant it to say %q", out, want)
		}
	}
}
