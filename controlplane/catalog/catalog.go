// Package catalog owns the tool catalog of a running control plane: it
// loads it once at start, versions it by the SHA-256 of its source bytes,
// journals every version that comes into force (catalog_loaded, with the
// version and source), and reloads it on request (`latch catalog reload`,
// SIGHUP). A reload validates the whole catalog first: a catalog with any
// problem changes nothing, and the "file:line: what is wrong" list goes
// back to the operator.
//
// The catalog in force is handed to the engine (OnChange); the engine serves
// it to fronts (ListTools) and stamps each execution with the version it was
// accepted under.
//
// Imported by controlplane/server and the latch command.
package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// KindLoaded is the journal kind of a catalog coming into force.
const KindLoaded = recordv1.EntryKind_ENTRY_KIND_CATALOG_LOADED

// Triggers of a load.
const (
	TriggerStart  = "start"
	TriggerReload = "reload"
	TriggerSIGHUP = "sighup"
)

var (
	// ErrInvalid wraps the problems of a catalog that was refused.
	ErrInvalid = errors.New("catalog: refused")
	// ErrUnreadable is returned when the catalog's source cannot be read.
	ErrUnreadable = errors.New("catalog: cannot read the source")
)

// Source produces a catalog and the bytes its version is computed over.
// Implemented by File and Fixed.
type Source interface {
	Load() (cat *tools.Catalog, data []byte, source string, err error)
}

// StoreUser is a Source that keeps state of its own in the store (the
// upstream tools' pins: mcpchannel). Load hands it the store before the
// first load, on every replica that becomes active. Implemented by
// mcpchannel's Source.
type StoreUser interface {
	UseStore(st *store.Store)
}

// File reads and validates the catalog file at path on every load, with
// the built-in channel kinds (tools.Parse).
func File(path string) Source { return FileOf(nil, path) }

// FileOf is File with the channel kinds of kinds (nil: the built-in ones).
func FileOf(kinds *tools.Registry, path string) Source {
	return fileSource{path: fileName(path), kinds: kinds}
}

type fileSource struct {
	path  fileName
	kinds *tools.Registry
}

// fileName is a catalog file's path.
type fileName string

func (f fileSource) Load() (*tools.Catalog, []byte, string, error) { return f.path.load(f.kinds) }

func (p fileName) load(kinds *tools.Registry) (*tools.Catalog, []byte, string, error) {
	parse := tools.Parse
	if kinds != nil {
		parse = kinds.Parse
	}
	data, err := os.ReadFile(string(p))
	if err != nil {
		return nil, nil, string(p), fmt.Errorf("%w %s: %v", ErrUnreadable, string(p), err)
	}
	if len(data) > tools.MaxCatalogSize {
		return nil, nil, string(p), fmt.Errorf("%w:\n%s: the catalog is %d bytes, above the limit of %d", ErrInvalid, string(p), len(data), tools.MaxCatalogSize)
	}
	cat, err := parse(string(p), data)
	if err != nil {
		return nil, nil, string(p), fmt.Errorf("%w:\n%v", ErrInvalid, err)
	}
	return cat, data, string(p), nil
}

// Bytes parses data as the catalog file filename on every load (tests, a
// catalog held in memory).
func Bytes(filename string, data []byte) Source {
	return Fixed(filename, data, func() (*tools.Catalog, error) { return tools.Parse(filename, data) })
}

// Fixed is a catalog built in memory (latch dev's embedded catalog after
// its rewrites, tests). data is what its version is computed over: it must
// change whenever the catalog does.
func Fixed(source string, data []byte, build func() (*tools.Catalog, error)) Source {
	return fixedSource{source: source, data: data, build: build}
}

type fixedSource struct {
	source string
	data   []byte
	build  func() (*tools.Catalog, error)
}

func (f fixedSource) Load() (*tools.Catalog, []byte, string, error) {
	cat, err := f.build()
	if err != nil {
		return nil, nil, f.source, fmt.Errorf("%w:\n%v", ErrInvalid, err)
	}
	return cat, f.data, f.source, nil
}

// Version is the version of a catalog's source bytes.
func Version(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Config names the manager's dependencies.
type Config struct {
	Logger hclog.Logger
	Store  *store.Store
	Source Source
	// Clock defaults to time.Now.
	Clock func() time.Time
	// OnChange receives every catalog that comes into force, the first one
	// included (called with the manager's lock held: it must not call back).
	OnChange func(cat *tools.Catalog, version string)
}

// Current is the catalog in force.
type Current struct {
	Catalog *tools.Catalog
	Version string
	Source  string
	// LoadedAt is when this manager brought it into force (the manager's
	// clock), and Trigger why (TriggerStart, TriggerReload, TriggerSIGHUP).
	LoadedAt time.Time
	Trigger  string
}

// Result is what a reload did.
type Result struct {
	Current
	Previous string
	// Changed is false when the source still had the version in force.
	Changed bool
}

// Manager holds the catalog in force.
type Manager struct {
	log      hclog.Logger
	st       *store.Store
	src      Source
	clock    func() time.Time
	onChange func(*tools.Catalog, string)

	mu  sync.Mutex
	cur Current
}

// Load builds a manager from its source: the first catalog must be valid,
// or the control plane does not start. The version is journaled when it is
// not the one the store recorded last (a restart on the same file writes
// nothing).
func Load(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.Store == nil || cfg.Source == nil {
		return nil, errors.New("catalog: Config.Store and Config.Source are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.OnChange == nil {
		cfg.OnChange = func(*tools.Catalog, string) {}
	}
	m := &Manager{log: cfg.Logger.Named("catalog"), st: cfg.Store, src: cfg.Source, clock: cfg.Clock, onChange: cfg.OnChange}
	if u, ok := cfg.Source.(StoreUser); ok {
		u.UseStore(cfg.Store)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.loadLocked(ctx, TriggerStart); err != nil {
		return nil, err
	}
	return m, nil
}

// Current returns the catalog in force.
func (m *Manager) Current() Current {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// Reload reads the source again. A refused or unreadable catalog changes
// nothing and the error lists why; the same version changes nothing either
// (Changed false).
func (m *Manager) Reload(ctx context.Context, trigger string) (Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.loadLocked(ctx, trigger)
}

func (m *Manager) loadLocked(ctx context.Context, trigger string) (Result, error) {
	prev := m.cur.Version
	cat, data, source, err := m.src.Load()
	if err != nil {
		if prev != "" {
			m.log.Warn("catalog reload refused; the catalog in force is unchanged", "source", source, "version", prev, "trigger", trigger, "error", err)
		}
		return Result{Current: m.cur, Previous: prev}, err
	}
	version := Version(data)
	if version == prev {
		return Result{Current: m.cur, Previous: prev}, nil
	}
	rec := &recordv1.CatalogVersion{Version: version, Source: source, Tools: int32(len(cat.Tools)), Previous: prev, Trigger: trigger}
	now := m.clock()
	err = m.st.Update(ctx, func(tx *store.Tx) error {
		last, err := tx.Catalog()
		switch {
		case err == nil && prev == "" && last.GetVersion() == version && last.GetSource() == source:
			return nil // a restart on the catalog recorded last
		case err == nil && prev == "":
			rec.Previous = last.GetVersion()
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return err
		}
		if err := tx.PutCatalog(rec, data); err != nil {
			return err
		}
		_, err = tx.Append(&recordv1.JournalEntry{Time: timestamppb.New(now), EntryKind: KindLoaded, Reason: fmt.Sprintf("catalog %s from %s (%s): %d tools", version, source, trigger, len(cat.Tools)), Catalog: rec})
		return err
	})
	if err != nil {
		return Result{Current: m.cur, Previous: prev}, fmt.Errorf("catalog: recording version %s: %w", version, err)
	}
	m.cur = Current{Catalog: cat, Version: version, Source: source, LoadedAt: now, Trigger: trigger}
	for _, w := range cat.Warnings {
		m.log.Warn("catalog warning: loaded, but check it", "warning", w.String())
	}
	m.onChange(cat, version)
	m.log.Info("catalog in force", "version", version, "source", source, "tools", len(cat.Tools), "previous", prev, "trigger", trigger)
	return Result{Current: m.cur, Previous: prev, Changed: true}, nil
}
