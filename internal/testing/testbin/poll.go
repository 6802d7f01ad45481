package testbin

import (
	"bufio"
	"errors"
	"os"
	"testing"
	"time"
)

// Eventually polls cond every 20ms for at most 30s (a bounded wait: a hang
// is the bug, not slowness) and fails tb naming what it waited for.
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for range 1500 {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("timed out waiting for %s", what)
}

// ReadLines returns the lines of the file at path; none when it does not
// exist (the command that writes it has not run).
func ReadLines(tb testing.TB, path string) []string {
	tb.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
