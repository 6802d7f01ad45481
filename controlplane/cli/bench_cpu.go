package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	s := cpuSample{self: selfCPU()}
	if c.devPID > 0 {
		s.dev, s.devOK = procCPU(c.devPID)
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

// selfCPU is this process's user + system time (getrusage, microseconds).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// userHZ is the unit of /proc/<pid>/stat's utime and stime: USER_HZ,
// which Linux fixes at 100 for this interface on every architecture it
// exports it on. The 10 ms granularity is well below a round's CPU time.
const userHZ = 100

// procCPU reads utime + stime of pid from /proc/<pid>/stat; false when it
// cannot be read.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseProcCPU(string(b))
}

// parseProcCPU takes utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line, counting after the last ')' because the command
// name (field 2) may hold spaces and parentheses.
func parseProcCPU(stat string) (time.Duration, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil || ut < 0 || st < 0 {
		return 0, false
	}
	return time.Duration(ut+st) * (time.Second / userHZ), true
}
