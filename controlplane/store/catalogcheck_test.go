package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/testing/storetest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

func catalogVersion(src []byte) string {
	sum := sha256.Sum256(src)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// putCatalog records src as the catalog in force and journals it, as the
// catalog manager does.
func putCatalog(tx *store.Tx, src []byte, previous string) (*recordv1.CatalogVersion, error) {
	c := &recordv1.CatalogVersion{Version: catalogVersion(src), Source: "c.yaml", Tools: 1, Previous: previous, Trigger: "start"}
	if err := tx.PutCatalog(c, src); err != nil {
		return nil, err
	}
	_, err := tx.Append(&recordv1.JournalEntry{Kind: "catalog_loaded", Catalog: c})
	return c, err
}

// TestCheckStateFindsAForgedCatalog forges the record of the catalog in
// force and the catalog sources of a stopped store (Badger and
// PostgreSQL): the full check names what was forged.
func TestCheckStateFindsAForgedCatalog(t *testing.T) {
	v1, v2 := []byte("tools: {a: {}}"), []byte("tools: {a: {}, b: {}}")
	tests := []struct {
		name  string
		forge func(kv store.KV) error
		want  []found
	}{
		{name: "catalog in force rewound to the older version", forge: func(kv store.KV) error {
			return storetest.Put(kv, "m/catalog", &recordv1.CatalogVersion{Version: catalogVersion(v1), Source: "c.yaml", Tools: 1, Trigger: "start"})
		}, want: []found{{"catalog", store.MismatchRecord}}},
		{name: "catalog in force set to a version never loaded", forge: func(kv store.KV) error {
			return storetest.Put(kv, "m/catalog", &recordv1.CatalogVersion{Version: catalogVersion([]byte("evil")), Source: "c.yaml", Tools: 1, Previous: catalogVersion(v1), Trigger: "reload"})
		}, want: []found{{"catalog", store.MismatchRecord}}},
		{name: "catalog in force deleted", forge: func(kv store.KV) error {
			return kv.Commit([]store.Write{{Key: []byte("m/catalog"), Delete: true}})
		}, want: []found{{"catalog", store.MismatchMissing}}},
		{name: "catalog source rewritten", forge: func(kv store.KV) error {
			return kv.Commit([]store.Write{{Key: []byte("k/" + catalogVersion(v1)), Value: []byte("tools: {evil: {}}")}})
		}, want: []found{{catalogVersion(v1), store.MismatchRecord}}},
		{name: "catalog source planted", forge: func(kv store.KV) error {
			evil := []byte("tools: {evil: {}}")
			return kv.Commit([]store.Write{{Key: []byte("k/" + catalogVersion(evil)), Value: evil}})
		}, want: []found{{catalogVersion([]byte("tools: {evil: {}}")), store.MismatchUnjournaled}}},
	}
	for _, b := range storetest.Backends {
		for _, tt := range tests {
			t.Run(b.Name+"/"+tt.name, func(t *testing.T) {
				open := b.New(t)
				s := storetest.OpenStore(t, open())
				build(t, s, 3, 0)
				err := s.Update(context.Background(), func(tx *store.Tx) error {
					if _, err := putCatalog(tx, v1, ""); err != nil {
						return err
					}
					_, err := putCatalog(tx, v2, catalogVersion(v1))
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				rep, err := s.CheckState(t.Context(), store.CheckAll)
				if err != nil || !rep.OK() {
					t.Fatalf("CheckState of an untouched store = %v, %v; want ok", rep, err)
				}
				s = storetest.Reopen(t, s, open, tt.forge)
				rep, err = s.CheckState(t.Context(), store.CheckAll)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, summary(rep.Mismatches)); diff != "" {
					t.Errorf("CheckState(CheckAll) mismatches (-want +got):\n%s\n%s", diff, rep)
				}
			})
		}
	}
}
