package tools

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/bad/*.want from the current output")

// TestParseRefusesBadCatalogs runs every testdata/bad/X.yaml through Parse
// and compares the problems, one "file:line: msg" per line, with X.want.
func TestParseRefusesBadCatalogs(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cat, err := Parse(file, data)
			if cat != nil {
				t.Fatalf("Parse(%q) returned a catalog, want it refused", file)
			}
			var le *LoadError
			if !errors.As(err, &le) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q) error = %v (%T), want *LoadError matching ErrInvalid", file, err, err)
			}
			got := err.Error() + "\n"
			wantFile := strings.TrimSuffix(file, ".yaml") + ".want"
			if *update {
				if err := os.WriteFile(wantFile, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("Parse(%q) problems (-want +got):\n%s", file, diff)
			}
			for _, p := range le.Problems {
				if p.File != file || p.Msg == "" {
					t.Errorf("problem %+v: want File %q and a message", p, file)
				}
			}
		})
	}
}

func TestToolEventsOptIn(t *testing.T) {
	const base = `
targets:
  api: {channel: http, base_url: "https://api.example.com", idempotency_header: Idempotency-Key}
tools:
  notify:
    target: api
    request: {method: POST, path: /n}
    replay: idempotency_key
`
	cat, err := Parse("c.yaml", []byte(base+"    events: [completed]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cat.Tools["notify"].NotifyCompleted {
		t.Errorf("events: [completed] did not set NotifyCompleted")
	}
	_, err = Parse("c.yaml", []byte(base+"    events: [needs_review]\n"))
	if err == nil || !strings.Contains(err.Error(), `"needs_review" cannot be opted in per tool`) {
		t.Errorf("events: [needs_review] = %v, want a refusal naming it", err)
	}
}
