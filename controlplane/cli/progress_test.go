package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/journal"
)

// TestProgressLine: quiet on short runs, then a line with records done,
// rate and ETA, at most once per interval.
func TestProgressLine(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	now := t0
	p := &progressLine{w: &out, now: func() time.Time { return now }, start: t0}
	p.update(journal.Progress{Stage: journal.StageRead, Done: 0, Total: 4_000_000})
	now = t0.Add(time.Second)
	p.update(journal.Progress{Stage: journal.StageRead, Done: 500_000, Total: 4_000_000})
	if out.Len() != 0 {
		t.Fatalf("progress printed within %v of the start: %q", progressAfter, out.String())
	}
	now = t0.Add(4 * time.Second)
	p.update(journal.Progress{Stage: journal.StageRead, Done: 1_000_000, Total: 4_000_000})
	want := "audit verify: reading the journal: 1000000 of 4000000 records (25%), 250.0k records/s, ETA 12s\n"
	if out.String() != want {
		t.Errorf("progress line = %q, want %q", out.String(), want)
	}
	now = now.Add(progressEvery / 2)
	p.update(journal.Progress{Stage: journal.StageRead, Done: 1_100_000, Total: 4_000_000})
	if strings.Count(out.String(), "\n") != 1 {
		t.Errorf("a second line within %v: %q", progressEvery, out.String())
	}
	// A new stage measures its own rate, from its first report.
	now = now.Add(2 * time.Second)
	p.update(journal.Progress{Stage: journal.StageVerify, Done: 0, Total: 4_000_000})
	now = now.Add(2 * time.Second)
	p.update(journal.Progress{Stage: journal.StageVerify, Done: 2_000_000, Total: 4_000_000})
	if !strings.HasSuffix(out.String(), "audit verify: hashing records: 2000000 of 4000000 records (50%), 1.0M records/s, ETA 2s\n") {
		t.Errorf("second stage line: %q", out.String())
	}
}
