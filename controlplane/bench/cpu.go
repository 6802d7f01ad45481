package bench

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/latchhq/latch/internal/cputime"
	"github.com/latchhq/latch/internal/loadgen"
)

// cpuClock reads the CPU time (user + system, every thread) of the
// processes a bench path runs in: this one (the client, the bare server,
// and with its own `latch dev` the whole stack) and, when measuring a
// `latch dev` running elsewhere (--data), that process through
// /proc/<pid>/stat. CPU per call is what a path costs whatever else the
// machine does; wall-clock rates on a shared machine are not.
type cpuClock struct {
	// devPID is the other `latch dev` process, 0 when it runs in this one;
	// barePID the bare MCP server's process, 0 when it runs in this one.
	devPID, barePID int
	// store reads the store's write counters (runBenchPath reads them
	// outside the CPU window: a scrape costs both processes CPU).
	store *writesMeter
}

// cpuSample is one reading. devOK (bareOK) is false when the other
// process's time could not be read (not Linux, an old dev.json without its
// pid, gone).
type cpuSample struct {
	self, dev, bare time.Duration
	devOK, bareOK   bool
}

func (c cpuClock) read() cpuSample {
	s := cpuSample{self: cputime.Self()}
	s.dev, s.devOK = processCPU(c.devPID)
	s.bare, s.bareOK = processCPU(c.barePID)
	return s
}

func processCPU(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	st, ok := cputime.Process(pid)
	return st.CPU, ok
}

// benchCPU is what a path's round spent: the CPU (total is self plus dev
// plus bare) and what the store wrote.
type benchCPU struct {
	self, dev, bare time.Duration
	devOK, bareOK   bool
	writes          storeWrites
}

func (a cpuSample) since(b cpuSample) benchCPU {
	d := benchCPU{self: a.self - b.self}
	if a.devOK && b.devOK {
		d.dev, d.devOK = a.dev-b.dev, true
	}
	if a.bareOK && b.bareOK {
		d.bare, d.bareOK = a.bare-b.bare, true
	}
	return d
}

func (c benchCPU) add(o benchCPU) benchCPU {
	return benchCPU{self: c.self + o.self, dev: c.dev + o.dev, bare: c.bare + o.bare, devOK: c.devOK && o.devOK, bareOK: c.bareOK && o.bareOK,
		writes: c.writes.add(o.writes)}
}

func (c benchCPU) total() time.Duration { return c.self + c.dev + c.bare }

// server is the CPU the serving processes spent: `latch dev` (the front,
// the control plane and the demo target) and the bare MCP server's
// process. On the bare path both serve (the bare server, and the demo
// target it calls in latch dev); on the mcp path only latch dev does.
func (c benchCPU) server() time.Duration { return c.dev + c.bare }

// printServerCPU is the line the clients' CPU does not blur: what each
// server spent per call, the demo target's share included on both sides,
// and what Latch adds.
func printServerCPU(out io.Writer, mcpCPU benchCPU, m loadgen.Result, bareCPU benchCPU, b loadgen.Result) {
	if m.Ops == 0 || b.Ops == 0 {
		return
	}
	mu, bu := serverµs(mcpCPU, m.Ops), serverµs(bareCPU, b.Ops)
	fmt.Fprintf(out, "Server CPU per call (the serving processes, the demo target's share on both): bare %.0fµs, Latch %.0fµs; Latch adds %.0fµs (%.2f×).\n", bu, mu, mu-bu, mu/bu)
}

// serverµs is the serving processes' CPU per call in microseconds (n > 0).
func serverµs(c benchCPU, n int) float64 {
	return float64(c.server().Nanoseconds()) / 1e3 / float64(n)
}

// perCall formats d over n calls in milliseconds ("—" without calls).
func perCall(d time.Duration, n int) string {
	if n <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.3fms", float64(d.Nanoseconds())/1e6/float64(n))
}

// pathRound is one round of one path: its calls and what they cost.
type pathRound struct {
	res loadgen.Result
	cpu benchCPU
}

// printServerRounds gives the server line of each round and the median of
// what Latch adds over them. One round's figure moves with whatever lands
// in it (a memtable flush or a compaction of the store, a neighbour's
// burst), so with --rounds the median of the rounds, each mcp round against
// the bare round next to it, is the figure to quote.
func printServerRounds(out io.Writer, mcp, bare []pathRound) {
	n := min(len(mcp), len(bare))
	if n < 2 {
		return
	}
	fmt.Fprintln(out, "Server CPU per call per round (µs; the demo target's share on both):")
	adds := make([]float64, 0, n)
	for i := 0; i < len(mcp) && i < len(bare); i++ {
		m, b := mcp[i], bare[i]
		if m.res.Ops == 0 || b.res.Ops == 0 {
			fmt.Fprintf(out, "  round %d: no calls completed on a path\n", i+1)
			continue
		}
		mu, bu := serverµs(m.cpu, m.res.Ops), serverµs(b.cpu, b.res.Ops)
		adds = append(adds, mu-bu)
		fmt.Fprintf(out, "  round %d: bare %.0f, Latch %.0f, Latch adds %.0f\n", i+1, bu, mu, mu-bu)
	}
	if len(adds) < 2 {
		return
	}
	slices.Sort(adds)
	med := adds[len(adds)/2]
	if len(adds)%2 == 0 {
		med = (adds[len(adds)/2-1] + adds[len(adds)/2]) / 2
	}
	fmt.Fprintf(out, "  Latch adds: median %.0fµs over %d rounds (%.0f to %.0f).\n", med, len(adds), adds[0], adds[len(adds)-1])
}
