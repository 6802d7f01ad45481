package failover

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/testing/faultproxy"
	"github.com/latchhq/latch/internal/testing/pgtest"
	"github.com/latchhq/latch/internal/testing/testbin"
)

// How a failure of the active is brought about.
type killMode int

const (
	killRandom   killMode = iota // SIGKILL at a random moment
	killHolding                  // SIGKILL while the target holds one of its requests
	killAnswered                 // SIGKILL just after the target answered one of its requests
	freezeDB                     // freeze its database connections, thaw after the takeover
)

func (m killMode) String() string {
	return [...]string{"kill-random", "kill-while-holding", "kill-after-answer", "freeze-db"}[m]
}

// failure is one failure of the active and what followed.
type failure struct {
	mode  killMode
	at    time.Time
	whom  string
	epoch int64
}

// TestFailoverUnderLoad: three replicas on one database, eight agents
// calling through two fronts that know every replica, the active
// SIGKILLed again and again (at random moments, while the target holds a
// request, just after it answered) and once frozen at its database
// connections. See the package comment for what it asserts; it logs the
// failover times.
func TestFailoverUnderLoad(t *testing.T) {
	needBinaries(t)
	kills := *flagKills
	if kills < 1 {
		t.Skip("-failover.kills=0")
	}
	url := pgtest.URL(t)
	pgAddr := "127.0.0.1:" + strconv.Itoa(pgtest.Shared(t).Port())
	c := newCluster(t, clusterOpts{replicas: 3, store: url, proxied: true, pgAddr: pgAddr})
	c.startFronts(t, 2)
	stopSup := c.supervise()
	defer stopSup()
	s := seed(t)
	rng := rand.New(rand.NewPCG(uint64(s), 7))
	l := startLoad(8, c.mcpCaller(), s, 0.25, 10_000)
	l.waitAcks(t, 10, time.Time{}, 60*time.Second)

	// One freeze, in the middle of the run; the kills cycle through the
	// modes from a random start so that each appears in a short run.
	freezeAt := kills / 2
	first := rng.IntN(3)
	var fails []failure
	start := time.Now()
	for k, killed := 0, 0; k <= kills; k++ {
		mode := freezeDB
		if k != freezeAt {
			mode = killMode((first + killed) % 3)
			killed++
		}
		r, p := c.waitAnyActive(60*time.Second, nil)
		if r == nil {
			t.Fatalf("failure %d: no replica active and serving within 60s", k)
		}
		// Serve a little first: a failure right at takeover is a
		// different test (and would not measure this failover).
		l.waitAcks(t, 3, time.Now(), 60*time.Second)
		time.Sleep(time.Duration(100+rng.IntN(1200)) * time.Millisecond)
		_, epoch := holderOf(p)
		f := failure{mode: mode, whom: r.name, epoch: epoch}
		switch mode {
		case killRandom:
			f.at = time.Now()
			p.Kill()
		case killHolding, killAnswered:
			f.at, f.mode = c.killOnTarget(p, mode, 5*time.Second)
		case freezeDB:
			f.at = time.Now()
			if err := r.proxy.SetMode(faultproxy.Freeze); err != nil {
				t.Fatal(err)
			}
			nr, _ := c.waitAnyActive(30*time.Second, p)
			if nr == nil {
				t.Fatalf("no replica took over within 30s of freezing %s's database connections", r.name)
			}
			if err := r.proxy.SetMode(faultproxy.Pass); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.Done():
			case <-time.After(15 * time.Second):
				t.Errorf("%s is still running 15s after its database connections thawed; it lost its lease and should have stopped", r.name)
				p.Kill()
			}
		}
		fails = append(fails, f)
		t.Logf("failure %d: %s of %s (epoch %d)", len(fails), f.mode, f.whom, f.epoch)
	}
	c.waitAnyActive(60*time.Second, nil)
	l.waitAcks(t, 5, time.Now(), 60*time.Second)
	acks := l.finish(t)
	stopSup()
	wall := time.Since(start)

	v, u := c.checkFencing(t)
	c.verify(t, acks)
	c.reportFailover(t, fails, acks)
	t.Logf("%d failures (%s) in %s; %d acknowledged calls by 8 agents; %d target arrivals (%d not attributed to a process, %d fencing violations)",
		len(fails), modeCounts(fails), wall.Round(time.Second), len(acks), len(c.tgt.Arrivals()), u, v)
}

// killOnTarget SIGKILLs p from inside the target: while it holds one of
// p's requests, or just after it answered one. If none comes within
// bound, p is killed anyway and the mode reported is killRandom.
func (c *cluster) killOnTarget(p *testbin.Proc, mode killMode, bound time.Duration) (time.Time, killMode) {
	var once sync.Once
	fired := make(chan time.Time, 1)
	hook := func(pid int) {
		if pid != p.PID() {
			return
		}
		once.Do(func() {
			at := time.Now()
			p.Kill()
			fired <- at
		})
	}
	if mode == killHolding {
		c.tgt.SetHooks(hook, nil)
	} else {
		c.tgt.SetHooks(nil, hook)
	}
	defer c.tgt.SetHooks(nil, nil)
	select {
	case at := <-fired:
		return at, mode
	case <-time.After(bound):
	}
	at := time.Now()
	once.Do(func() { p.Kill() })
	select {
	case at = <-fired: // it fired meanwhile
		return at, mode
	default:
	}
	return at, killRandom
}

func modeCounts(fs []failure) string {
	n := map[killMode]int{}
	for _, f := range fs {
		n[f.mode]++
	}
	var parts []string
	for m := killRandom; m <= freezeDB; m++ {
		parts = append(parts, fmt.Sprintf("%s %d", m, n[m]))
	}
	return strings.Join(parts, ", ")
}

// reportFailover logs, per failure, the time from the failure to the
// first Submit accepted after it (by the new active: the old one is dead
// or cannot commit), and p50/max over the kills. No assertion: speed is
// measured, not asserted.
func (c *cluster) reportFailover(t *testing.T, fails []failure, acks []ack) {
	times := acceptedTimes(t, c.operator(t), acks)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	var kills []time.Duration
	for i, f := range fails {
		var d time.Duration = -1
		for _, at := range times {
			if at.After(f.at) {
				d = at.Sub(f.at)
				break
			}
		}
		if d < 0 {
			t.Logf("failure %d (%s): no Submit accepted after it", i+1, f.mode)
			continue
		}
		t.Logf("failure %d (%s of %s): first Submit accepted %s after it", i+1, f.mode, f.whom, d.Round(time.Millisecond))
		if f.mode != freezeDB {
			kills = append(kills, d)
		}
	}
	if len(kills) == 0 {
		return
	}
	slices.Sort(kills)
	p50, mx := kills[len(kills)/2], kills[len(kills)-1]
	line := fmt.Sprintf("failover after SIGKILL of the active (lease ttl %s): p50 %s, max %s over %d kills (target p50 <= 3s, max <= 6s)", leaseTTL, p50.Round(time.Millisecond), mx.Round(time.Millisecond), len(kills))
	fmt.Println(line)
	t.Log(line)
}
