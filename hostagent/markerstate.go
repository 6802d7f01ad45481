package hostagent

import (
	"errors"
	"fmt"
	"strings"

	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// The marker state machine. It lives here, next to what the host agent
// shares with its users, so the agent (which enforces it on every write) and
// the control plane's host channel (which reads markers it gets over gRPC)
// ask the same table. It imports only the hostagent proto.

// ErrIllegalTransition is matched by every *TransitionError.
var ErrIllegalTransition = errors.New("hostagent: illegal marker transition")

// TransitionError is a marker change the state machine refuses.
type TransitionError struct {
	From, To hostagentv1.MarkerState
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("hostagent: illegal marker transition %s -> %s", MarkerName(e.From), MarkerName(e.To))
}

// Is makes errors.Is(err, ErrIllegalTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }

const (
	markerNone       = hostagentv1.MarkerState_MARKER_STATE_UNSPECIFIED
	markerStarting   = hostagentv1.MarkerState_MARKER_STATE_STARTING
	markerRunning    = hostagentv1.MarkerState_MARKER_STATE_RUNNING
	markerExited     = hostagentv1.MarkerState_MARKER_STATE_EXITED
	markerNotStarted = hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED
	markerLost       = hostagentv1.MarkerState_MARKER_STATE_LOST
	markerBegun      = hostagentv1.MarkerState_MARKER_STATE_BEGUN
	markerCompleted  = hostagentv1.MarkerState_MARKER_STATE_COMPLETED
	markerFailed     = hostagentv1.MarkerState_MARKER_STATE_FAILED
)

// markerNext lists the legal successors of each marker state; unspecified is
// "no marker yet".
//
// Run markers: Run creates starting; the agent records running once the shim
// holds the command behind its closed gate. A status file written by the
// shim settles it as exited (the gate opened) or not_started (it never did,
// even when running was already durable: the shim's word is the proof).
// lost is the agent's conclusion when it ran and no status survived.
// starting -> exited is kept for a status file found while running was never
// recorded: the file, not the marker, is the truth about what ran.
//
// Script markers: begin creates begun; complete and fail finish it.
//
// A rebuilt store (markers moved aside) is written whole from the execution
// directories and is not a transition.
var markerNext = map[hostagentv1.MarkerState][]hostagentv1.MarkerState{
	markerNone:     {markerStarting, markerBegun},
	markerStarting: {markerRunning, markerExited, markerNotStarted, markerLost},
	markerRunning:  {markerExited, markerNotStarted, markerLost},
	markerBegun:    {markerCompleted, markerFailed},
}

// CheckMarker returns nil when a marker may move from -> to, else a
// *TransitionError.
func CheckMarker(from, to hostagentv1.MarkerState) error {
	for _, s := range markerNext[from] {
		if s == to {
			return nil
		}
	}
	return &TransitionError{From: from, To: to}
}

// MarkerOpen reports whether a marker may still change: starting, running or
// begun. Waiters wait while a marker is open.
func MarkerOpen(s hostagentv1.MarkerState) bool {
	return s != markerNone && len(markerNext[s]) > 0
}

// MarkerFinal reports whether a marker has its last state: exited,
// not_started, lost, completed or failed.
func MarkerFinal(s hostagentv1.MarkerState) bool {
	_, known := hostagentv1.MarkerState_name[int32(s)]
	return known && s != markerNone && !MarkerOpen(s)
}

// MarkerName is the state's lowercase name ("not_started").
func MarkerName(s hostagentv1.MarkerState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "MARKER_STATE_"))
}
