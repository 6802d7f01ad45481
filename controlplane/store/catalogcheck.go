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
// appended since, and only one that still stands is reported.
func (s *Store) checkCatalog(ctx context.Context, journaled journaledCatalogs, size int64, add func(id string, idx int64, key string, kind MismatchKind, format string, args ...any)) error {
	ms, err := s.catalogMismatches(ctx, journaled)
	if err != nil || len(ms) == 0 {
		return err
	}
	if now := s.JournalSize(); now > size {
		for i := size; i < now; i++ {
			e, err := entryAt(s.kv.Get, i)
			if err == nil && e.GetCatalog().GetVersion() != "" {
				journaled.add(i, e.GetCatalog())
			}
		}
		if ms, err = s.catalogMismatches(ctx, journaled); err != nil {
			return err
		}
	}
	for _, m := range ms {
		add(m.ExecutionID, m.JournalIndex, m.Key, m.Kind, "%s", m.Detail)
	}
	return nil
}

func (s *Store) catalogMismatches(ctx context.Context, j journaledCatalogs) ([]Mismatch, error) {
	var out []Mismatch
	add := func(id string, idx int64, key string, kind MismatchKind, format string, args ...any) {
		out = append(out, Mismatch{ExecutionID: id, JournalIndex: idx, Key: key, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	c, err := decodeCatalog(s.kv.Get(catalogKey))
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
	err = s.kv.Scan([]byte(catalogSourcePrefix), false, func(k, v []byte) bool {
		version := string(k[2:])
		sum := sha256.Sum256(v)
		idx, ok := j.versions[version]
		switch {
		case !bytes.Equal([]byte("sha256:"+hex.EncodeToString(sum[:])), []byte(version)):
			add(version, idx, string(k), MismatchRecord, "the stored source of catalog %s does not hash to its version", version)
		case !ok:
			add(version, -1, string(k), MismatchUnjournaled, "a catalog source is stored whose version no catalog_loaded journal record carries (planted?)")
		}
		return ctx.Err() == nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: state check: read the catalog sources: %w", err)
	}
	return out, ctx.Err()
}
