package lifecycle

import (
	"errors"
	"testing"

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
		{notExecuted, dispatched, true},
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
			t.Errorf("Check(%s, %s) = %v, want legal=%v", Name(tt.from), Name(tt.to), err, tt.legal)
		}
		if err != nil {
			var te *TransitionError
			if !errors.Is(err, ErrIllegalTransition) || !errors.As(err, &te) || te.From != tt.from || te.To != tt.to {
				t.Errorf("Check(%s, %s) error %v is not a *TransitionError matching ErrIllegalTransition", Name(tt.from), Name(tt.to), err)
			}
		}
	}
}

func TestStateSets(t *testing.T) {
	for _, s := range []recordv1.State{delivered, rejected, cancelled} {
		if !Terminal(s) {
			t.Errorf("Terminal(%s) = false", Name(s))
		}
	}
	for _, s := range []recordv1.State{cancelled, notExecuted} {
		if Attachable(s) {
			t.Errorf("Attachable(%s) = true: a retry after it must be a new execution", Name(s))
		}
	}
	for _, s := range []recordv1.State{accepted, dispatched, outcomeUnknown, completed, delivered, rejected, needsReview} {
		if !Attachable(s) {
			t.Errorf("Attachable(%s) = false", Name(s))
		}
	}
	for name := range recordv1.State_value {
		st := recordv1.State(recordv1.State_value[name])
		if st == 0 {
			continue
		}
		if got, err := Parse(Name(st)); err != nil || got != st {
			t.Errorf("Parse(Name(%v)) = %v, %v", st, got, err)
		}
	}
	if _, err := Parse("running"); err == nil {
		t.Error("Parse(running) succeeded")
	}
}
