package store

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/latchhq/latch/controlplane/store/pgtest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// kvScan collects a scan's keys (and checks each value is the key's).
func kvScan(t *testing.T, kv KV, prefix, start []byte, reverse bool, limit int) []string {
	t.Helper()
	var got []string
	err := kv.ScanFrom(prefix, start, reverse, func(k, v []byte) bool {
		if !bytes.Equal(v, append([]byte("v:"), k...)) {
			t.Errorf("value of %q = %q", k, v)
		}
		got = append(got, string(k))
		return limit <= 0 || len(got) < limit
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestKVContract holds every backend to the KV contract: bytewise key
// order (0x00 and 0xff bytes included), prefix bounds, ScanFrom both ways,
// early stop, deletes, a key written twice in one batch, empty values,
// copies, and nested reads inside a scan. The PostgreSQL backend reads 7
// rows or 40 bytes a page here, so every scan crosses pages, some ended by
// the row count and some by size.
func TestKVContract(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			kv := b.open(t, t.TempDir())
			t.Cleanup(func() { kv.Close() })
			keys := []string{"a", "p", "p\x00", "p\x00\x00", "p\x01", "p/1", "p/10", "p/2", "p\x7f", "p\x80", "p\xfe", "p\xff", "p\xff\xff", "pa", "q", "\xff", "\xff\xff\x00"}
			var ws []Write
			for _, k := range keys {
				ws = append(ws, Write{Key: []byte(k), Value: []byte("v:" + k)})
			}
			ws = append(ws, Write{Key: []byte("gone"), Value: []byte("x")}, Write{Key: []byte("twice"), Value: []byte("first")})
			if err := kv.Commit(ws); err != nil {
				t.Fatal(err)
			}
			if err := kv.Commit([]Write{{Key: []byte("gone"), Delete: true}, {Key: []byte("twice"), Value: []byte("second")}, {Key: []byte("twice"), Value: []byte("v:twice")}, {Key: []byte("empty")}}); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, "twice")
			sort.Strings(keys)

			if _, err := kv.Get([]byte("gone")); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(deleted) = %v, want ErrNotFound", err)
			}
			if v, err := kv.Get([]byte("twice")); err != nil || string(v) != "v:twice" {
				t.Errorf("Get(twice) = %q, %v: want the batch's last write", v, err)
			}
			if v, err := kv.Get([]byte("empty")); err != nil || len(v) != 0 {
				t.Errorf("Get(empty) = %q, %v", v, err)
			}
			v, _ := kv.Get([]byte("a"))
			v[0] = 'X'
			if again, _ := kv.Get([]byte("a")); string(again) != "v:a" {
				t.Errorf("Get returned the stored bytes, not a copy: %q", again)
			}

			withP := func(ks []string) []string {
				var out []string
				for _, k := range ks {
					if strings.HasPrefix(k, "p") {
						out = append(out, k)
					}
				}
				return out
			}
			rev := func(ks []string) []string {
				out := append([]string(nil), ks...)
				for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
					out[i], out[j] = out[j], out[i]
				}
				return out
			}
			pkeys := withP(keys)
			from := func(ks []string, start string, reverse bool) []string {
				var out []string
				for _, k := range ks {
					if (!reverse && k >= start) || (reverse && k <= start) {
						out = append(out, k)
					}
				}
				if reverse {
					return rev(out)
				}
				return out
			}
			var all []string
			for _, k := range keys {
				all = append(all, k)
			}
			all = append(all, "empty")
			sort.Strings(all)
			tests := []struct {
				name    string
				prefix  string
				start   *string
				reverse bool
				limit   int
				want    []string
			}{
				{"prefix ascending", "p", nil, false, 0, pkeys},
				{"prefix descending", "p", nil, true, 0, rev(pkeys)},
				{"from ascending", "p", ptr("p/2"), false, 0, from(pkeys, "p/2", false)},
				{"from descending", "p", ptr("p/2"), true, 0, from(pkeys, "p/2", true)},
				{"from a missing key descending", "p", ptr("p/15"), true, 0, from(pkeys, "p/15", true)},
				{"from the last key descending", "p", ptr("p\xff\xff"), true, 0, rev(pkeys)},
				{"early stop", "p", nil, false, 3, pkeys[:3]},
				{"early stop descending", "p", nil, true, 9, rev(pkeys)[:9]},
				{"0xff prefix", "\xff", nil, false, 0, []string{"\xff", "\xff\xff\x00"}},
				{"0xff prefix descending", "\xff", nil, true, 0, []string{"\xff\xff\x00", "\xff"}},
				{"no such prefix", "zz", nil, false, 0, nil},
			}
			for _, tc := range tests {
				var start []byte
				if tc.start != nil {
					start = []byte(*tc.start)
				}
				got := kvScan(t, kv, []byte(tc.prefix), start, tc.reverse, tc.limit)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s: (-want +got)\n%s", tc.name, diff)
				}
			}
			var everything []string
			if err := kv.Scan(nil, false, func(k, _ []byte) bool { everything = append(everything, string(k)); return true }); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(all, everything); diff != "" {
				t.Errorf("empty prefix: (-want +got)\n%s", diff)
			}

			// A read nested in a scan's callback, many scans at once: a
			// backend must not hold what the nested read needs.
			var wg sync.WaitGroup
			for range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := kv.Scan([]byte("p"), false, func(k, _ []byte) bool {
						if _, err := kv.Get(k); err != nil {
							t.Errorf("nested Get(%q): %v", k, err)
						}
						return true
					})
					if err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
		})
	}
}

func ptr(s string) *string { return &s }

func TestMigrationsAreNumberedFromOne(t *testing.T) {
	ms, err := loadMigrations(pgSchemaFS)
	if err != nil {
		t.Fatal(err)
	}
	if ms[len(ms)-1].version != SchemaVersion || len(ms) != SchemaVersion {
		t.Errorf("%d migrations, last %d, SchemaVersion %d", len(ms), ms[len(ms)-1].version, SchemaVersion)
	}
	bad := fstest.MapFS{"pgschema/0001_a.sql": {}, "pgschema/0003_b.sql": {}}
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
	if _, err := OpenPostgres(ctx, url, PostgresOptions{}); !errors.Is(err, ErrSchemaOlder) || !strings.Contains(err.Error(), "latch store migrate") {
		t.Fatalf("open of an unmigrated database = %v, want ErrSchemaOlder naming latch store migrate", err)
	}
	from, to, err := MigratePostgres(ctx, url, nil)
	if err != nil || from != 0 || to != SchemaVersion {
		t.Fatalf("MigratePostgres = %d, %d, %v; want 0, %d", from, to, err, SchemaVersion)
	}
	from, to, err = MigratePostgres(ctx, url, nil)
	if err != nil || from != SchemaVersion || to != SchemaVersion {
		t.Fatalf("second MigratePostgres = %d, %d, %v", from, to, err)
	}
	kv, err := OpenPostgres(ctx, url, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if kv.SynchronousCommit != "on" {
		t.Errorf("synchronous_commit = %q, want the server default on", kv.SynchronousCommit)
	}
	if err := kv.Commit([]Write{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	kv.Close()

	// A newer latch migrated this database.
	kv = openPG(t, url)
	if _, err := kv.pool.Exec(ctx, "INSERT INTO latch_schema_version (version, name) VALUES ($1, 'from_the_future')", SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	for _, o := range []PostgresOptions{{}, {Migrate: true}} {
		if _, err := OpenPostgres(ctx, url, o); !errors.Is(err, ErrSchemaNewer) || !strings.Contains(err.Error(), "newer latch") {
			t.Errorf("open (migrate %v) of a newer schema = %v, want ErrSchemaNewer saying to run the newer latch", o.Migrate, err)
		}
	}
	if _, _, err := MigratePostgres(ctx, url, nil); !errors.Is(err, ErrSchemaNewer) {
		t.Errorf("MigratePostgres of a newer schema = %v, want ErrSchemaNewer", err)
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
			kv, err := OpenPostgres(context.Background(), url, PostgresOptions{Migrate: true})
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
	if !IsPostgresURL(dsn) || !IsPostgresURL(url) || IsPostgresURL("/var/lib/latch") || IsPostgresURL(".latch-dev") {
		t.Errorf("IsPostgresURL misclassifies %q / %q / a directory", dsn, url)
	}
	kv := openPG(t, dsn)
	if err := kv.Commit([]Write{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	// The multi-host form reaches the one live host.
	multi := strings.Replace(dsn, "host=127.0.0.1 port=", "host=127.0.0.1,127.0.0.1 target_session_attrs=read-write port=1,", 1)
	kv2 := openPG(t, multi)
	if v, err := kv2.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Errorf("through %q: Get = %q, %v", multi, v, err)
	}
	if _, err := OpenPostgres(context.Background(), "postgres://latch:s3cret@127.0.0.1:%zz/db", PostgresOptions{}); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a malformed URL = %v: want an error that does not repeat the password", err)
	}
}

// TestPostgresLostCommitAnswer: after a COMMIT whose answer was lost, the
// marker tells a commit that happened from one that did not, and when it
// cannot be read every later commit is refused with ErrCommitUnknown.
func TestPostgresLostCommitAnswer(t *testing.T) {
	kv := openPG(t, pgtest.URL(t))
	if err := kv.Commit([]Write{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
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
	if err := kv.resolve([]byte("another"), cause); err == nil || errors.Is(err, ErrCommitUnknown) || !errors.Is(err, cause) {
		t.Errorf("resolve(a token never committed) = %v, want a plain failure wrapping the cause", err)
	}
	if err := kv.Commit([]Write{{Key: []byte("k2"), Value: []byte("v")}}); err != nil {
		t.Errorf("a definite answer must not stop later commits: %v", err)
	}

	// The database is unreachable while resolving.
	kv.opts.OpTimeout = 300 * time.Millisecond
	kv.pool.Close()
	if err := kv.resolve(token, cause); !errors.Is(err, ErrCommitUnknown) || !strings.Contains(err.Error(), "restart") {
		t.Errorf("resolve without a database = %v, want ErrCommitUnknown saying to restart", err)
	}
	if err := kv.Commit([]Write{{Key: []byte("k3"), Value: []byte("v")}}); !errors.Is(err, ErrCommitUnknown) {
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
	if err := b.Commit([]Write{{Key: []byte("k"), Value: []byte("stale")}}); !errors.Is(err, ErrFenced) {
		t.Errorf("a stale epoch's commit without the marker row = %v, want ErrFenced", err)
	}
	if v, _ := a.Get([]byte("k")); v != nil {
		t.Errorf("k = %q after a fenced commit, want nothing", v)
	}
	err := a.Commit([]Write{{Key: []byte("k"), Value: []byte("a1")}})
	if !errors.Is(err, ErrCommitUnknown) || !strings.Contains(err.Error(), "INSERT INTO latch_commit") {
		t.Errorf("the holder's commit without the marker row = %v, want ErrCommitUnknown saying how to restore it", err)
	}
	if err := a.Commit([]Write{{Key: []byte("k2"), Value: []byte("a2")}}); !errors.Is(err, ErrCommitUnknown) {
		t.Errorf("a later commit = %v, want ErrCommitUnknown", err)
	}
}

// TestPostgresLeaseFencesAStaleActive: one replica holds the lease; another
// cannot take it until it expires; once taken, the old holder's commits and
// renewals fail with ErrFenced (through the Store too) and nothing it wrote
// after the takeover is in the database.
func TestPostgresLeaseFencesAStaleActive(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	a, b := openPG(t, url), openPG(t, url)
	la, err := a.AcquireLease(ctx, "replica-a", "10.0.0.1:7400", 300*time.Millisecond)
	if err != nil || la.Epoch != 1 {
		t.Fatalf("first AcquireLease = %+v, %v; want epoch 1", la, err)
	}
	if err := a.Commit([]Write{{Key: []byte("k"), Value: []byte("a1")}}); err != nil {
		t.Fatalf("the holder's commit: %v", err)
	}
	if _, err := b.AcquireLease(ctx, "replica-b", "10.0.0.2:7400", time.Second); !errors.Is(err, ErrLeaseHeld) || !strings.Contains(err.Error(), "replica-a") {
		t.Fatalf("AcquireLease while held = %v, want ErrLeaseHeld naming replica-a", err)
	}
	if _, err := a.RenewLease(ctx, "replica-a", 300*time.Millisecond); err != nil {
		t.Fatalf("RenewLease by the holder: %v", err)
	}
	var lb *Lease
	for deadline := time.Now().Add(10 * time.Second); ; {
		lb, err = b.AcquireLease(ctx, "replica-b", "10.0.0.2:7400", 10*time.Second)
		if err == nil || !errors.Is(err, ErrLeaseHeld) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || lb.Epoch != 2 {
		t.Fatalf("AcquireLease after expiry = %+v, %v; want epoch 2", lb, err)
	}
	if cur, err := a.ReadLease(ctx); err != nil || cur.Holder != "replica-b" || cur.Address != "10.0.0.2:7400" || cur.Remaining() <= 0 {
		t.Errorf("ReadLease after the takeover = %+v, %v; want replica-b at 10.0.0.2:7400 with time left", cur, err)
	}
	if err := a.Commit([]Write{{Key: []byte("k"), Value: []byte("stale")}}); !errors.Is(err, ErrFenced) {
		t.Errorf("the stale active's commit = %v, want ErrFenced", err)
	}
	if _, err := a.RenewLease(ctx, "replica-a", time.Second); !errors.Is(err, ErrFenced) {
		t.Errorf("the stale active's renewal = %v, want ErrFenced", err)
	}
	s := newStore(t, a)
	err = s.Update(ctx, func(tx *Tx) error {
		_, err := tx.PutResult("r", &recordv1.Result{Status: 200})
		return err
	})
	if !errors.Is(err, ErrFenced) {
		t.Errorf("Store.Update on the stale active = %v, want ErrFenced", err)
	}
	if err := b.Commit([]Write{{Key: []byte("k"), Value: []byte("b1")}}); err != nil {
		t.Fatalf("the new holder's commit: %v", err)
	}
	if v, _ := b.Get([]byte("k")); string(v) != "b1" {
		t.Errorf("k = %q, want the new holder's b1", v)
	}
	st, err := b.Status(ctx)
	if err != nil || st.Lease.Holder != "replica-b" || st.Lease.Epoch != 2 || st.SchemaVersion != SchemaVersion {
		t.Errorf("Status = %+v, %v", st, err)
	}
	if err := b.ReleaseLease(ctx, "replica-b"); err != nil {
		t.Fatal(err)
	}
	if l, err := a.AcquireLease(ctx, "replica-a", "10.0.0.1:7400", time.Second); err != nil || l.Epoch != 3 {
		t.Errorf("AcquireLease after a release = %+v, %v; want epoch 3 at once", l, err)
	}
}

func TestOpenKVRefusesAStoreThatIsNoConnectionString(t *testing.T) {
	_, err := OpenKV(context.Background(), "/var/lib/latch/db", t.TempDir(), nil)
	if !errors.Is(err, ErrStoreSpec) || !strings.Contains(err.Error(), "leave --store out") {
		t.Errorf("OpenKV(a directory) = %v, want ErrStoreSpec saying what to do", err)
	}
	kv, err := OpenKV(context.Background(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	if _, ok := kv.(*BadgerKV); !ok {
		t.Errorf("OpenKV(\"\") = %T, want Badger", kv)
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
