package lifecycle

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestStateSets walks every state of the record proto through every
// predicate: a state added to the proto fails here until it is placed.
func TestStateSets(t *testing.T) {
	type sets struct {
		Terminal, Cancellable, Moving, Resting, Pending, Observed, Owed, Attachable, Settled bool
	}
	want := map[recordv1.State]sets{
		recordv1.State_STATE_UNSPECIFIED: {},
		accepted:                         {Cancellable: true, Moving: true, Pending: true, Owed: true, Attachable: true},
		awaitingApproval:                 {Cancellable: true, Resting: true, Pending: true, Owed: true, Attachable: true},
		authorized:                       {Cancellable: true, Moving: true, Pending: true, Owed: true, Attachable: true},
		dispatched:                       {Moving: true, Pending: true, Owed: true, Attachable: true},
		completed:                        {Resting: true, Observed: true, Owed: true, Attachable: true, Settled: true},
		delivered:                        {Terminal: true, Resting: true, Observed: true, Attachable: true, Settled: true},
		outcomeUnknown:                   {Resting: true, Owed: true, Attachable: true},
		notExecuted:                      {Terminal: true, Resting: true, Settled: true},
		needsReview:                      {Resting: true, Owed: true, Attachable: true, Settled: true},
		rejected:                         {Terminal: true, Resting: true, Attachable: true, Settled: true},
		cancelled:                        {Terminal: true, Resting: true, Settled: true},
	}
	for v := range recordv1.State_name {
		st := recordv1.State(v)
		w, ok := want[st]
		if !ok {
			t.Errorf("state %s is in the proto but not in this table: decide its sets", st)
			continue
		}
		got := sets{
			Terminal: Terminal(st), Cancellable: Cancellable(st), Moving: Moving(st), Resting: Resting(st),
			Pending: Pending(st), Observed: Observed(st), Owed: Owed(st), Attachable: Attachable(st), Settled: Settled(st),
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("predicates of %s (-want +got):\n%s", Name(st), diff)
		}
		if st == recordv1.State_STATE_UNSPECIFIED {
			continue
		}
		if Moving(st) == Resting(st) {
			t.Errorf("%s: Moving = Resting = %v; every state is exactly one of them", Name(st), Moving(st))
		}
		if got, err := Parse(Name(st)); err != nil || got != st {
			t.Errorf("Parse(Name(%v)) = %v, %v", st, got, err)
		}
	}
	if got := Resting(recordv1.State(99)); got {
		t.Error("Resting(99) = true, want false for a state this build does not know")
	}
	if _, err := Parse("running"); err == nil {
		t.Error("Parse(running) succeeded")
	}
}
