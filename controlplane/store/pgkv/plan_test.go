package pgkv

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchhq/latch/internal/testing/pgtest"
)

// TestPlanListsWhatMigrateApplies: on a fresh database, on one an older
// latch left at schema 3 and on a current one, Plan lists exactly the
// steps Migrate then applies, and writes nothing itself.
func TestPlanListsWhatMigrateApplies(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	all := Steps()
	if len(all) != SchemaVersion || all[0].Name != "0001_kv" || all[0].Summary == "" {
		t.Fatalf("Steps() = %+v, want %d steps from 0001_kv, each with a summary", all, SchemaVersion)
	}
	for _, st := range all {
		if st.Summary == "" || st.Summary[0] == '-' {
			t.Errorf("step %s summary %q, want its first comment line", st.Name, st.Summary)
		}
	}

	plan := func(wantFrom int, want []Step) {
		t.Helper()
		for range 2 { // a second Plan sees the same: the first wrote nothing
			from, steps, err := Plan(ctx, url)
			if err != nil || from != wantFrom {
				t.Fatalf("Plan = %d, %v; want %d", from, err, wantFrom)
			}
			if diff := cmp.Diff(want, steps); diff != "" {
				t.Fatalf("Plan steps (-want +got):\n%s", diff)
			}
		}
	}
	plan(0, all)

	// As an older latch left it: schema 3.
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if v, err := migrateTo(ctx, pool, hclog.NewNullLogger(), 3); err != nil || v != 3 {
		t.Fatalf("migrateTo(3) = %d, %v", v, err)
	}
	plan(3, all[3:])
	if from, to, err := Migrate(ctx, url, nil); err != nil || from != 3 || to != SchemaVersion {
		t.Fatalf("Migrate = %d, %d, %v; want 3, %d", from, to, err, SchemaVersion)
	}
	plan(SchemaVersion, nil)

	if _, err := pool.Exec(ctx, "INSERT INTO latch_schema_version (version, name) VALUES ($1, 'from_the_future')", SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Plan(ctx, url); !errors.Is(err, ErrSchemaNewer) {
		t.Errorf("Plan of a newer schema = %v, want ErrSchemaNewer", err)
	}
}
