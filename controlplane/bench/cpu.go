package bench

import (
	"fmt"
	"time"

	"github.com/latchhq/latch/internal/cputime"
)

// cpuClock reads the CPU time (user + system, every thread) of the
// processes a bench path runs in: this one (the client, the bare server,
// and with its own `latch dev` the whole stack) and, when measuring a
// `latch dev` running elsewhere (--data), that process through
// /proc/<pid>/stat. CPU per call is what a path costs whatever else the
// machine does; wall-clock rates on a shared machine are not.
type cpuClock struct {
	// devPID is the other `latch dev` process, 0 when it runs in this one.
	devPID int
}

// cpuSample is one reading. devOK is false when the other process's time
// could not be read (not Linux, an old dev.json without its pid, gone).
type cpuSample struct {
	self, dev time.Duration
	devOK     bool
}

func (c cpuClock) read() cpuSample {
	s := cpuSample{self: cputime.Self()}
	if c.devPID > 0 {
		var st cputime.Stat
		st, s.devOK = cputime.Process(c.devPID)
		s.dev = st.CPU
	}
	return s
}

// benchCPU is the CPU a path's round spent: total is self plus dev.
type benchCPU struct {
	self, dev time.Duration
	devOK     bool
}

func (a cpuSample) since(b cpuSample) benchCPU {
	d := benchCPU{self: a.self - b.self}
	if a.devOK && b.devOK {
		d.dev, d.devOK = a.dev-b.dev, true
	}
	return d
}

func (c benchCPU) add(o benchCPU) benchCPU {
	return benchCPU{self: c.self + o.self, dev: c.dev + o.dev, devOK: c.devOK && o.devOK}
}

func (c benchCPU) total() time.Duration { return c.self + c.dev }

// perCall formats d over n calls in milliseconds ("—" without calls).
func perCall(d time.Duration, n int) string {
	if n <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.3fms", float64(d.Nanoseconds())/1e6/float64(n))
}
