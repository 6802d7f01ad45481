// Package transition is the execution state machine of docs/design §4: which
// transitions are legal. It holds no state itself; the control plane's engine
// asks it before every durable transition. The states' names and groups
// (terminal, resting, attachable, ...) are internal/lifecycle, the
// vocabulary the MCP front shares; this package is the control plane's.
//
// Any control-plane package may import it; the MCP front must not.
package transition

import (
	"errors"
	"fmt"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// ErrIllegalTransition is matched by every *TransitionError.
var ErrIllegalTransition = errors.New("transition: illegal transition")

// TransitionError is returned for a transition the state machine refuses.
type TransitionError struct {
	From, To recordv1.State
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("transition: illegal transition %s -> %s", lifecycle.Name(e.From), lifecycle.Name(e.To))
}

// Is makes errors.Is(err, ErrIllegalTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }

type state = recordv1.State

const (
	accepted         = recordv1.State_STATE_ACCEPTED
	awaitingApproval = recordv1.State_STATE_AWAITING_APPROVAL
	authorized       = recordv1.State_STATE_AUTHORIZED
	dispatched       = recordv1.State_STATE_DISPATCHED
	completed        = recordv1.State_STATE_COMPLETED
	delivered        = recordv1.State_STATE_DELIVERED
	outcomeUnknown   = recordv1.State_STATE_OUTCOME_UNKNOWN
	notExecuted      = recordv1.State_STATE_NOT_EXECUTED
	needsReview      = recordv1.State_STATE_NEEDS_REVIEW
	rejected         = recordv1.State_STATE_REJECTED
	cancelled        = recordv1.State_STATE_CANCELLED
)

// next lists the legal successors of each state.
//
// dispatched -> authorized is the bounded, safe re-dispatch under the same
// execution ID after a send that provably reached nothing; not_executed is
// final, because it tells a retrying agent that calling again is safe (an
// execution that would still be sent must never say so). outcome_unknown ->
// outcome_unknown is not listed: recovery attempts are journal records of
// kind "recovery_query" (once "recovery_attempt"), not transitions.
var next = map[state][]state{
	recordv1.State_STATE_UNSPECIFIED: {accepted},
	accepted:                         {awaitingApproval, authorized, rejected, cancelled},
	awaitingApproval:                 {authorized, rejected, cancelled},
	authorized:                       {dispatched, cancelled},
	dispatched:                       {completed, outcomeUnknown, notExecuted, authorized},
	outcomeUnknown:                   {completed, notExecuted, needsReview},
	needsReview:                      {completed, notExecuted},
	completed:                        {delivered},
}

// integrity lists the edges taken only when a completed execution's stored
// result does not hash to its journal record (result_integrity): the result
// is withheld and an operator decides. They are not steps of the normal
// lifecycle, so Terminal ignores them (delivered stays terminal).
var integrity = map[state]state{completed: needsReview, delivered: needsReview}

// Check returns nil when from -> to is legal, else a *TransitionError.
func Check(from, to recordv1.State) error {
	if s, ok := integrity[from]; ok && s == to {
		return nil
	}
	for _, s := range next[from] {
		if s == to {
			return nil
		}
	}
	return &TransitionError{From: from, To: to}
}

// The groups of states (Terminal, Cancellable, Resting, ...) and their names
// are the shared vocabulary in internal/lifecycle; TestStateSets checks the
// groups that follow from this table against it.
