package sim

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var (
	flagSeeds   = flag.Int("sim.seeds", 200, "schedules TestSimulate runs")
	flagSeed    = flag.Int64("sim.seed", 0, "run only this schedule and print it (replay)")
	flagFirst   = flag.Int64("sim.first", 1, "the first seed of the run")
	flagReplays = flag.Int("sim.replays", 100, "schedules TestReplayIsExact runs twice")
	flagSlow    = flag.Bool("sim.slow", false, "let some commits take seconds (finds timing bugs; such schedules may not replay exactly)")
)

// result is one schedule's outcome.
type result struct {
	seed       int64
	violations []string
	trace      []string
	steps      int
}

// simulate runs one schedule in its own bubble.
func simulate(t *testing.T, seed int64, opt options) result {
	var r result
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(seed, opt)
		w.run()
		r = result{seed: seed, violations: w.violations, trace: w.trace}
	})
	return r
}

// runSeeds runs the seeds from first on, on every core, until n are done or
// one fails (the lowest failing seed is reported). A run longer than a
// minute logs its progress each minute, so a long one shows it is alive.
func runSeeds(t *testing.T, first int64, n int, opt options) (failed *result, ran int64) {
	var next, done atomic.Int64
	next.Store(first)
	var mu sync.Mutex
	var wg sync.WaitGroup
	finished := make(chan struct{})
	var logger sync.WaitGroup
	defer logger.Wait()
	defer close(finished)
	logger.Go(func() {
		start := time.Now()
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		for {
			select {
			case <-finished:
				return
			case <-tick.C:
				t.Logf("%d of %d schedules after %s", done.Load(), n, time.Since(start).Round(time.Second))
			}
		}
	})
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				seed := next.Add(1) - 1
				if seed >= first+int64(n) {
					return
				}
				mu.Lock()
				stop := failed != nil && failed.seed < seed
				mu.Unlock()
				if stop {
					return
				}
				r := simulate(t, seed, opt)
				done.Add(1)
				if len(r.violations) > 0 {
					mu.Lock()
					if failed == nil || r.seed < failed.seed {
						failed = &r
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return failed, done.Load()
}

func report(r *result) string {
	return fmt.Sprintf("seed %d: %s\nreplay: go test ./controlplane/sim -run TestSimulate -sim.seed=%d -v\nschedule:\n%s",
		r.seed, strings.Join(r.violations, "; "), r.seed, strings.Join(r.trace, "\n"))
}

// TestSimulate runs -sim.seeds schedules (or replays -sim.seed) and fails
// on the first broken invariant, printing its schedule.
func TestSimulate(t *testing.T) {
	opt := defaultOptions
	opt.slow = *flagSlow
	if *flagSeed != 0 {
		r := simulate(t, *flagSeed, opt)
		t.Log("\n" + strings.Join(r.trace, "\n"))
		if len(r.violations) > 0 {
			t.Fatal(report(&r))
		}
		return
	}
	start := time.Now()
	failed, ran := runSeeds(t, *flagFirst, *flagSeeds, opt)
	t.Logf("%d schedules from seed %d in %s", ran, *flagFirst, time.Since(start).Round(time.Millisecond))
	if failed != nil {
		t.Fatal(report(failed))
	}
}

// TestReplayIsExact runs schedules twice and wants the same trace, line for
// line: every choice and every state it led to.
func TestReplayIsExact(t *testing.T) {
	for seed := int64(1); seed <= int64(*flagReplays); seed++ {
		a, b := simulate(t, seed, defaultOptions), simulate(t, seed, defaultOptions)
		for i := range max(len(a.trace), len(b.trace)) {
			var la, lb string
			if i < len(a.trace) {
				la = a.trace[i]
			}
			if i < len(b.trace) {
				lb = b.trace[i]
			}
			if la != lb {
				t.Fatalf("seed %d diverges at line %d:\nfirst:  %s\nsecond: %s\nbefore it:\n%s", seed, i, la, lb, strings.Join(a.trace[max(0, i-10):i], "\n"))
			}
		}
	}
}
