package cli

import (
	"testing"
	"time"
)

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{in: "24h", want: now.Add(-24 * time.Hour)},
		{in: "90m", want: now.Add(-90 * time.Minute)},
		{in: "2026-12-01T09:00:00Z", want: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)},
		{in: "0s", wantErr: true},
		{in: "-1h", wantErr: true},
		{in: "yesterday", wantErr: true},
	} {
		got, err := parseSince(tc.in, now)
		if (err != nil) != tc.wantErr || (!tc.wantErr && !got.Equal(tc.want)) {
			t.Errorf("parseSince(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestObserveReportUsage: bad arguments are usage errors (exit 2) that say
// what to give.
func TestObserveReportUsage(t *testing.T) {
	for _, args := range [][]string{
		{"observe", "report", "--since", "yesterday"},
		{"observe", "report", "extra"},
		{"observe", "summary"},
		{"observe", "report", "--pairs", "-1"},
	} {
		out, code := runCLI(t, args...)
		if code != ExitUsage || out == "" {
			t.Errorf("latch %q = exit %d, %q; want a usage error", args, code, out)
		}
	}
}
