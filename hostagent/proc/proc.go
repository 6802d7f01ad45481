// Package proc identifies processes on Linux by pid, start time and boot id,
// so that a recorded pid is never mistaken for a later process that reused it.
//
// A process identity is (pid, start_ticks, boot_id): start_ticks is field 22
// of /proc/<pid>/stat (clock ticks since boot), parsed after the last ')' so
// that a command name containing spaces or parentheses cannot shift the
// fields; boot_id is /proc/sys/kernel/random/boot_id. Only hostagent packages
// import proc.
package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

var (
	// ErrGone means no process with that pid exists.
	ErrGone = errors.New("proc: process is gone")
	// ErrMalformed means /proc/<pid>/stat could not be parsed.
	ErrMalformed = errors.New("proc: malformed stat line")
)

// Identity names one process instance on one boot.
type Identity struct {
	PID        int
	StartTicks uint64
	BootID     string
}

// BootID returns the current boot id.
func BootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("proc: read boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Stat is the part of /proc/<pid>/stat the agent uses.
type Stat struct {
	State      byte
	StartTicks uint64
}

// ParseStat parses the content of /proc/<pid>/stat.
func ParseStat(line string) (Stat, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 || i+2 > len(line) {
		return Stat{}, fmt.Errorf("%w: no command terminator", ErrMalformed)
	}
	// After ") " come fields 3 (state) onward; start time is field 22.
	fields := strings.Fields(line[i+1:])
	const startField = 22 - 3
	if len(fields) <= startField {
		return Stat{}, fmt.Errorf("%w: %d fields after command, want more than %d", ErrMalformed, len(fields), startField)
	}
	if len(fields[0]) != 1 {
		return Stat{}, fmt.Errorf("%w: state %q", ErrMalformed, fields[0])
	}
	ticks, err := strconv.ParseUint(fields[startField], 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("%w: start time %q", ErrMalformed, fields[startField])
	}
	return Stat{State: fields[0][0], StartTicks: ticks}, nil
}

// ReadStat reads /proc/<pid>/stat. A missing process gives ErrGone.
func ReadStat(pid int) (Stat, error) {
	if pid <= 0 {
		return Stat{}, fmt.Errorf("%w: pid %d", ErrGone, pid)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, errESRCH) {
			return Stat{}, fmt.Errorf("%w: pid %d", ErrGone, pid)
		}
		return Stat{}, fmt.Errorf("proc: read stat of pid %d: %w", pid, err)
	}
	return ParseStat(string(b))
}

// Self returns the identity of the calling process.
func Self() (Identity, error) { return Of(os.Getpid()) }

// Of returns the identity of the live process pid.
func Of(pid int) (Identity, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return Identity{}, err
	}
	boot, err := BootID()
	if err != nil {
		return Identity{}, err
	}
	return Identity{PID: pid, StartTicks: st.StartTicks, BootID: boot}, nil
}

// Alive reports whether the process named by id still exists on this boot.
// A zombie counts as alive: its parent has not collected its status yet.
func Alive(id Identity) (bool, error) {
	if id.PID <= 0 {
		return false, nil
	}
	boot, err := BootID()
	if err != nil {
		return false, err
	}
	if boot != id.BootID {
		return false, nil
	}
	st, err := ReadStat(id.PID)
	if errors.Is(err, ErrGone) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return st.StartTicks == id.StartTicks, nil
}
