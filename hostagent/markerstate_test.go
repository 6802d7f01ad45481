package hostagent

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// TestMarkerStates walks every pair of marker states through CheckMarker
// and every state through the predicates: a state added to the proto fails
// here until it is placed.
func TestMarkerStates(t *testing.T) {
	legal := map[[2]hostagentv1.MarkerState]bool{
		{markerNone, markerStarting}:       true,
		{markerNone, markerBegun}:          true,
		{markerStarting, markerRunning}:    true,
		{markerStarting, markerExited}:     true,
		{markerStarting, markerNotStarted}: true,
		{markerStarting, markerLost}:       true,
		{markerRunning, markerExited}:      true,
		{markerRunning, markerNotStarted}:  true,
		{markerRunning, markerLost}:        true,
		{markerBegun, markerCompleted}:     true,
		{markerBegun, markerFailed}:        true,
	}
	type sets struct{ Open, Final bool }
	want := map[hostagentv1.MarkerState]sets{
		markerNone:       {},
		markerStarting:   {Open: true},
		markerRunning:    {Open: true},
		markerBegun:      {Open: true},
		markerExited:     {Final: true},
		markerNotStarted: {Final: true},
		markerLost:       {Final: true},
		markerCompleted:  {Final: true},
		markerFailed:     {Final: true},
	}
	for fv := range hostagentv1.MarkerState_name {
		from := hostagentv1.MarkerState(fv)
		w, ok := want[from]
		if !ok {
			t.Errorf("marker state %s is in the proto but not in this table: decide its transitions", from)
			continue
		}
		if diff := cmp.Diff(w, sets{Open: MarkerOpen(from), Final: MarkerFinal(from)}); diff != "" {
			t.Errorf("predicates of %s (-want +got):\n%s", MarkerName(from), diff)
		}
		for tv := range hostagentv1.MarkerState_name {
			to := hostagentv1.MarkerState(tv)
			err := CheckMarker(from, to)
			if got := err == nil; got != legal[[2]hostagentv1.MarkerState{from, to}] {
				t.Errorf("CheckMarker(%s, %s) = %v, want legal=%v", MarkerName(from), MarkerName(to), err, !got)
			}
			var te *TransitionError
			if err != nil && (!errors.Is(err, ErrIllegalTransition) || !errors.As(err, &te) || te.From != from || te.To != to) {
				t.Errorf("CheckMarker(%s, %s) error %v is not a *TransitionError matching ErrIllegalTransition", MarkerName(from), MarkerName(to), err)
			}
		}
	}
	if MarkerFinal(hostagentv1.MarkerState(99)) || MarkerOpen(hostagentv1.MarkerState(99)) {
		t.Error("a marker state this build does not know is neither open nor final")
	}
	if got := MarkerName(markerNotStarted); got != "not_started" {
		t.Errorf("MarkerName(not_started) = %q, want %q", got, "not_started")
	}
}
