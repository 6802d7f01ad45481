package markers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"

	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

var (
	// ErrNotFound means no marker exists for the ID in that namespace.
	ErrNotFound = errors.New("markers: marker not found")
	// ErrOpen means the Badger directory would not open; the caller may move it aside.
	ErrOpen = errors.New("markers: store will not open")
	// ErrContention means a transaction kept conflicting; retry later.
	ErrContention = errors.New("markers: too many conflicting writers, retry")
	// ErrClosed means the store was closed.
	ErrClosed = errors.New("markers: store closed")
)

// Namespace separates run markers from script markers.
type Namespace string

const (
	// Runs holds markers of commands started by Run.
	Runs Namespace = "run/"
	// Scripts holds markers of the marker API (begin/complete/fail).
	Scripts Namespace = "script/"
)

// maxAttempts bounds retries of a conflicting transaction.
const maxAttempts = 64

// Config configures a Store.
type Config struct {
	// Dir is the Badger directory (created if missing, mode 0700).
	Dir string
	// Logger receives Badger's own log lines at debug level and warnings.
	Logger hclog.Logger
	// InMemory runs Badger without files (tests only).
	InMemory bool
	// MirrorLog, when set, is the path of the append-only copy of every
	// script marker change (mirror.go), written in the same group commit;
	// ReadMirror reads it back to rebuild a store that will not open.
	MirrorLog string
	// Now names a damaged mirror log moved aside (default time.Now).
	Now func() time.Time
}

// maxGroup bounds how many changes one group commit carries.
const maxGroup = 256

// Store is the Badger-backed marker store.
type Store struct {
	db     *badger.DB
	log    hclog.Logger
	mirror *mirrorLog // nil: no mirror log

	reqs      chan *change  // unbuffered: a waiting writer is a blocked sender
	quit      chan struct{} // closed by Close
	committed chan struct{} // closed when the committer has returned
	closeOnce sync.Once
}

// Options returns the small-memory Badger options the agent uses (about 16 MB
// of Go memory instead of ~96 MB with Badger's defaults), with SyncWrites on.
// MemTableSize must stay fixed across versions of the agent.
func Options(dir string, log hclog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithSyncWrites(true).
		WithMemTableSize(4 << 20).
		WithNumMemtables(2).
		WithValueThreshold(64 << 10).
		WithBlockCacheSize(0).
		WithIndexCacheSize(0).
		WithCompression(options.None).
		WithValueLogFileSize(16 << 20).
		WithNumCompactors(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(4).
		WithMetricsEnabled(false).
		WithLogger(badgerLogger{log})
}

// Open opens (or creates) the store. Any failure to open the directory is
// wrapped in ErrOpen.
func Open(cfg Config) (*Store, error) {
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	log = log.Named("markers")
	if cfg.Dir == "" && !cfg.InMemory {
		return nil, fmt.Errorf("%w: no directory given", ErrOpen)
	}
	var opts badger.Options
	if cfg.InMemory {
		opts = Options("", log).WithInMemory(true)
	} else {
		if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("%w: create %s: %v", ErrOpen, cfg.Dir, err)
		}
		opts = Options(cfg.Dir, log)
	}
	db, err := openRecovered(opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrOpen, cfg.Dir, err)
	}
	var ml *mirrorLog
	if cfg.MirrorLog != "" {
		now := cfg.Now
		if now == nil {
			now = time.Now
		}
		ml, err = openMirror(cfg.MirrorLog, db, log.Warn, now())
		if err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	s := &Store{
		mirror:    ml,
		db:        db,
		log:       log,
		reqs:      make(chan *change),
		quit:      make(chan struct{}),
		committed: make(chan struct{}),
	}
	go s.commitLoop()
	return s, nil
}

// openRecovered turns a panic inside badger.Open (seen with some corrupt
// files) into an error, so a damaged directory can be moved aside.
func openRecovered(opts badger.Options) (db *badger.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("badger panicked while opening: %v", r)
		}
	}()
	return badger.Open(opts)
}

// MoveAside renames dir to <parent>/<base>.corrupt-<unix seconds> and returns
// the new path.
func MoveAside(dir string, now time.Time) (string, error) {
	dst := filepath.Join(filepath.Dir(dir), fmt.Sprintf("%s.corrupt-%d", filepath.Base(dir), now.Unix()))
	for i := 1; i <= 100; i++ {
		if _, err := os.Lstat(dst); errors.Is(err, os.ErrNotExist) {
			break
		}
		dst = filepath.Join(filepath.Dir(dir), fmt.Sprintf("%s.corrupt-%d.%d", filepath.Base(dir), now.Unix(), i))
	}
	if err := os.Rename(dir, dst); err != nil {
		return "", fmt.Errorf("markers: move %s aside: %w", dir, err)
	}
	return dst, nil
}

// Close stops the committer (a group being committed finishes first; later
// writes get ErrClosed), then flushes and closes Badger.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.quit) })
	<-s.committed
	merr := s.mirror.close()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("markers: close: %w", err)
	}
	if merr != nil {
		return fmt.Errorf("%w: close: %v", ErrMirror, merr)
	}
	return nil
}

func key(ns Namespace, id string) []byte { return []byte(string(ns) + id) }

func decode(v []byte) (*hostagentv1.Marker, error) {
	m := &hostagentv1.Marker{}
	if err := proto.Unmarshal(v, m); err != nil {
		return nil, fmt.Errorf("markers: decode marker: %w", err)
	}
	return m, nil
}

func getTxn(txn *badger.Txn, k []byte) (*hostagentv1.Marker, error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("markers: get %s: %w", k, err)
	}
	var m *hostagentv1.Marker
	err = item.Value(func(v []byte) error {
		var derr error
		m, derr = decode(v)
		return derr
	})
	return m, err
}

// setTxn sets k to m and returns the encoded marker.
func setTxn(txn *badger.Txn, k []byte, m *hostagentv1.Marker) ([]byte, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("markers: encode marker: %w", err)
	}
	if err := txn.Set(k, b); err != nil {
		return nil, fmt.Errorf("markers: set %s: %w", k, err)
	}
	return b, nil
}

// Get returns the marker of id in ns, or ErrNotFound.
func (s *Store) Get(ns Namespace, id string) (*hostagentv1.Marker, error) {
	var m *hostagentv1.Marker
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		m, err = getTxn(txn, key(ns, id))
		return err
	})
	return m, mapClosed(err)
}

// Create stores m under m.ExecutionId unless a marker already exists. It
// returns the stored marker and true when this call created it, or the
// existing marker and false. The write is durable when Create returns.
func (s *Store) Create(ns Namespace, m *hostagentv1.Marker) (*hostagentv1.Marker, bool, error) {
	if m.GetExecutionId() == "" {
		return nil, false, errors.New("markers: marker without execution id")
	}
	c := &change{kind: kindCreate, key: key(ns, m.GetExecutionId()), marker: m}
	if err := s.submit(c); err != nil {
		return nil, false, err
	}
	return c.out, c.created, nil
}

// Update applies fn to the marker of id in one transaction and stores the
// result durably. An error from fn aborts the update and is returned as is.
// fn may run more than once (a conflicting transaction is retried) and must
// not keep the marker it is given.
func (s *Store) Update(ns Namespace, id string, fn func(*hostagentv1.Marker) error) (*hostagentv1.Marker, error) {
	c := &change{kind: kindUpdate, key: key(ns, id), id: id, fn: fn}
	if err := s.submit(c); err != nil {
		return nil, err
	}
	return c.out, nil
}

// Put stores m unconditionally (used when rebuilding a store from files).
func (s *Store) Put(ns Namespace, m *hostagentv1.Marker) error {
	if m.GetExecutionId() == "" {
		return errors.New("markers: marker without execution id")
	}
	return s.submit(&change{kind: kindPut, key: key(ns, m.GetExecutionId()), marker: m})
}

// List returns up to limit markers of ns in key order (limit <= 0: all).
// An empty ns lists every namespace.
func (s *Store) List(ns Namespace, limit int) ([]*hostagentv1.Marker, error) {
	var out []*hostagentv1.Marker
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(ns)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if limit > 0 && len(out) >= limit {
				return nil
			}
			var m *hostagentv1.Marker
			err := it.Item().Value(func(v []byte) error {
				var derr error
				m, derr = decode(v)
				return derr
			})
			if err != nil {
				s.log.Warn("skipping undecodable marker", "key", string(it.Item().Key()), "error", err)
				continue
			}
			out = append(out, m)
		}
		return nil
	})
	return out, mapClosed(err)
}

func mapClosed(err error) error {
	if errors.Is(err, badger.ErrDBClosed) {
		return fmt.Errorf("%w: %v", ErrClosed, err)
	}
	return err
}

// badgerLogger routes Badger's logging into hclog: warnings and errors as
// they are, its chatty info and debug lines at trace.
type badgerLogger struct{ log hclog.Logger }

func (l badgerLogger) Errorf(f string, a ...any)   { l.log.Error(trim(f, a)) }
func (l badgerLogger) Warningf(f string, a ...any) { l.log.Warn(trim(f, a)) }
func (l badgerLogger) Infof(f string, a ...any)    { l.log.Trace(trim(f, a)) } // Badger chatter: --log-level trace only
func (l badgerLogger) Debugf(f string, a ...any)   { l.log.Trace(trim(f, a)) }

func trim(f string, a []any) string { return strings.TrimSpace(fmt.Sprintf(f, a...)) }
