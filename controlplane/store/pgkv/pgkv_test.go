package pgkv

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/internal/testing/pgtest"
)

func TestMigrationsAreNumberedFromOne(t *testing.T) {
	ms, err := loadMigrations(pgSchemaFS)
	if err != nil {
		t.Fatal(err)
	}
	if ms[len(ms)-1].version != SchemaVersion || len(ms) != SchemaVersion {
		t.Errorf("%d migrations, last %d, SchemaVersion %d", len(ms), ms[len(ms)-1].version, SchemaVersion)
	}
	bad := fstest.MapFS{"schema/0001_a.sql": {}, "schema/0003_b.sql": {}}
	if _, err := loadMigrations(bad); err == nil {
		t.Error("a gap in the migration numbers was accepted")
	}
}

// TestPostgresSchemaVersions: a fresh database is refused without
// migration and migrated with it; migrating twice is a no-op; a schema
// newer than the binary is refused with what to do.
func TestPostgresSchemaVersions(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	if _, err := Open(ctx, url, Options{}); !errors.Is(err, ErrSchemaOlder) || !strings.Contains(err.Error(), "latch store migrate") {
		t.Fatalf("open of an unmigrated database = %v, want ErrSchemaOlder naming latch store migrate", err)
	}
	from, to, err := Migrate(ctx, url, nil)
	if err != nil || from != 0 || to != SchemaVersion {
		t.Fatalf("Migrate = %d, %d, %v; want 0, %d", from, to, err, SchemaVersion)
	}
	from, to, err = Migrate(ctx, url, nil)
	if err != nil || from != SchemaVersion || to != SchemaVersion {
		t.Fatalf("second Migrate = %d, %d, %v", from, to, err)
	}
	kv, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if kv.SynchronousCommit != "on" {
		t.Errorf("synchronous_commit = %q, want the server default on", kv.SynchronousCommit)
	}
	if err := kv.Commit([]backend.Write{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	kv.Close()

	// A newer latch migrated this database.
	kv = openPG(t, url)
	if _, err := kv.pool.Exec(ctx, "INSERT INTO latch_schema_version (version, name) VALUES ($1, 'from_the_future')", SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{{}, {Migrate: true}} {
		if _, err := Open(ctx, url, o); !errors.Is(err, ErrSchemaNewer) || !strings.Contains(err.Error(), "newer latch") {
			t.Errorf("open (migrate %v) of a newer schema = %v, want ErrSchemaNewer saying to run the newer latch", o.Migrate, err)
		}
	}
	if _, _, err := Migrate(ctx, url, nil); !errors.Is(err, ErrSchemaNewer) {
		t.Errorf("Migrate of a newer schema = %v, want ErrSchemaNewer", err)
	}
}

// TestConcurrentMigrationsApplyOnce: replicas starting together each
// migrate; the advisory lock makes every step apply once.
func TestConcurrentMigrationsApplyOnce(t *testing.T) {
	url := pgtest.URL(t)
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kv, err := Open(context.Background(), url, Options{Migrate: true})
			if err != nil {
				t.Error(err)
				return
			}
			kv.Close()
		}()
	}
	wg.Wait()
	kv := openPG(t, url)
	var n int
	if err := kv.pool.QueryRow(context.Background(), "SELECT count(*) FROM latch_schema_version").Scan(&n); err != nil || n != SchemaVersion {
		t.Errorf("schema version rows = %d, %v; want %d", n, err, SchemaVersion)
	}
}

func TestPostgresKeyValueConnectionString(t *testing.T) {
	s := pgtest.Shared(t)
	url := pgtest.URL(t)
	db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
	dsn := s.DSN(db)
	if !IsURL(dsn) || !IsURL(url) || IsURL("/var/lib/latch") || IsURL(".latch-dev") {
		t.Errorf("IsURL misclassifies %q / %q / a directory", dsn, url)
	}
	kv := openPG(t, dsn)
	if err := kv.Commit([]backend.Write{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	// The multi-host form reaches the one live host.
	multi := strings.Replace(dsn, "host=127.0.0.1 port=", "host=127.0.0.1,127.0.0.1 target_session_attrs=read-write port=1,", 1)
	kv2 := openPG(t, multi)
	if v, err := kv2.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Errorf("through %q: Get = %q, %v", multi, v, err)
	}
	if _, err := Open(context.Background(), "postgres://latch:s3cret@127.0.0.1:%zz/db", Options{}); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a malformed URL = %v: want an error that does not repeat the password", err)
	}
}

// TestPostgresLostCommitAnswer: after a COMMIT whose answer was lost, the
// marker tells a commit that happened from one that did not, and when it
// cannot be read every later commit is refused with ErrCommitUnknown.
func TestPostgresLostCommitAnswer(t *testing.T) {
	kv := openPG(t, pgtest.URL(t))
	if err := kv.Commit([]backend.Write{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	var token []byte
	if err := kv.pool.QueryRow(context.Background(), "SELECT token FROM latch_commit").Scan(&token); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("connection reset")
	if err := kv.resolve(token, cause); err != nil {
		t.Errorf("resolve(the committed token) = %v, want nil", err)
	}
	if err := kv.resolve([]byte("another"), cause); err == nil || errors.Is(err, backend.ErrCommitUnknown) || !errors.Is(err, cause) {
		t.Errorf("resolve(a token never committed) = %v, want a plain failure wrapping the cause", err)
	}
	if err := kv.Commit([]backend.Write{{Key: []byte("k2"), Value: []byte("v")}}); err != nil {
		t.Errorf("a definite answer must not stop later commits: %v", err)
	}

	// The database is unreachable while resolving.
	kv.opts.OpTimeout = 300 * time.Millisecond
	kv.pool.Close()
	if err := kv.resolve(token, cause); !errors.Is(err, backend.ErrCommitUnknown) || !strings.Contains(err.Error(), "restart") {
		t.Errorf("resolve without a database = %v, want ErrCommitUnknown saying to restart", err)
	}
	if err := kv.Commit([]backend.Write{{Key: []byte("k3"), Value: []byte("v")}}); !errors.Is(err, backend.ErrCommitUnknown) {
		t.Errorf("Commit after an unknown outcome = %v, want ErrCommitUnknown", err)
	}
}

// TestPostgresFenceWithoutCommitMarker: the fence does not depend on the
// commit-marker row. With the row deleted by hand, a stale active's commit
// is still fenced (nothing lands), and the holder's commit is refused with
// ErrCommitUnknown saying how to restore the row, as is every later one.
func TestPostgresFenceWithoutCommitMarker(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	a, b := openPG(t, url), openPG(t, url)
	if _, err := a.AcquireLease(ctx, "replica-a", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	// b believes it holds an epoch the database never gave it.
	b.epoch.Store(7)
	if _, err := a.pool.Exec(ctx, "DELETE FROM latch_commit"); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit([]backend.Write{{Key: []byte("k"), Value: []byte("stale")}}); !errors.Is(err, backend.ErrFenced) {
		t.Errorf("a stale epoch's commit without the marker row = %v, want ErrFenced", err)
	}
	if v, _ := a.Get([]byte("k")); v != nil {
		t.Errorf("k = %q after a fenced commit, want nothing", v)
	}
	err := a.Commit([]backend.Write{{Key: []byte("k"), Value: []byte("a1")}})
	if !errors.Is(err, backend.ErrCommitUnknown) || !strings.Contains(err.Error(), "INSERT INTO latch_commit") {
		t.Errorf("the holder's commit without the marker row = %v, want ErrCommitUnknown saying how to restore it", err)
	}
	if err := a.Commit([]backend.Write{{Key: []byte("k2"), Value: []byte("a2")}}); !errors.Is(err, backend.ErrCommitUnknown) {
		t.Errorf("a later commit = %v, want ErrCommitUnknown", err)
	}
}

// TestUnreachableCodes: server errors that say the database is going away
// or not taking connections count as "not committed, unreachable"; a
// constraint or syntax error does not.
func TestUnreachableCodes(t *testing.T) {
	for code, want := range map[string]bool{
		"57P01": true,  // admin_shutdown
		"57P02": true,  // crash_shutdown
		"57P03": true,  // cannot_connect_now
		"08006": true,  // connection_failure
		"23505": false, // unique_violation
		"42601": false, // syntax_error
		"40001": false, // serialization_failure
	} {
		if got := unreachable(&pgconn.PgError{Code: code}); got != want {
			t.Errorf("unreachable(SQLSTATE %s) = %v, want %v", code, got, want)
		}
	}
}
