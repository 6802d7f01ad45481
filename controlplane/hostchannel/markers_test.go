package hostchannel

import (
	"strings"
	"testing"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/hostagent"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// TestClassifyKnowsEveryMarkerState: every state of the host agent's marker
// table is one the channel can turn into an attempt, and the open ones
// (hostagent.MarkerOpen) never end an execution. A state added to the proto
// fails here until the channel handles it.
func TestClassifyKnowsEveryMarkerState(t *testing.T) {
	c := newChannel(t, Config{})
	for v := range hostagentv1.MarkerState_name {
		s := hostagentv1.MarkerState(v)
		if s == hostagentv1.MarkerState_MARKER_STATE_UNSPECIFIED {
			continue
		}
		for _, query := range []bool{false, true} {
			m := &hostagentv1.Marker{ExecutionId: "act_1", State: s, Reason: "r"}
			a := c.classify(t.Context(), nil, "db-01", m, query)
			if strings.Contains(a.Reason, "does not know") {
				t.Errorf("classify(%s, query=%v) = %q: the channel does not handle a state of the marker table", hostagent.MarkerName(s), query, a.Reason)
			}
			if hostagent.MarkerOpen(s) && a.Class != engine.Unknown {
				t.Errorf("classify(open marker %s, query=%v) class = %v, want Unknown: it may still change", hostagent.MarkerName(s), query, a.Class)
			}
			if open(s) != hostagent.MarkerOpen(s) {
				t.Errorf("open(%s) = %v, want the marker table's %v", hostagent.MarkerName(s), open(s), hostagent.MarkerOpen(s))
			}
		}
	}
	if a := c.classify(t.Context(), nil, "db-01", &hostagentv1.Marker{State: 99}, false); a.Class != engine.Unknown || !strings.Contains(a.Reason, "does not know") {
		t.Errorf("classify(state 99) = %+v, want Unknown saying the control plane does not know the state", a)
	}
}
