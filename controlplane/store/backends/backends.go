// Package backends is the registry of store backends: the name of each
// kind, which --store values it takes, and how it is opened. The built-in
// kinds are listed once, in builtIn; a backend from elsewhere (a test's)
// adds itself with Register. The composition root opens the store with
// Open; nothing else chooses a backend by its --store value.
package backends

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/controlplane/store/pgkv"
)

// Registry errors.
var (
	// ErrStoreSpec is returned by Open for a --store value that names no
	// backend.
	ErrStoreSpec = errors.New("store: --store takes a PostgreSQL connection string")
	// ErrDuplicate is returned by Register for a name already registered.
	ErrDuplicate = errors.New("store: a backend of that name is registered")
)

// Kind is one kind of backend.
type Kind struct {
	// Name names the kind in logs ("badger").
	Name string
	// Noun names a store of this kind in messages ("the PostgreSQL
	// store"), never by its --store value: a connection string may hold
	// a password. Empty: "the store".
	Noun string
	// Takes reports whether a --store value names this kind. The kinds'
	// sets of values are disjoint: Open refuses a value two kinds take.
	Takes func(spec string) bool
	// Open opens the backend spec names; dataDir is the directory of the
	// embedded store (DATA/db) and log is already named for the kind.
	Open func(ctx context.Context, spec, dataDir string, log hclog.Logger) (backend.KV, error)
	// OpenReader opens the backend to read it (latch audit): it migrates
	// nothing and writes nothing the backend can avoid writing. Nil: the
	// kind is read through Open.
	OpenReader func(ctx context.Context, spec, dataDir string, log hclog.Logger) (backend.KV, error)
}

// builtIn are the kinds latch ships: one line per backend package.
var builtIn = []Kind{
	{Name: "badger", Noun: "the Badger store", Takes: func(spec string) bool { return spec == "" }, Open: openBadger, OpenReader: readBadger},
	{Name: "postgres", Noun: "the PostgreSQL store", Takes: pgkv.IsURL, Open: openPostgres, OpenReader: readPostgres},
}

var (
	mu    sync.RWMutex
	kinds = byName(builtIn)
)

func byName(ks []Kind) map[string]Kind {
	m := make(map[string]Kind, len(ks))
	for _, k := range ks {
		m[k.Name] = k
	}
	return m
}

// Register adds a kind (a backend that is not built in: a test's), or
// returns ErrDuplicate.
func Register(k Kind) error {
	if k.Name == "" || k.Takes == nil || k.Open == nil {
		return errors.New("store: Register needs a Name, Takes and Open")
	}
	mu.Lock()
	defer mu.Unlock()
	if _, ok := kinds[k.Name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicate, k.Name)
	}
	kinds[k.Name] = k
	return nil
}

// Open opens the backend a --store value names: empty for the Badger
// store in dataDir (the default), a PostgreSQL URL
// (postgres://user@host/db?...) or libpq key/value string ("host=a,b
// dbname=latch target_session_attrs=read-write"), or a registered kind's
// value. A PostgreSQL database missing migrations is migrated first; one
// migrated by a newer latch is refused.
func Open(ctx context.Context, spec, dataDir string, log hclog.Logger) (backend.KV, error) {
	k, err := kindFor(spec)
	if err != nil {
		return nil, err
	}
	return k.Open(ctx, spec, dataDir, logFor(log, k))
}

// OpenReader opens the backend a --store value names, as Open does, to
// read it: a PostgreSQL database is not migrated (an older schema is
// refused), a Badger directory is opened read-only when it can be.
func OpenReader(ctx context.Context, spec, dataDir string, log hclog.Logger) (backend.KV, error) {
	k, err := kindFor(spec)
	if err != nil {
		return nil, err
	}
	if k.OpenReader == nil {
		return k.Open(ctx, spec, dataDir, logFor(log, k))
	}
	return k.OpenReader(ctx, spec, dataDir, logFor(log, k))
}

// IsSpec reports whether s is a --store value that names a backend of its
// own (not the default store in a data dir): where a command takes a data
// dir or a store, it tells the two apart.
func IsSpec(s string) bool {
	if s == "" {
		return false
	}
	_, err := kindFor(s)
	return err == nil
}

// Noun is how messages name the store spec names ("the PostgreSQL
// store"): never by spec itself, which may hold a password.
func Noun(spec string) string {
	k, err := kindFor(spec)
	if err != nil || k.Noun == "" {
		return "the store"
	}
	return k.Noun
}

// kindFor is the one kind that takes spec.
func kindFor(spec string) (Kind, error) {
	mu.RLock()
	var takers []Kind
	for _, k := range kinds {
		if k.Takes(spec) {
			takers = append(takers, k)
		}
	}
	mu.RUnlock()
	switch len(takers) {
	case 0:
		return Kind{}, fmt.Errorf("%w (postgres://user@host:5432/db or \"host=... dbname=...\"), not %q; leave --store out for the embedded Badger store in DATA/db", ErrStoreSpec, spec)
	case 1:
		return takers[0], nil
	}
	names := make([]string, len(takers))
	for i, k := range takers {
		names[i] = k.Name
	}
	sort.Strings(names)
	return Kind{}, fmt.Errorf("%w: %q is taken by more than one backend (%v)", ErrStoreSpec, spec, names)
}

func logFor(log hclog.Logger, k Kind) hclog.Logger {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return log.Named(k.Name)
}

func openBadger(_ context.Context, _, dataDir string, log hclog.Logger) (backend.KV, error) {
	return badgerkv.Open(dataDir, badgerkv.Options{Logger: log})
}

func openPostgres(ctx context.Context, spec, _ string, log hclog.Logger) (backend.KV, error) {
	return pgkv.Open(ctx, spec, pgkv.Options{Logger: log, Migrate: true})
}

// readBadger opens a data dir's store read-only; a directory left by a
// crash cannot be (Badger must replay its log first), and a normal open
// does that.
func readBadger(_ context.Context, _, dataDir string, log hclog.Logger) (backend.KV, error) {
	kv, err := badgerkv.Open(dataDir, badgerkv.Options{Logger: log, ReadOnly: true})
	if err == nil {
		return kv, nil
	}
	kv, rerr := badgerkv.Open(dataDir, badgerkv.Options{Logger: log})
	if rerr != nil {
		return nil, err
	}
	return kv, nil
}

func readPostgres(ctx context.Context, spec, _ string, log hclog.Logger) (backend.KV, error) {
	return pgkv.Open(ctx, spec, pgkv.Options{Logger: log})
}
