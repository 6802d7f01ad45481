package pgkv

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/internal/backoff"
)

// PostgreSQL backend errors.
var (
	// ErrSchemaNewer is returned by Open when the database was
	// migrated by a newer latch than this one.
	ErrSchemaNewer = errors.New("store: the database schema is newer than this latch")
	// ErrSchemaOlder is returned by Open (without Migrate) when
	// the database needs `latch store migrate`.
	ErrSchemaOlder = errors.New("store: the database schema is older than this latch")
)

//go:embed schema/*.sql
var pgSchemaFS embed.FS

// migration is one embedded schema step.
type migration struct {
	version int
	name    string
	sql     string
}

// pgMigrations are the embedded migrations in version order. Their file
// names are NNNN_name.sql, numbered from 1 without gaps (checked by a test
// and at start).
var pgMigrations = mustLoadMigrations(pgSchemaFS)

// SchemaVersion is the PostgreSQL schema this latch reads and writes.
var SchemaVersion = pgMigrations[len(pgMigrations)-1].version

func mustLoadMigrations(fsys fs.FS) []migration {
	ms, err := loadMigrations(fsys)
	if err != nil {
		panic(err) // the embedded files are part of the binary: a test covers them
	}
	return ms
}

func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "schema/*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var ms []migration
	for i, n := range names {
		base := strings.TrimPrefix(n, "schema/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v != i+1 {
			return nil, fmt.Errorf("store: migration %s: want the name %04d_<what>.sql", n, i+1)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(b)})
	}
	if len(ms) == 0 {
		return nil, errors.New("store: no PostgreSQL migrations embedded")
	}
	return ms, nil
}

// migrationLock is the advisory lock key migrations hold ("latchmig").
const migrationLock = 0x6c617463686d6967

// Options tune the PostgreSQL backend.
type Options struct {
	Logger hclog.Logger
	// Migrate applies the embedded migrations the database lacks before
	// use. Without it an older schema is refused with ErrSchemaOlder.
	Migrate bool
	// OpTimeout bounds each statement round (a read, a scan page, a
	// commit); default 30s. A commit that times out after COMMIT was sent
	// is resolved by reading the commit marker back.
	OpTimeout time.Duration
	// PageSize is how many rows one scan query reads; default 512. A scan
	// holds one page in memory and no connection while its callback runs.
	PageSize int
	// PageBytes ends a scan page early once its rows hold this many bytes
	// (default 8 MiB), so a scan of large results stays bounded; the rest
	// of that query's rows are discarded and read by the next page.
	PageBytes int
}

// KV is the KV on PostgreSQL: one table of (key bytea primary key,
// value bytea), ordered bytewise. Each Commit is one transaction, so a
// group of the store's updates costs one WAL flush, and it waits for
// whatever synchronous_commit the server or role sets (never lowered here).
//
// A scan reads page by page (LIMIT over the primary key, resuming after the
// last key), so it is not one snapshot across pages: a key committed during
// a long scan may or may not be seen. The store reads consistent state only
// from its single writer or offline, and its live checks re-read anything
// they find disagreeing.
type KV struct {
	pool *pgxpool.Pool
	log  hclog.Logger
	opts Options

	closed atomic.Bool
	gets   getBatcher // get.go
	// epoch, once a lease is acquired, fences every commit.
	epoch atomic.Int64
	// broken holds the error every commit returns after an unknown outcome.
	brokenMu sync.Mutex
	broken   error

	// SynchronousCommit is the server's synchronous_commit for this role
	// at open ("on", "remote_apply", "off", ...).
	SynchronousCommit string
}

var (
	_ backend.Leaser       = (*KV)(nil)
	_ backend.KeyRows      = (*KV)(nil)
	_ backend.ReplicaTable = (*KV)(nil)
)

// IsURL reports whether s names a PostgreSQL database (a
// postgres:// or postgresql:// URL, or a libpq key/value string such as
// "host=a,b dbname=latch") rather than a directory.
func IsURL(s string) bool {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		return true
	}
	for _, f := range strings.Fields(s) {
		k, _, ok := strings.Cut(f, "=")
		if ok && slices.Contains([]string{"host", "hostaddr", "dbname", "user", "port", "service"}, k) {
			return true
		}
	}
	return false
}

func poolConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message may quote the string, which can hold a password.
		return nil, fmt.Errorf("store: the --store connection string does not parse (%s): use postgres://user@host:5432/db?sslmode=... or key=value pairs such as \"host=a,b dbname=latch target_session_attrs=read-write\"", redactParseError(err))
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = 16
	}
	return cfg, nil
}

// redactParseError keeps pgx's parse error message without the string it
// was given (which may carry a password).
func redactParseError(err error) string {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if pe.Unwrap() != nil {
			return pe.Unwrap().Error()
		}
		return "malformed"
	}
	return "malformed"
}

// Open connects to the database at url (a libpq URL or key/value
// string; several hosts with target_session_attrs=read-write reach the
// primary of a replicated cluster), checks its schema version, applies
// missing migrations when o.Migrate is set, and returns the backend.
func Open(ctx context.Context, url string, o Options) (*KV, error) {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = 30 * time.Second
	}
	if o.PageSize <= 0 {
		o.PageSize = 512
	}
	if o.PageBytes <= 0 {
		o.PageBytes = 8 << 20
	}
	cfg, err := poolConfig(url)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect to PostgreSQL: %w", err)
	}
	k := &KV{pool: pool, log: o.Logger, opts: o}
	if err := k.open(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return k, nil
}

func (k *KV) open(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, k.opts.OpTimeout)
	defer cancel()
	if err := k.pool.Ping(ctx); err != nil {
		return fmt.Errorf("store: connect to PostgreSQL %s: %w (is the server up and the URL's host, port, user and password right?)", hostsOf(k.pool.Config().ConnConfig), err)
	}
	v, err := schemaVersion(ctx, k.pool)
	if err != nil {
		return err
	}
	switch {
	case v > SchemaVersion:
		return fmt.Errorf("%w: the database is at schema %d, this latch knows up to %d: run the newer latch that migrated it (or a later one); never point an older latch at a newer schema", ErrSchemaNewer, v, SchemaVersion)
	case v < SchemaVersion && !k.opts.Migrate:
		return fmt.Errorf("%w: the database is at schema %d, this latch needs %d: run `latch store migrate --store URL` first", ErrSchemaOlder, v, SchemaVersion)
	case v < SchemaVersion:
		if _, err := migrate(ctx, k.pool, k.log); err != nil {
			return err
		}
	}
	if err := k.pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&k.SynchronousCommit); err != nil {
		return fmt.Errorf("store: read synchronous_commit: %w", err)
	}
	if k.SynchronousCommit == "off" {
		k.log.Warn("PostgreSQL synchronous_commit is off: a commit latch acknowledged can be lost if the database crashes; set it to on (or remote_apply with a synchronous standby)")
	}
	return nil
}

func hostsOf(c *pgx.ConnConfig) string {
	hosts := []string{fmt.Sprintf("%s:%d", c.Host, c.Port)}
	for _, f := range c.Fallbacks {
		hosts = append(hosts, fmt.Sprintf("%s:%d", f.Host, f.Port))
	}
	return strings.Join(hosts, ",")
}

// schemaVersion reads the applied schema version (0 for a database latch
// never migrated).
func schemaVersion(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var exists bool
	if err := q.QueryRow(ctx, "SELECT to_regclass('latch_schema_version') IS NOT NULL").Scan(&exists); err != nil {
		return 0, fmt.Errorf("store: read the schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := q.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM latch_schema_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("store: read the schema version: %w", err)
	}
	return v, nil
}

// Migrate applies the embedded migrations the database at url
// lacks, each in the same transaction as its version row, under an
// advisory lock so concurrent migrators apply each step once. It returns
// the versions before and after; it refuses a schema newer than this latch.
func Migrate(ctx context.Context, url string, log hclog.Logger) (from, to int, err error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	cfg, err := poolConfig(url)
	if err != nil {
		return 0, 0, err
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, 0, fmt.Errorf("store: connect to PostgreSQL: %w", err)
	}
	defer pool.Close()
	if from, err = schemaVersion(ctx, pool); err != nil {
		return 0, 0, err
	}
	to, err = migrate(ctx, pool, log)
	return from, to, err
}

// Step is one embedded schema migration, as `latch store migrate
// --dry-run` lists it.
type Step struct {
	Version int
	Name    string // the file name without .sql, e.g. 0004_secrets
	Summary string // the first line of the file's leading comment
}

// Steps are every embedded migration in version order.
func Steps() []Step {
	out := make([]Step, 0, len(pgMigrations))
	for _, m := range pgMigrations {
		out = append(out, Step{Version: m.version, Name: m.name, Summary: summary(m)})
	}
	return out
}

// summary is the first sentence of a migration's leading comment (its
// first paragraph of "--" lines), without the "Schema N:" prefix.
func summary(m migration) string {
	var words []string
	for line := range strings.Lines(m.sql) {
		line = strings.TrimSpace(line)
		text, ok := strings.CutPrefix(line, "--")
		text = strings.TrimSpace(text)
		if !ok || text == "" {
			break
		}
		words = append(words, text)
	}
	out := strings.Join(words, " ")
	if _, rest, ok := strings.Cut(out, ": "); ok && strings.HasPrefix(out, "Schema ") {
		out = rest
	}
	if i := strings.Index(out, ". "); i >= 0 {
		out = out[:i+1]
	}
	return out
}

// Plan reads the schema version of the database at url and returns it
// with the steps Migrate would apply, in order; it writes nothing (not
// even the version table). A schema newer than this latch is ErrSchemaNewer.
func Plan(ctx context.Context, url string) (from int, steps []Step, err error) {
	cfg, err := poolConfig(url)
	if err != nil {
		return 0, nil, err
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, nil, fmt.Errorf("store: connect to PostgreSQL: %w", err)
	}
	defer pool.Close()
	if from, err = schemaVersion(ctx, pool); err != nil {
		return 0, nil, fmt.Errorf("%w (is the server up and the URL's host, port, user and password right?)", err)
	}
	if from > SchemaVersion {
		return from, nil, fmt.Errorf("%w: the database is at schema %d, this latch knows up to %d: migrate with the newer latch", ErrSchemaNewer, from, SchemaVersion)
	}
	for _, st := range Steps() {
		if st.Version > from {
			steps = append(steps, st)
		}
	}
	return from, steps, nil
}

func migrate(ctx context.Context, pool *pgxpool.Pool, log hclog.Logger) (int, error) {
	return migrateTo(ctx, pool, log, SchemaVersion)
}

// migrateTo applies the migrations up to version to (tests use an older
// one to make a database as an older latch left it).
func migrateTo(ctx context.Context, pool *pgxpool.Pool, log hclog.Logger, to int) (int, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: migrate: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrationLock)); err != nil {
		return 0, fmt.Errorf("store: migrate: take the migration lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS latch_schema_version (
		version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, fmt.Errorf("store: migrate: create latch_schema_version (does the role have CREATE on the schema?): %w", err)
	}
	cur, err := schemaVersion(ctx, tx)
	if err != nil {
		return 0, err
	}
	if cur > SchemaVersion {
		return cur, fmt.Errorf("%w: the database is at schema %d, this latch knows up to %d: migrate with the newer latch", ErrSchemaNewer, cur, SchemaVersion)
	}
	for _, m := range pgMigrations {
		if m.version <= cur || m.version > to {
			continue
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return cur, fmt.Errorf("store: migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO latch_schema_version (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			return cur, fmt.Errorf("store: migration %s: record the version: %w", m.name, err)
		}
		log.Info("applied PostgreSQL migration", "version", m.version, "name", m.name)
	}
	if err := tx.Commit(ctx); err != nil {
		return cur, fmt.Errorf("store: migrate: commit: %w", err)
	}
	return max(cur, to), nil
}

func (k *KV) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), k.opts.OpTimeout)
}

func (k *KV) readErr(what string, err error) error {
	if k.closed.Load() {
		return backend.ErrClosed
	}
	return fmt.Errorf("store: PostgreSQL %s: %w", what, err)
}

func (k *KV) Scan(prefix []byte, reverse bool, fn func(key, value []byte) bool) error {
	return k.ScanFrom(prefix, nil, reverse, fn)
}

// prefixEnd is the smallest key greater than every key with the prefix, or
// nil when there is none (the prefix is empty or all 0xff).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// The page queries. The ranges are [lo, hi) over the primary key; an
// unbounded hi has its own statement so the planner never filters past the
// prefix.
const (
	qAscBounded   = "SELECT k, v FROM latch_kv WHERE k >= $1 AND k < $2 ORDER BY k LIMIT $3"
	qAscOpen      = "SELECT k, v FROM latch_kv WHERE k >= $1 ORDER BY k LIMIT $2"
	qDescBounded  = "SELECT k, v FROM latch_kv WHERE k >= $1 AND k < $2 ORDER BY k DESC LIMIT $3"
	qDescOpen     = "SELECT k, v FROM latch_kv WHERE k >= $1 ORDER BY k DESC LIMIT $2"
	resolveCommit = "SELECT token FROM latch_commit WHERE id = 1 FOR UPDATE"
	fenceCommit   = "SELECT latch_fence($1)"
)

// A commit is one statement: the deletions ($1), the upserts ($2 keys, $3
// values) and the commit token ($4) as data-modifying CTEs, which always
// run to completion, and for a lease holder the fence ($5) in the main
// SELECT, which has no FROM and so always runs: the fence never depends on
// a row being found. The SELECT answers how many commit-marker rows took
// the token (1, or the marker row is gone). One statement is one executor
// start, one snapshot and one row of statement statistics instead of four;
// any part's error (the fence's LF001, a constraint) fails the statement,
// and with it the transaction. The parts run under one snapshot and do not
// see one another's rows, which is safe because Commit gives them disjoint
// keys (the last write of each key wins before they are built).
const (
	commitParts = `WITH del AS (DELETE FROM latch_kv WHERE k = ANY($1::bytea[])),
	ups AS (INSERT INTO latch_kv (k, v) SELECT * FROM unnest($2::bytea[], $3::bytea[]) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v),
	tok AS (UPDATE latch_commit SET token = $4, at = now() WHERE id = 1 RETURNING 1)
	`
	commitWrites = commitParts + `SELECT (SELECT count(*) FROM tok)`
	commitFenced = commitParts + `SELECT (SELECT count(*) FROM tok), latch_fence($5)::text`
)

func (k *KV) ScanFrom(prefix, start []byte, reverse bool, fn func(key, value []byte) bool) error {
	if k.closed.Load() {
		return backend.ErrClosed
	}
	return scanPages(prefix, start, reverse, k.opts.PageSize, fn, func(lo, hi []byte, n int) ([][]byte, [][]byte, bool, error) {
		ctx, cancel := k.ctx()
		defer cancel()
		keys, vals, more, err := readPage(ctx, k.pool, lo, hi, reverse, n, k.opts.PageBytes)
		if err != nil {
			return nil, nil, false, k.readErr("scan", err)
		}
		return keys, vals, more, nil
	})
}

// scanPages runs a ScanFrom through page, which reads up to n rows of
// [lo, hi) (hi nil: unbounded) in the scan's direction and releases its
// connection before the callback runs (which may read again).
func scanPages(prefix, start []byte, reverse bool, n int, fn func(key, value []byte) bool,
	page func(lo, hi []byte, n int) (keys, vals [][]byte, more bool, err error)) error {
	end := prefixEnd(prefix)
	lo, hi := append([]byte{}, prefix...), end // never nil: NULL compares to nothing
	if start != nil {
		if !reverse {
			if bytes.Compare(start, lo) > 0 {
				lo = bytes.Clone(start)
			}
		} else {
			// keys <= start are the keys < start||0x00.
			h := append(bytes.Clone(start), 0)
			if hi == nil || bytes.Compare(h, hi) < 0 {
				hi = h
			}
		}
	}
	for {
		if hi != nil && bytes.Compare(lo, hi) >= 0 {
			return nil
		}
		keys, vals, more, err := page(lo, hi, n)
		if err != nil {
			return err
		}
		for i := range keys {
			if !fn(keys[i], vals[i]) {
				return nil
			}
		}
		if !more {
			return nil
		}
		last := keys[len(keys)-1]
		if reverse {
			hi = last
		} else {
			lo = append(bytes.Clone(last), 0) // the next key after last
		}
	}
}

// querier is what a page read needs: the pool, or one transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// readPage reads up to n rows of [lo, hi) (fewer past pageBytes). more
// reports that rows may follow.
func readPage(ctx context.Context, q querier, lo, hi []byte, reverse bool, n, pageBytes int) (keys, vals [][]byte, more bool, err error) {
	var rows pgx.Rows
	switch {
	case !reverse && hi != nil:
		rows, err = q.Query(ctx, qAscBounded, lo, hi, n)
	case !reverse:
		rows, err = q.Query(ctx, qAscOpen, lo, n)
	case hi != nil:
		rows, err = q.Query(ctx, qDescBounded, lo, hi, n)
	default:
		rows, err = q.Query(ctx, qDescOpen, lo, n)
	}
	if err != nil {
		return nil, nil, false, err
	}
	defer rows.Close()
	keys = make([][]byte, 0, min(n, 64))
	vals = make([][]byte, 0, min(n, 64))
	size := 0
	for rows.Next() {
		var kk, vv []byte
		if err := rows.Scan(&kk, &vv); err != nil {
			return nil, nil, false, err
		}
		keys, vals = append(keys, kk), append(vals, vv)
		if size += len(kk) + len(vv); size > pageBytes && len(keys) < n {
			return keys, vals, true, nil // Close discards the rest
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, false, err
	}
	return keys, vals, len(keys) == n, nil
}

// Commit applies the writes in one transaction. Repeated keys keep their
// last write. When the connection is lost after the statement was sent, the
// outcome is read back through the commit marker (waiting on its row lock,
// so an in-flight commit finishes first); if it cannot be read the backend
// refuses every later commit with ErrCommitUnknown.
func (k *KV) Commit(writes []backend.Write) error {
	if k.closed.Load() {
		return backend.ErrClosed
	}
	k.brokenMu.Lock()
	broken := k.broken
	k.brokenMu.Unlock()
	if broken != nil {
		return broken
	}
	last := make(map[string]int, len(writes))
	for i, w := range writes {
		last[string(w.Key)] = i
	}
	setK, setV, delK := make([][]byte, 0, len(writes)), make([][]byte, 0, len(writes)), [][]byte{}
	for i, w := range writes {
		if last[string(w.Key)] != i {
			continue
		}
		if w.Delete {
			delK = append(delK, w.Key)
			continue
		}
		v := w.Value
		if v == nil {
			v = []byte{} // the column is NOT NULL; nil is the empty value
		}
		setK, setV = append(setK, w.Key), append(setV, v)
	}
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return fmt.Errorf("store: commit token: %w", err)
	}
	ctx, cancel := k.ctx()
	defer cancel()
	// One round trip of one statement (Bind, Execute, Sync of a statement
	// prepared once per connection): PostgreSQL runs it as an implicit
	// transaction, committed (and flushed per synchronous_commit) before it
	// answers. (Reads hold at most maxGetsInFlight of the pool's
	// connections, so a commit does not queue behind them. A connection of
	// its own measured worse at c=1 on a loaded machine: a Get and a commit
	// then wake two backends per action instead of one.)
	var err error
	var marked int64
	if e := k.epoch.Load(); e != 0 {
		var fence string
		err = k.pool.QueryRow(ctx, commitFenced, delK, setK, setV, token, e).Scan(&marked, &fence)
	} else {
		err = k.pool.QueryRow(ctx, commitWrites, delK, setK, setV, token).Scan(&marked)
	}
	if err == nil && marked != 1 {
		// The writes committed (fenced), but without the token a lost
		// answer could not be resolved later: refuse further commits.
		return k.markBroken(fmt.Errorf("%w: the commit marker row (latch_commit id 1) is missing, so a commit whose answer is lost could not be resolved; the schema was changed by hand: restore the row (INSERT INTO latch_commit (id, token) VALUES (1, '\\x00')) and restart latch serve", backend.ErrCommitUnknown))
	}
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// The server answered with an error: the batch rolled back.
		if ferr := fencedErr(err); ferr != nil {
			return ferr
		}
		if unreachable(pe) {
			return fmt.Errorf("%w: PostgreSQL commit: %w", backend.ErrNotCommitted, err)
		}
		return fmt.Errorf("store: PostgreSQL commit: %w", err)
	}
	if k.closed.Load() {
		return backend.ErrClosed
	}
	if pgconn.SafeToRetry(err) {
		// Nothing reached the server (e.g. no connection could be made).
		return fmt.Errorf("%w: PostgreSQL commit (nothing was sent): %w", backend.ErrNotCommitted, err)
	}
	return k.resolve(token, err)
}

// unreachable reports whether a server error says the database is going
// away or not taking connections (SQLSTATE class 08, connection exception,
// and class 57, operator intervention: admin or crash shutdown, cannot
// connect now); the batch it answered was rolled back.
func unreachable(pe *pgconn.PgError) bool {
	return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57")
}

// resolveBackoff spaces the reads of the commit marker while the database
// is unreachable.
var resolveBackoff = backoff.Policy{Min: 100 * time.Millisecond, Max: time.Second}

// resolve learns whether the commit holding token happened.
func (k *KV) resolve(token []byte, cause error) error {
	ctx, cancel := k.ctx()
	defer cancel()
	var got []byte
	var err error
	for attempt := 0; ; attempt++ {
		err = pgx.BeginFunc(ctx, k.pool, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, resolveCommit).Scan(&got)
		})
		if err == nil || ctx.Err() != nil {
			break
		}
		resolveBackoff.Wait(ctx, attempt+1, nil)
	}
	switch {
	case err == nil && bytes.Equal(got, token):
		k.log.Warn("PostgreSQL commit answer was lost; the commit marker shows it committed", "cause", cause)
		return nil
	case err == nil:
		return fmt.Errorf("%w: PostgreSQL commit failed (the connection was lost before it committed): %w", backend.ErrNotCommitted, cause)
	}
	return k.markBroken(fmt.Errorf("%w: the connection was lost after COMMIT (%v) and reading the outcome failed (%v): restart latch serve, which reloads the committed state", backend.ErrCommitUnknown, cause, err)) //nolint:errorlint // only ErrCommitUnknown is the answer: the lost connection and the failed read are told, not wrapped (moved from store/postgres.go unchanged)
}

// markBroken makes every later commit fail with broken, and returns it.
func (k *KV) markBroken(broken error) error {
	k.brokenMu.Lock()
	k.broken = broken
	k.brokenMu.Unlock()
	k.log.Error("PostgreSQL commit outcome unknown; refusing further commits", "error", broken)
	return broken
}

func (k *KV) Close() error {
	if k.closed.Swap(true) {
		return nil
	}
	k.pool.Close() // waits for the connections in use to be released
	return nil
}

// Status is what `latch store status` reports.
type Status struct {
	SchemaVersion     int
	BinaryVersion     int
	SynchronousCommit string
	// JournalSize is the execution store's journal length: the caller
	// fills it (store.StoredJournalSize), the backend does not read the
	// store's keys.
	JournalSize int64
	LastCommit  time.Time
	// Keys is the planner's estimate of the rows in latch_kv.
	Keys int64
	// Lease is the active replica's lease (Epoch 0: never taken) and Now
	// the database's clock it is measured against.
	Lease *backend.Lease
	Now   time.Time
	// Replicas are the replicas seen (latch_replicas), most recent first.
	Replicas []backend.ReplicaSeen
	// StoreKeys are the keys kept sealed in the store (Sealed left out).
	StoreKeys []backend.StoredKey
	// Vault is the vault's row: nil when no vault was created here.
	Vault *VaultInfo
}

// Status reads the database's schema version, durability setting, last
// commit time, lease, replicas and key rows without changing anything.
func (k *KV) Status(ctx context.Context) (*Status, error) {
	st := &Status{BinaryVersion: SchemaVersion, SynchronousCommit: k.SynchronousCommit}
	var err error
	if st.SchemaVersion, err = schemaVersion(ctx, k.pool); err != nil {
		return nil, err
	}
	if err := k.pool.QueryRow(ctx, "SELECT at FROM latch_commit WHERE id = 1").Scan(&st.LastCommit); err != nil {
		return nil, fmt.Errorf("store: read the last commit time: %w", err)
	}
	if st.Lease, err = k.readLease(ctx); err != nil {
		return nil, err
	}
	if err := k.pool.QueryRow(ctx, "SELECT now()").Scan(&st.Now); err != nil {
		return nil, fmt.Errorf("store: read the database clock: %w", err)
	}
	if err := k.pool.QueryRow(ctx, "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'latch_kv'::regclass").Scan(&st.Keys); err != nil {
		return nil, fmt.Errorf("store: estimate the key count: %w", err)
	}
	if st.Replicas, err = k.Replicas(ctx); err != nil {
		return nil, err
	}
	if st.StoreKeys, err = k.keyInfo(ctx); err != nil {
		return nil, err
	}
	if st.Vault, err = k.vaultInfo(ctx); err != nil {
		return nil, err
	}
	return st, nil
}
