// Package cputime reads processor time (user + system) spent by this
// process and by others, on Linux: what benchmarks and `latch bench` report
// per operation, because unlike a rate it does not depend on what else a
// shared machine is doing.
package cputime

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of /proc/<pid>/stat's utime and stime: USER_HZ, which
// Linux fixes at 100 for this interface on every architecture. The 10 ms
// granularity is well below a benchmark round's processor time.
const userHZ = 100

// Self is this process's user + system time so far (getrusage; 0 when it
// cannot be read).
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Stat is what /proc/<pid>/stat says about a process's processor time.
type Stat struct {
	PPID int           // the parent's pid
	CPU  time.Duration // utime + stime
}

// Process reads pid's /proc/<pid>/stat; false when it cannot be read (the
// process is gone, or this is not Linux).
func Process(pid int) (Stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, false
	}
	return Parse(string(b))
}

// Parse takes ppid, utime and stime (fields 4, 14 and 15) from a
// /proc/<pid>/stat line, counting after the last ')' because the command
// name (field 2) may hold spaces and parentheses.
func Parse(stat string) (Stat, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return Stat{}, false
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return Stat{}, false
	}
	ppid, err0 := strconv.Atoi(f[1])
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err0 != nil || err1 != nil || err2 != nil || ut < 0 || st < 0 {
		return Stat{}, false
	}
	return Stat{PPID: ppid, CPU: time.Duration(ut+st) * (time.Second / userHZ)}, true
}
