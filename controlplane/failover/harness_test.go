package failover

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/internal/testing/countingtarget"
)

// The harness's own checks: a check that cannot fail proves nothing.

func TestFencingViolations(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	epochs := []epochRec{{Holder: "r0/a", Epoch: 1, Acquired: t0}, {Holder: "r1/b", Epoch: 2, Acquired: t0.Add(10 * time.Second)}}
	senders := map[int]epochRec{100: {Holder: "r0/a", Epoch: 1}, 200: {Holder: "r1/b", Epoch: 2}}
	at := func(d time.Duration, pid int) countingtarget.Arrival {
		return countingtarget.Arrival{Key: "act_x", Intent: "i", At: t0.Add(d), PID: pid}
	}
	tests := []struct {
		name         string
		arrivals     []countingtarget.Arrival
		bad          int
		unattributed int
	}{
		{"each in its own epoch", []countingtarget.Arrival{at(time.Second, 100), at(11*time.Second, 200)}, 0, 0},
		{"old active after the new epoch began", []countingtarget.Arrival{at(10*time.Second+time.Millisecond, 100)}, 1, 0},
		{"old active just before", []countingtarget.Arrival{at(10*time.Second-time.Millisecond, 100)}, 0, 0},
		{"a process that never held the lease", []countingtarget.Arrival{at(time.Second, 300)}, 1, 0},
		{"unknown sender", []countingtarget.Arrival{at(time.Second, 0)}, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad, u := fencingViolations(epochs, senders, tt.arrivals)
			if diff := cmp.Diff([]int{tt.bad, tt.unattributed}, []int{len(bad), u}); diff != "" {
				t.Errorf("fencingViolations() (violations, unattributed) mismatch (-want +got):\n%s%v", diff, bad)
			}
		})
	}
}
