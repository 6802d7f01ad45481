package failover

import (
	"strconv"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/testing/faultproxy"
	"github.com/latchhq/latch/internal/testing/pgtest"
)

// TestFreezeStopsDispatch: the active replica's database connections are
// frozen (held open, nothing forwarded) while agents keep calling. The
// active cannot renew its lease, so it must stop dispatching before the
// lease can expire; the standby takes over once it has. Then the frozen
// connections thaw, so whatever the old active had queued reaches the
// database late (its commits must be fenced). The target must see no
// request from the old active after the new epoch began, no intent twice,
// and every acknowledged execution must survive.
func TestFreezeStopsDispatch(t *testing.T) {
	needBinaries(t)
	url := pgtest.URL(t)
	pgAddr := "127.0.0.1:" + strconv.Itoa(pgtest.Shared(t).Port())
	c := newCluster(t, clusterOpts{replicas: 2, store: url, proxied: true, pgAddr: pgAddr})
	l := startLoad(4, c.grpcCaller(t), seed(t), 0.3, 200)
	l.waitAcks(t, 10, time.Time{}, 60*time.Second)

	old, oldProc := c.active()
	if old == nil {
		t.Fatal("no active replica")
	}
	_, oldEpoch := holderOf(oldProc)
	frozeAt := time.Now()
	if err := old.proxy.SetMode(faultproxy.Freeze); err != nil {
		t.Fatal(err)
	}
	t.Logf("froze the database connections of %s (epoch %d)", old.name, oldEpoch)
	newR, newProc := c.waitAnyActive(30*time.Second, oldProc)
	if newR == nil || newR == old {
		t.Fatalf("no other replica took over within 30s of the freeze")
	}
	_, newEpoch := holderOf(newProc)
	tookOver := time.Since(frozeAt)
	t.Logf("%s took over with epoch %d, %s after the freeze", newR.name, newEpoch, tookOver.Round(time.Millisecond))
	l.waitAcks(t, 10, time.Now(), 60*time.Second)

	// Thaw: the old active's queued queries reach the database now.
	if err := old.proxy.SetMode(faultproxy.Pass); err != nil {
		t.Fatal(err)
	}
	select {
	case <-oldProc.Done():
		t.Logf("the old active exited (code %d) after the thaw", oldProc.ExitCode())
	case <-time.After(15 * time.Second):
		t.Errorf("the old active %s is still running 15s after the thaw; it should have stopped on losing its lease", old.name)
	}
	l.waitAcks(t, 5, time.Now(), 60*time.Second)
	acks := l.finish(t)

	late := 0
	for _, a := range c.tgt.Arrivals() {
		if a.PID == oldProc.PID() && a.At.After(frozeAt) {
			late++
			t.Logf("the old active sent %s (intent %s) %s after the freeze", a.Key, a.Intent, a.At.Sub(frozeAt).Round(time.Millisecond))
		}
	}
	if v, u := c.checkFencing(t); v > 0 || u > 0 {
		t.Logf("fencing: %d violations, %d arrivals not attributed to a replica", v, u)
	}
	c.verify(t, acks)
	t.Logf("old active's sends after the freeze: %d (all before the new epoch began, else reported above); takeover %s after the freeze", late, tookOver.Round(time.Millisecond))
}
