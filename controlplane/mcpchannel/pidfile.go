package mcpchannel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/internal/atomicfile"
)

// Pid files.
//
// Config.PidDir (the control plane's DATA/upstream-pids) holds one file per
// running stdio upstream process, PID.pid, whose one line is
//
//	PID START UPSTREAM
//
// START being field 22 of /proc/PID/stat (the process's start time in clock
// ticks after boot). The file is written once the process has started and
// removed once its process group is stopped; the text form is the pid file
// convention operators' tools read, not a record of Latch's state. A file
// left at New is an upstream of a run that did not stop it (killed): its
// process group is stopped before anything starts, when it is still the
// same process (a recycled PID is never signalled: its start time differs)
// or, the leader gone, by the members of its group (Linux never reuses a
// PID while a process group of that ID lives).

func pidPath(dir string, pid int) string { return filepath.Join(dir, strconv.Itoa(pid)+".pid") }

// recordPid writes the pid file of a started process.
func recordPid(dir string, pid int, upstream string) error {
	if dir == "" || !procSupported {
		return nil
	}
	st, err := readProcStat(pid)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(pidPath(dir, pid), fmt.Appendf(nil, "%d %d %s\n", pid, st.start, upstream), 0o600, false)
}

func removePid(dir string, pid int) {
	if dir != "" {
		os.Remove(pidPath(dir, pid))
	}
}

// stopOrphans stops the process groups the pid files in dir record (see
// above) and removes the files.
func stopOrphans(dir string, log hclog.Logger) {
	if dir == "" || !procSupported {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("cannot read the upstream pid files", "dir", dir, "error", err)
		}
		return
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if !strings.HasSuffix(e.Name(), ".pid") {
			os.Remove(p) // a temporary file left half-written
			continue
		}
		b, err := os.ReadFile(p)
		var pid int
		var start uint64
		var name string
		if err == nil {
			_, err = fmt.Sscanf(string(b), "%d %d %s", &pid, &start, &name)
		}
		if err != nil || pid <= 1 {
			log.Warn("unreadable upstream pid file removed", "file", p, "error", err)
			os.Remove(p)
			continue
		}
		stopOrphan(pid, start, log.With("upstream", name, "pid", pid))
		os.Remove(p)
	}
}

func stopOrphan(pid int, start uint64, log hclog.Logger) {
	live := func() bool {
		st, err := readProcStat(pid)
		if err == nil && st.start == start && st.state != 'Z' && st.state != 'X' {
			return true
		}
		for _, m := range groupMembers(pid) {
			if m.start >= start {
				return true
			}
		}
		return false
	}
	st, err := readProcStat(pid)
	switch {
	case err == nil && st.start != start:
		// The PID was given to another process: the group it led is gone
		// (its ID would still be taken otherwise).
		log.Info("upstream pid file of an earlier run names a recycled pid; nothing to stop", "recorded_start", start, "start", st.start)
		return
	case err != nil && !errors.Is(err, errNoProc):
		log.Warn("cannot read the process of an upstream pid file; not stopping it", "error", err)
		return
	}
	if !live() {
		return
	}
	log.Warn("stopping an upstream process group an earlier run left running")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		syscall.Kill(-pid, sig) //nolint:errcheck // the group may be gone already
		if st, err := readProcStat(pid); err == nil && st.start == start {
			syscall.Kill(pid, sig) //nolint:errcheck // it may have left its group
		}
		for deadline := time.Now().Add(terminateWait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if !live() {
				return
			}
		}
	}
	log.Error("an upstream process group an earlier run left is still running after SIGKILL")
}
