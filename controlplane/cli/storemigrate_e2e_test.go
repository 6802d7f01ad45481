package cli

import (
	"strings"
	"testing"

	"github.com/latchhq/latch/controlplane/store/pgkv"
	"github.com/latchhq/latch/internal/testing/pgtest"
)

// TestStoreMigrateDryRun: `latch store migrate --dry-run` lists every step
// of a fresh database in order and applies none (the migrate after it
// still starts from 0), then says the schema is current.
func TestStoreMigrateDryRun(t *testing.T) {
	url := pgtest.URL(t)
	out, code := runCLI(t, "store", "migrate", "--store", url, "--dry-run")
	if code != ExitOK || !strings.Contains(out, "schema version 0, this latch") {
		t.Fatalf("latch store migrate --dry-run = %d:\n%s", code, out)
	}
	last := -1
	for _, st := range pgkv.Steps() {
		i := strings.Index(out, st.Name+" ")
		if i < 0 || i < last {
			t.Errorf("the dry run does not list %s after the step before it:\n%s", st.Name, out)
		}
		last = i
	}
	out, code = runCLI(t, "store", "migrate", "--store", url, "--dry-run", "--json")
	var plan storePlanJSON
	if err := decodeStrict(out, &plan); code != ExitOK || err != nil || plan.SchemaVersion != 0 || len(plan.Steps) != pgkv.SchemaVersion {
		t.Errorf("--dry-run --json = %d, %v:\n%s", code, err, out)
	}
	if _, code := runCLI(t, "store", "migrate", "--store", url, "--json"); code != ExitUsage {
		t.Errorf("migrate --json without --dry-run = %d, want %d", code, ExitUsage)
	}
	if out, code := runCLI(t, "store", "migrate", "--store", url); code != ExitOK || !strings.Contains(out, "migrated schema 0 -> ") {
		t.Fatalf("latch store migrate after the dry run = %d (the dry run must apply nothing):\n%s", code, out)
	}
	if out, code := runCLI(t, "store", "migrate", "--store", url, "--dry-run"); code != ExitOK || !strings.Contains(out, "nothing to apply") {
		t.Errorf("dry run of a current schema = %d:\n%s", code, out)
	}
}
