package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/loadgen"
)

// round is a path's round of calls whose serving processes spent devµs
// (latch dev) and bareµs (the bare server's process) per call.
func round(calls int, devµs, bareµs float64) pathRound {
	per := func(µs float64) time.Duration { return time.Duration(µs * 1e3 * float64(calls)) }
	return pathRound{res: loadgen.Result{Ops: calls}, cpu: benchCPU{dev: per(devµs), bare: per(bareµs), devOK: true, bareOK: true}}
}

// TestServerRoundsMedian: each round's mcp path against the bare path of
// the same round, and the median of what Latch adds over the rounds (the
// middle one of an odd count, the mean of the two middle ones of an even
// count), so one round a compaction landed in does not move the figure.
func TestServerRoundsMedian(t *testing.T) {
	var out bytes.Buffer
	printServerRounds(&out,
		[]pathRound{round(100, 1000, 0), round(200, 1900, 0), round(100, 1100, 0)},
		[]pathRound{round(100, 100, 700), round(100, 100, 700), round(100, 100, 600)})
	for _, want := range []string{
		"round 1: bare 800, Latch 1000, Latch adds 200\n",
		"round 2: bare 800, Latch 1900, Latch adds 1100\n",
		"round 3: bare 700, Latch 1100, Latch adds 400\n",
		"Latch adds: median 400µs over 3 rounds (200 to 1100).",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	printServerRounds(&out,
		[]pathRound{round(10, 1000, 0), round(10, 1300, 0), round(0, 0, 0), round(10, 900, 0), round(10, 950, 0)},
		[]pathRound{round(10, 0, 800), round(10, 0, 800), round(10, 0, 800), round(10, 0, 800), round(10, 0, 800)})
	for _, want := range []string{
		"round 3: no calls completed on a path",
		"Latch adds: median 175µs over 4 rounds (100 to 500).",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	printServerRounds(&out, []pathRound{round(10, 1000, 0)}, []pathRound{round(10, 0, 800)})
	if out.Len() != 0 {
		t.Errorf("one round printed per-round lines:\n%s", out.String())
	}
}
