//go:build linux

package mcpchannel

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// procAttr puts a stdio upstream in its own process group (stopping it
// reaches what it started: npx runs node under it) and has the kernel
// SIGKILL it when the thread that started it exits: the control plane
// killed, its upstreams do not run on beside the next one. The thread is
// the one the starting goroutine is locked to until the process is reaped
// (startLocked): Pdeathsig follows the creating thread, not the process
// (prctl(2) PR_SET_PDEATHSIG; golang/go#27505).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// procStat is what /proc/PID/stat says of a process.
type procStat struct {
	state byte
	pgrp  int
	start uint64 // field 22: clock ticks after boot
}

var errNoProc = errors.New("mcpchannel: no such process")

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return procStat{}, errNoProc
	}
	if err != nil {
		return procStat{}, err
	}
	// The comm field (2) is in parentheses and may hold spaces and ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("mcpchannel: /proc/%d/stat does not parse", pid)
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("mcpchannel: /proc/%d/stat has %d fields after comm", pid, len(f))
	}
	pgrp, err1 := strconv.Atoi(string(f[2]))
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil {
		return procStat{}, fmt.Errorf("mcpchannel: /proc/%d/stat does not parse", pid)
	}
	return procStat{state: f[0][0], pgrp: pgrp, start: start}, nil
}

// groupMembers lists the live (not zombie) processes of process group pgid.
func groupMembers(pgid int) []procStat {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procStat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(pid); err == nil && st.pgrp == pgid && st.state != 'Z' && st.state != 'X' {
			out = append(out, st)
		}
	}
	return out
}

const procSupported = true
