package faultsuite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/testing/countingtarget"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// TestFaultSuite runs the randomized trials (see the package comment).
func TestFaultSuite(t *testing.T) {
	n, seed, lanes, err := settings()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Skip("fault suite off: run with -faultsuite.trials=N (or LATCH_FAULT_TRIALS=N), e.g. go test -run TestFaultSuite ./controlplane/faultsuite -faultsuite.trials=100")
	}
	t.Logf("fault suite: %d trials from seed %d on %d lanes (replay one trial: -faultsuite.seed=SEED -faultsuite.trials=1)", n, seed, lanes)
	start := time.Now()
	verdicts := make([]*verdict, n)
	t.Run("lanes", func(t *testing.T) {
		for li := range lanes {
			t.Run(fmt.Sprintf("lane%d", li), func(t *testing.T) {
				t.Parallel()
				l := newLane(t, li)
				if !l.settle && li == 0 {
					t.Logf("this build's catalog has no `settle` field: status_query trials run under the old evidence rule")
				}
				var mine []*verdict
				for i := li; i < n; i += lanes {
					tr := newTrial(seed + int64(i))
					v := l.run(t, tr)
					verdicts[i] = v
					mine = append(mine, v)
					if v.bad() {
						t.Errorf("trial %s: duplicates %d, silent %d, invisible %d\n  %v", tr, v.duplicates, v.silent, v.invisible, v.notes)
					}
					if n == 1 { // a replay: show what happened
						t.Logf("trial %s: %v", tr, v.notes)
						for _, id := range v.ids {
							t.Logf("journal %s", l.journalOf(id))
						}
					}
				}
				l.sweep(t, mine)
			})
		}
	})
	var sum verdict
	inconclusive := 0
	for _, v := range verdicts {
		if v == nil {
			continue
		}
		sum.duplicates += v.duplicates
		sum.silent += v.silent
		sum.invisible += v.invisible
		sum.misreported += v.misreported
		sum.unanswered += v.unanswered
		if v.inconclusive != "" {
			inconclusive++
			t.Logf("trial %s inconclusive: %s", v.trial, v.inconclusive)
		}
		if v.misreported+v.unanswered > 0 {
			t.Logf("trial %s misreported %d, unanswered %d: %v", v.trial, v.misreported, v.unanswered, v.notes)
		}
	}
	t.Log(breakdown(verdicts))
	wall := time.Since(start)
	line := fmt.Sprintf("trials %d, duplicate effects %d, silent re-executions %d, invisible %d (misreported %d, unanswered %d, inconclusive %d; seed %d, %d lanes, wall %s, %.0f trials/min)",
		n, sum.duplicates, sum.silent, sum.invisible, sum.misreported, sum.unanswered, inconclusive, seed, lanes, wall.Round(time.Second), float64(n)/wall.Minutes())
	fmt.Println(line)
	t.Log(line)
	if sum.duplicates+sum.silent+sum.invisible > 0 {
		t.Errorf("fault suite found violations: %s", line)
	}
	// A harness that cannot set its faults up proves nothing.
	if inconclusive > n/10 {
		t.Errorf("%d of %d trials were inconclusive (their fault could not be set up)", inconclusive, n)
	}
}

// sweep waits, bounded, for recovery to settle every execution the lane's
// trials saw, then counts effects and checks states again: a duplicate or
// a wrong "not executed" that recovery produced after a trial ended is
// charged to that trial.
func (l *lane) sweep(t *testing.T, vs []*verdict) {
	deadline := time.Now().Add(dispatchTimeout + settle + 20*time.Second)
	unsettled := func() int {
		n := 0
		for _, v := range vs {
			for _, id := range v.ids {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				r, err := l.api.Get(ctx, &controlplanev1.GetRequest{ExecutionId: id})
				cancel()
				if err != nil {
					continue
				}
				if s := stateName(r.GetExecution().GetState()); s == "dispatched" || s == "outcome_unknown" {
					n++
				}
			}
		}
		return n
	}
	left := unsettled()
	for left > 0 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		left = unsettled()
	}
	if left > 0 {
		t.Logf("lane %d: %d executions still unsettled after the sweep's bound (they stay visible as such)", l.id, left)
	}
	for _, v := range vs {
		if v.inconclusive != "" {
			continue
		}
		keys, effects := l.truthOf(t, v.trial)
		before := v.duplicates
		if extra := effects - 1 - before; effects > 1 && extra > 0 {
			v.duplicates += extra
			v.notef("after the sweep the target counts %d effects: %v", effects, keys)
			l.explain(v, keys)
		}
		// A re-issue answered new is a silent re-execution after all when
		// another execution of the intent ends up with the effect: the
		// intent was still live when the retry got a fresh execution.
		silentBefore := v.silent
		for _, id := range v.retriedNew {
			for _, k := range keys {
				if k.Key != id && k.State == countingtarget.Committed {
					v.silent++
					v.notef("after the sweep: the re-issue answered new (%s) although %s of the same intent had its effect", id, k.Key)
					break
				}
			}
		}
		late := 0
		for _, k := range keys {
			if k.State != countingtarget.Committed || v.flagged[k.Key] {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			r, err := l.api.Get(ctx, &controlplanev1.GetRequest{ExecutionId: k.Key})
			cancel()
			if err != nil {
				continue // the trial's own check saw it
			}
			if s := stateName(r.GetExecution().GetState()); !mayHaveEffect[s] {
				late++
				v.notef("after the sweep %s, which had its effect, shows %s", k.Key, s)
			}
		}
		v.invisible += late
		if v.duplicates > before || v.silent > silentBefore || late > 0 {
			t.Errorf("trial %s (after the sweep): duplicates %d, silent %d, invisible %d\n  %v", v.trial, v.duplicates, v.silent, v.invisible, v.notes)
		}
	}
}

// breakdown tabulates trials and violating trials per fault point and
// replay class, so a run shows what it covered.
func breakdown(vs []*verdict) string {
	type cell struct{ trials, bad int }
	var cells [numFaultPoints][numClasses]cell
	var retries [numRetries]cell
	for _, v := range vs {
		if v == nil {
			continue
		}
		c := &cells[v.trial.fault][v.trial.class]
		r := &retries[v.trial.retry]
		c.trials++
		r.trials++
		if v.bad() {
			c.bad++
			r.bad++
		}
	}
	var b strings.Builder
	b.WriteString("trials (violating) per fault point and replay class:\n")
	fmt.Fprintf(&b, "  %-22s", "")
	for c := range numClasses {
		fmt.Fprintf(&b, " %16s", replayClass(c))
	}
	b.WriteString("\n")
	for f := range numFaultPoints {
		fmt.Fprintf(&b, "  %-22s", faultPoint(f))
		for c := range numClasses {
			x := cells[f][c]
			fmt.Fprintf(&b, " %16s", fmt.Sprintf("%d (%d)", x.trials, x.bad))
		}
		b.WriteString("\n")
	}
	b.WriteString("  per retry behaviour:")
	for r := range numRetries {
		fmt.Fprintf(&b, " %s %d (%d);", retryKind(r), retries[r].trials, retries[r].bad)
	}
	return b.String()
}
