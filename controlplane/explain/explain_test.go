package explain

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestExplainAnswersTheFiveQuestionsInOrder: every report answers the five
// questions, in order, each with at least one sentence, for a fresh
// execution, a completed and delivered one with a retry that attached, and
// an uncertain one.
func TestExplainAnswersTheFiveQuestionsInOrder(t *testing.T) {
	now := timestamppb.Now()
	ev := &recordv1.Evidence{Transport: "streamable-http", ClientName: "agent", PeerAddress: "10.0.0.1:5000", JsonrpcId: "1"}
	accepted := &recordv1.Execution{Id: "act_1", Tool: "deploy", Actor: "a", State: recordv1.State_STATE_ACCEPTED, Evidence: ev}
	tests := []struct {
		name  string
		x     *recordv1.Execution
		hist  []*recordv1.JournalEntry
		wants []string // one substring per answer
	}{
		{"accepted", accepted, []*recordv1.JournalEntry{{Time: now, To: recordv1.State_STATE_ACCEPTED, Kind: "transition", Execution: accepted}},
			[]string{"One call", "No: it is accepted", "No.", "Not applicable", "No second call"}},
		{"delivered after a retry attached",
			&recordv1.Execution{Id: "act_2", State: recordv1.State_STATE_DELIVERED, DispatchedAt: now, CompletedAt: now, Attempts: 1, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, TargetStatus: 201},
			[]*recordv1.JournalEntry{
				{Time: now, To: recordv1.State_STATE_ACCEPTED, Kind: "transition", Execution: &recordv1.Execution{Evidence: ev}},
				{Time: timestamppb.New(now.AsTime().Add(-1)), Kind: "attach", From: recordv1.State_STATE_DISPATCHED, To: recordv1.State_STATE_DISPATCHED, Evidence: ev, Reason: "in flight"},
				{Time: now, To: recordv1.State_STATE_COMPLETED, Kind: "transition"},
				{Time: now, To: recordv1.State_STATE_DELIVERED, Kind: "transition"},
			},
			[]string{"One, most likely: 2 calls", "Yes: dispatched", "Yes: succeeded, target status 201", "delivered at", "Call 2 at"}},
		{"outcome unknown",
			&recordv1.Execution{Id: "act_3", State: recordv1.State_STATE_OUTCOME_UNKNOWN, DispatchedAt: now, Attempts: 1, Reason: "timeout"},
			[]*recordv1.JournalEntry{{Time: now, Kind: "recovery_query", To: recordv1.State_STATE_OUTCOME_UNKNOWN, Reason: "absent, not evidence"}},
			[]string{"One call", "Yes: dispatched", "Not yet: outcome_unknown (timeout). It was not re-sent blindly.", "Not applicable", "No second call"}},
		{"observed duplicate",
			&recordv1.Execution{Id: "act_5", State: recordv1.State_STATE_COMPLETED, DispatchedAt: now, CompletedAt: now, Attempts: 1, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, TargetStatus: 201,
				Observation: &recordv1.Observation{PriorExecutionId: "act_4", PriorState: recordv1.State_STATE_DISPATCHED}},
			[]*recordv1.JournalEntry{{Time: now, To: recordv1.State_STATE_COMPLETED, Kind: "transition"}},
			[]string{"One call", "Yes: dispatched", "Yes: succeeded", "Delivery not recorded", "Observe mode: this call was itself a repeat of the intent of act_4 (then dispatched)"}},
		{"observed, outcome unknown",
			&recordv1.Execution{Id: "act_6", State: recordv1.State_STATE_OUTCOME_UNKNOWN, DispatchedAt: now, Attempts: 1, Reason: "timeout",
				Observation: &recordv1.Observation{WouldHoldUncertain: true, WouldNeedApproval: true, WouldWaitReason: "every call"}},
			[]*recordv1.JournalEntry{{Time: now, To: recordv1.State_STATE_OUTCOME_UNKNOWN, Kind: "transition", Reason: "timeout"}},
			[]string{"One call", "Yes: dispatched", "Not yet: outcome_unknown", "Not applicable", "Observe mode: calls of this tool are forwarded as they come"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Explain(tt.x, tt.hist)
			var qs []string
			for i, a := range r.Answers {
				qs = append(qs, a.Question)
				if len(a.Lines) == 0 || !strings.Contains(a.Lines[0], tt.wants[i]) {
					t.Errorf("Explain(%s) answer %d = %q, want it to start with %q", tt.name, i+1, a.Lines, tt.wants[i])
				}
				for _, l := range a.Lines {
					if tt.x.GetObservation() != nil && strings.Contains(l, "identical call attaches") {
						t.Errorf("Explain(%s) answer %d says %q of an observed execution, whose repeats are forwarded", tt.name, i+1, l)
					}
				}
			}
			if diff := cmp.Diff(Questions, qs); diff != "" {
				t.Errorf("Explain(%s) questions (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}

// TestExplainTellsTheThreeDeliveryFacts: delivered, not delivered because
// the caller left, and not recorded are three different answers, and none
// of them says the delivery failed.
func TestExplainTellsTheThreeDeliveryFacts(t *testing.T) {
	now := timestamppb.Now()
	completed := func(d recordv1.Delivery, st recordv1.State) *recordv1.Execution {
		return &recordv1.Execution{Id: "act_d", State: st, Delivery: d, DispatchedAt: now, CompletedAt: now, Attempts: 1, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, TargetStatus: 201}
	}
	base := []*recordv1.JournalEntry{
		{Time: now, To: recordv1.State_STATE_ACCEPTED, Kind: "transition"},
		{Time: now, From: recordv1.State_STATE_DISPATCHED, To: recordv1.State_STATE_COMPLETED, Kind: "transition"},
	}
	leftRec := &recordv1.JournalEntry{Time: now, From: recordv1.State_STATE_COMPLETED, To: recordv1.State_STATE_COMPLETED, Kind: "caller_left", Reason: "not delivered"}
	deliveredRec := &recordv1.JournalEntry{Time: now, From: recordv1.State_STATE_COMPLETED, To: recordv1.State_STATE_DELIVERED, Kind: "transition"}
	tests := []struct {
		name     string
		x        *recordv1.Execution
		hist     []*recordv1.JournalEntry
		delivery string
		want     string
	}{
		{"delivered", completed(recordv1.Delivery_DELIVERY_DELIVERED, recordv1.State_STATE_DELIVERED), append(base[:2:2], deliveredRec), "delivered", "Yes: the result was delivered at"},
		{"caller left", completed(recordv1.Delivery_DELIVERY_CALLER_LEFT, recordv1.State_STATE_COMPLETED), append(base[:2:2], leftRec), "not_delivered_caller_left", "No: not delivered, the caller left before the answer"},
		{"caller left, then a retry got it", completed(recordv1.Delivery_DELIVERY_DELIVERED, recordv1.State_STATE_DELIVERED), append(base[:2:2], leftRec, deliveredRec), "delivered", "Yes, to a retry: the first caller left at"},
		{"nothing recorded", completed(recordv1.Delivery_DELIVERY_UNSPECIFIED, recordv1.State_STATE_COMPLETED), base, "not_recorded", "Delivery not recorded: completed at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Explain(tt.x, tt.hist)
			got := strings.Join(r.Answers[3].Lines, " ")
			if r.Delivery != tt.delivery || !strings.HasPrefix(got, tt.want) {
				t.Errorf("Explain(%s) delivery = %q, answer 4 = %q; want %q, starting %q", tt.name, r.Delivery, got, tt.delivery, tt.want)
			}
			if strings.Contains(strings.ToLower(got), "fail") {
				t.Errorf("Explain(%s) answer 4 = %q, which speaks of a failure no front observed", tt.name, got)
			}
		})
	}
}
