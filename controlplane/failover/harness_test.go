package failover

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The harness's own checks: a check that cannot fail proves nothing.

func TestFencingViolations(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	epochs := []epochRec{{Holder: "r0/a", Epoch: 1, Acquired: t0}, {Holder: "r1/b", Epoch: 2, Acquired: t0.Add(10 * time.Second)}}
	senders := map[int]epochRec{100: {Holder: "r0/a", Epoch: 1}, 200: {Holder: "r1/b", Epoch: 2}}
	at := func(d time.Duration, pid int) arrival {
		return arrival{Key: "act_x", Intent: "i", At: t0.Add(d), PID: pid}
	}
	tests := []struct {
		name         string
		arrivals     []arrival
		bad          int
		unattributed int
	}{
		{"each in its own epoch", []arrival{at(time.Second, 100), at(11*time.Second, 200)}, 0, 0},
		{"old active after the new epoch began", []arrival{at(10*time.Second+time.Millisecond, 100)}, 1, 0},
		{"old active just before", []arrival{at(10*time.Second-time.Millisecond, 100)}, 0, 0},
		{"a process that never held the lease", []arrival{at(time.Second, 300)}, 1, 0},
		{"unknown sender", []arrival{at(time.Second, 0)}, 0, 1},
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

// TestSocketOwner: the target attributes a request from this process to
// this process, and to nobody when this process is not a candidate.
func TestSocketOwner(t *testing.T) {
	var got []int
	tgt := newTarget(0, func() []int { return []int{os.Getpid()} })
	srv := httptest.NewUnstartedServer(tgt)
	srv.Config.ConnContext = tgt.connContext
	srv.Start()
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/idem/effect", strings.NewReader(`{"intent":"x"}`))
	req.Header.Set("Idempotency-Key", "act_1")
	if r, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		r.Body.Close()
	}
	for _, a := range tgt.arrivalsSoFar() {
		got = append(got, a.PID)
	}
	if diff := cmp.Diff([]int{os.Getpid()}, got); diff != "" {
		t.Errorf("arrival PIDs mismatch (-want +got):\n%s", diff)
	}
	l, _ := net.ResolveTCPAddr("tcp", "127.0.0.1:1")
	if pid := socketOwner(l, l, []int{os.Getpid()}); pid != 0 {
		t.Errorf("socketOwner(no such socket) = %d, want 0", pid)
	}
	tgt.close()
}
