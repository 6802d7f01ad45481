package transition

import (
	"errors"
	"testing"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		from, to recordv1.State
		legal    bool
	}{
		{recordv1.State_STATE_UNSPECIFIED, accepted, true},
		{accepted, authorized, true},
		{accepted, awaitingApproval, true},
		{accepted, dispatched, false}, // never dispatch without a verdict
		{awaitingApproval, authorized, true},
		{awaitingApproval, cancelled, true},
		{authorized, dispatched, true},
		{dispatched, cancelled, false}, // cancel before dispatch only
		{dispatched, completed, true},
		{dispatched, outcomeUnknown, true},
		{dispatched, notExecuted, true},
		{outcomeUnknown, completed, true},
		{outcomeUnknown, dispatched, false}, // never re-sent blindly
		{outcomeUnknown, needsReview, true},
		{needsReview, notExecuted, true},
		{notExecuted, dispatched, false}, // not_executed is final
		{dispatched, authorized, true},   // a send that reached nothing, tried again
		{completed, delivered, true},
		{completed, dispatched, false},
		{delivered, completed, false},
		{completed, needsReview, true}, // result_integrity only
		{delivered, needsReview, true}, // result_integrity only
		{rejected, needsReview, false},
		{rejected, authorized, false},
		{cancelled, authorized, false},
	}
	for _, tt := range tests {
		err := Check(tt.from, tt.to)
		if tt.legal != (err == nil) {
			t.Errorf("Check(%s, %s) = %v, want legal=%v", lifecycle.Name(tt.from), lifecycle.Name(tt.to), err, tt.legal)
		}
		if err != nil {
			var te *TransitionError
			if !errors.Is(err, ErrIllegalTransition) || !errors.As(err, &te) || te.From != tt.from || te.To != tt.to {
				t.Errorf("Check(%s, %s) error %v is not a *TransitionError matching ErrIllegalTransition", lifecycle.Name(tt.from), lifecycle.Name(tt.to), err)
			}
		}
	}
}

// TestSetsFollowTheTable checks the groups of states the vocabulary
// declares by hand against this table: Terminal is exactly the states with
// no successor, Cancellable exactly those with a legal edge to cancelled.
func TestSetsFollowTheTable(t *testing.T) {
	for v := range recordv1.State_name {
		st := recordv1.State(v)
		if got, want := lifecycle.Terminal(st), lifecycle.Known(st) && len(next[st]) == 0; got != want {
			t.Errorf("lifecycle.Terminal(%s) = %v, want %v (the transition table)", lifecycle.Name(st), got, want)
		}
		if got, want := lifecycle.Cancellable(st), Check(st, cancelled) == nil; got != want {
			t.Errorf("lifecycle.Cancellable(%s) = %v, want %v (the transition table)", lifecycle.Name(st), got, want)
		}
	}
}
