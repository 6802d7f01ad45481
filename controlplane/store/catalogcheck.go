package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// The catalog in force against its journal.
//
// m/catalog must be the catalog its last catalog_loaded journal record
// carries: start-up reads it to decide whether the catalog it loads is
// already journaled (a restart on the catalog recorded last journals
// nothing), so a version edited into m/catalog would let a catalog come
// into force with no journal record of it. Every catalog source k/sha256:…
// must hash to its version and be a version a catalog_loaded record
// journaled (the contract executions were accepted under is read back from
// it). CheckAll holds both (checkCatalog).

// journaledCatalogs are the catalog records the journal pass read.
type journaledCatalogs struct {
	last     *recordv1.CatalogVersion
	lastAt   int64
	versions map[string]int64 // version -> journal index of its first record
}

func (c *journaledCatalogs) add(i int64, x *recordv1.CatalogVersion) {
	if c.versions == nil {
		c.versions = map[string]int64{}
	}
	c.last, c.lastAt = x, i
	if _, ok := c.versions[x.GetVersion()]; !ok {
		c.versions[x.GetVersion()] = i
	}
}

// catalogSourcePrefix is the k/ keys of catalog sources (the other k/ keys
// are sealed arguments, named by execution id).
const catalogSourcePrefix = "k/sha256:"

// checkCatalog holds m/catalog and the catalog sources against the catalog
// records of the first size journal records. On a store being written
// (CheckAllLive) a disagreement is looked at again with the records
// appended since, and once more inside a write (where the state read and
// the journal size agree, as for sessions), and only one that still stands
// is reported: a catalog loaded between the state read and the journal
// size read is not a forgery.
func (s *Store) checkCatalog(ctx context.Context, journaled journaledCatalogs, size int64, add func(id string, idx int64, key string, kind MismatchKind, format string, args ...any)) error {
	ms, err := s.catalogMismatches(ctx, journaled)
	if err != nil || len(ms) == 0 {
		return err
	}
	upTo := size
	if now := s.JournalSize(); now > size {
		s.foldCatalogs(s.kv.Get, &journaled, size, now)
		upTo = now
		if ms, err = s.confirmCatalog(s.kv.Get, ms, journaled); err != nil {
			return err
		}
	}
	if len(ms) > 0 && s.JournalSize() > upTo {
		uerr := s.Update(ctx, func(tx *Tx) error {
			s.foldCatalogs(tx.get, &journaled, upTo, tx.size)
			ms, err = s.confirmCatalog(tx.get, ms, journaled)
			return err
		})
		if uerr != nil && !errors.Is(uerr, ErrClosed) {
			return uerr
		}
	}
	for _, m := range ms {
		add(m.ExecutionID, m.JournalIndex, m.Key, m.Kind, "%s", m.Detail)
	}
	return nil
}

// foldCatalogs adds the catalog records of journal records from..to.
func (s *Store) foldCatalogs(get getter, j *journaledCatalogs, from, to int64) {
	for i := from; i < to; i++ {
		e, err := entryAt(get, i)
		if err == nil && e.GetCatalog().GetVersion() != "" {
			j.add(i, e.GetCatalog())
		}
	}
}

// confirmCatalog checks again, on get, the keys of ms: m/catalog against
// the last journaled catalog, each flagged source against its version and
// the journaled versions. It returns the mismatches that still stand.
func (s *Store) confirmCatalog(get getter, ms []Mismatch, j journaledCatalogs) ([]Mismatch, error) {
	var out []Mismatch
	add := func(id string, idx int64, key string, kind MismatchKind, format string, args ...any) {
		out = append(out, Mismatch{ExecutionID: id, JournalIndex: idx, Key: key, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	for _, m := range ms {
		if m.Key == string(catalogKey) {
			c, err := decodeCatalog(get(catalogKey))
			catalogInForce(c, err, j, add)
			continue
		}
		v, err := get([]byte(m.Key))
		if errors.Is(err, ErrNotFound) {
			continue // gone since: nothing stored to hold against the journal
		}
		if err != nil {
			return nil, fmt.Errorf("store: state check: read %s: %w", m.Key, err)
		}
		catalogSource(m.Key, v, j, add)
	}
	return out, nil
}

func (s *Store) catalogMismatches(ctx context.Context, j journaledCatalogs) ([]Mismatch, error) {
	var out []Mismatch
	add := func(id string, idx int64, key string, kind MismatchKind, format string, args ...any) {
		out = append(out, Mismatch{ExecutionID: id, JournalIndex: idx, Key: key, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	c, err := decodeCatalog(s.kv.Get(catalogKey))
	catalogInForce(c, err, j, add)
	err = s.kv.Scan([]byte(catalogSourcePrefix), false, func(k, v []byte) bool {
		catalogSource(string(k), v, j, add)
		return ctx.Err() == nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: state check: read the catalog sources: %w", err)
	}
	return out, ctx.Err()
}

// catalogInForce holds the record of the catalog in force (c, err: its
// m/catalog read) against the last journaled catalog.
func catalogInForce(c *recordv1.CatalogVersion, err error, j journaledCatalogs, add func(id string, idx int64, key string, kind MismatchKind, format string, args ...any)) {
	switch {
	case errors.Is(err, ErrNotFound) && j.last != nil:
		add("catalog", j.lastAt, string(catalogKey), MismatchMissing, "the journal records catalog %s in force (journal record %d) but the record of the catalog in force is gone", j.last.GetVersion(), j.lastAt)
	case errors.Is(err, ErrNotFound):
	case err != nil:
		add("catalog", j.lastAt, string(catalogKey), MismatchRecord, "%v", err)
	case j.last == nil:
		add("catalog", -1, string(catalogKey), MismatchUnjournaled, "a catalog in force (%s) is recorded that no catalog_loaded journal record carries (planted?)", c.GetVersion())
	case !proto.Equal(c, j.last):
		add("catalog", j.lastAt, string(catalogKey), MismatchRecord, "the catalog in force is recorded as %s (from %s), its last journal record (%d) says %s (from %s)", c.GetVersion(), c.GetSource(), j.lastAt, j.last.GetVersion(), j.last.GetSource())
	}
}

// catalogSource holds one stored catalog source (key k/sha256:…, value v)
// against its version and the journaled versions.
func catalogSource(key string, v []byte, j journaledCatalogs, add func(id string, idx int64, key string, kind MismatchKind, format string, args ...any)) {
	version := key[2:]
	sum := sha256.Sum256(v)
	idx, ok := j.versions[version]
	switch {
	case !bytes.Equal([]byte("sha256:"+hex.EncodeToString(sum[:])), []byte(version)):
		add(version, idx, key, MismatchRecord, "the stored source of catalog %s does not hash to its version", version)
	case !ok:
		add(version, -1, key, MismatchUnjournaled, "a catalog source is stored whose version no catalog_loaded journal record carries (planted?)")
	}
}
