package cputime

import (
	"os"
	"testing"
	"time"
)

// TestParse reads utime and stime after the command name, which may
// hold spaces and parentheses, and refuses lines that are not a stat line.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		line string
		want time.Duration
		ok   bool
	}{
		{"4242 (latch) S 1 4242 4242 0 -1 4194560 9000 0 0 0 250 130 0 0 20 0 12 0 100 0 0", 3800 * time.Millisecond, true},
		{"7 (a b) (c)) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 1 0 0", 30 * time.Millisecond, true},
		{"7 (latch) S 1 7", 0, false},
		{"no parenthesis here", 0, false},
		{"7 (latch) S 1 7 7 0 -1 0 0 0 0 0 x 2 0", 0, false},
	} {
		st, ok := Parse(tc.line)
		got := st.CPU
		if got != tc.want || ok != tc.ok {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

// TestProcessOfSelf: this process's CPU time read through /proc agrees with
// getrusage to within the /proc clock tick and a little work, so the two
// clocks of a --data run count alike.
func TestProcessOfSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this system")
	}
	x := 0
	for i := range 20_000_000 { // some CPU time to read
		x ^= i
	}
	_ = x
	before := Self()
	st, ok := Process(os.Getpid())
	after := Self()
	got := st.CPU
	if !ok {
		t.Fatal("Process of this process: not read")
	}
	if got > after || got < before-2*time.Second/userHZ {
		t.Errorf("Process = %v, getrusage between %v and %v", got, before, after)
	}
}
