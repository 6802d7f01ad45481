// Package lifecycle is the vocabulary of execution states shared by the
// control plane and the MCP front: each state's name, and the groups of
// states every package asks about ("is this execution still moving?", "is
// it owed to its caller?"), and how an observed answer is described. It
// holds no state and decides no transition: the transition table the engine
// enforces is controlplane/transition, which checks these sets against it.
//
// Anyone may import it; it imports only the record proto, and must keep it
// that way (the MCP front reaches the control plane only over gRPC).
package lifecycle

import (
	"fmt"
	"strings"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

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

// The sets below are the one definition of each group of states; every
// package that asks "is this execution still moving?" asks here. Waiters
// differ in what they wait for, so there are two questions, not one:
//
//   - Moving: the gateway carries the execution on by itself (accepted,
//     authorized, dispatched). Nothing outside the dispatch path is needed.
//   - Resting: everything else. The execution waits for something outside
//     the dispatch path: an approver, evidence from the target, an operator,
//     or the caller. awaiting_approval is resting: it will not move until a
//     person decides.
//   - Pending: Moving or awaiting_approval. Its verdict or outcome is still
//     to come in the ordinary course of things.
//
// The control plane's Submit wait stops at the first rest (Resting), so a
// caller learns the execution ID while an execution awaiting approval can
// still be cancelled. The MCP front's wait for an open tool call covers
// approval too (it waits while Pending), because an approver deciding while
// the call is open is the common case and the outcome is what the model
// needs; the front then watches with progress and honours a cancel.

// Terminal reports whether no further transition can happen (the
// transition table has no successor; controlplane/transition tests that).
func Terminal(s recordv1.State) bool {
	switch s {
	case delivered, notExecuted, rejected, cancelled:
		return true
	}
	return false
}

// Cancellable reports whether an explicit cancel may still end the
// execution: before dispatch only (docs/design §4). controlplane/transition
// tests that it is exactly the states with a legal edge to cancelled.
func Cancellable(s recordv1.State) bool {
	switch s {
	case accepted, awaitingApproval, authorized:
		return true
	}
	return false
}

// Moving reports whether the gateway moves the execution on by itself.
func Moving(s recordv1.State) bool {
	switch s {
	case accepted, authorized, dispatched:
		return true
	}
	return false
}

// Resting reports whether an execution waits for something outside the
// dispatch path (an approver, evidence, an operator, or the caller): a waiter
// that only follows the dispatch path stops there.
func Resting(s recordv1.State) bool { return Known(s) && !Moving(s) }

// Pending reports whether the execution's verdict or outcome is still to come
// in the ordinary course: it is moving, or it awaits an approver.
func Pending(s recordv1.State) bool { return Moving(s) || s == awaitingApproval }

// Observed reports whether the target's answer was observed: the execution
// carries an outcome and, usually, a stored result.
func Observed(s recordv1.State) bool { return s == completed || s == delivered }

// Owed reports whether the caller is still owed an answer it may not have
// received: anything but delivered (it got the result), rejected (a retry
// gets the same rejection), cancelled, and not_executed (nothing happened).
// An ended MCP session orphans its owed executions.
func Owed(s recordv1.State) bool {
	switch s {
	case delivered, rejected, cancelled, notExecuted:
		return false
	}
	return Known(s)
}

// Attachable reports whether a retry with the same intent attaches to an
// execution in state s (docs/design §5). delivered is included on purpose: a caller
// that saw the outcome and wants the action again must say so with repeat_of;
// without it the identical call attaches and gets the stored result. That is
// what makes repeat_of meaningful, and it keeps "the response was written" (all
// a transport can establish) from turning a re-issued call into a second effect.
func Attachable(s recordv1.State) bool {
	switch s {
	case accepted, awaitingApproval, authorized, dispatched, outcomeUnknown,
		needsReview, completed, delivered, rejected:
		return true
	}
	return false
}

// Settled reports whether an execution's fate is known and final enough to be
// cited by repeat_of: the caller could have seen its outcome.
func Settled(s recordv1.State) bool {
	switch s {
	case completed, delivered, notExecuted, rejected, cancelled, needsReview:
		return true
	}
	return false
}

// Known reports whether s is one of the lifecycle's states (not unspecified,
// not a number from a newer schema).
func Known(s recordv1.State) bool {
	_, ok := recordv1.State_name[int32(s)]
	return ok && s != recordv1.State_STATE_UNSPECIFIED
}

// Name is the state's lowercase name as docs/design writes it ("outcome_unknown").
func Name(s recordv1.State) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "STATE_"))
}

// Parse is the inverse of Name.
func Parse(name string) (recordv1.State, error) {
	v, ok := recordv1.State_value["STATE_"+strings.ToUpper(name)]
	if !ok || v == 0 {
		return 0, fmt.Errorf("lifecycle: unknown state %q (want one of accepted, awaiting_approval, authorized, dispatched, completed, delivered, outcome_unknown, not_executed, needs_review, rejected, cancelled)", name)
	}
	return recordv1.State(v), nil
}
