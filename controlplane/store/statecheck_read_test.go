package store_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/internal/testing/storetest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestCheckAllChunkingChangesNothing: the full check reads the journal in
// chunks, on several workers, and hashes only the snapshot that decides in
// each chunk; on sound and damaged stores alike, its report is the same
// whatever the chunk size (1: every record its own chunk; sizes that split
// an execution's records across chunks; the default), however the workers
// share a chunk out, and whether the state is read prefix by prefix after
// the journal (the store's own check) or all at once beside it
// (CheckAllFrom's way).
func TestCheckAllChunkingChangesNothing(t *testing.T) {
	victim, other := idOf(1), idOf(2)
	leafKey := func(i int) []byte { return fmt.Appendf(nil, "j/%016x", i) }
	// appendField appends a second copy of a string field to an
	// encoding: proto decodes it (the last one wins), the wire fast path
	// refuses it, so the record goes the decoding way.
	appendField := func(b []byte, num protowire.Number, v string) []byte {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendString(b, v)
	}
	kindNum := (&recordv1.JournalEntry{}).ProtoReflect().Descriptor().Fields().ByName("kind").Number()
	toolNum := (&recordv1.Execution{}).ProtoReflect().Descriptor().Fields().ByName("tool").Number()
	// onLeaf rewrites the data of journal record i.
	onLeaf := func(kv store.KV, i int, edit func([]byte) []byte) error {
		v, err := kv.Get(leafKey(i))
		if err != nil {
			return err
		}
		head := 1 + int(v[0])*32
		nv := append(append([]byte{}, v[:head]...), edit(append([]byte{}, v[head:]...))...)
		return kv.Commit([]store.Write{{Key: leafKey(i), Value: nv}})
	}
	tests := []struct {
		name  string
		forge func(kv store.KV) error
		sound bool
	}{
		{name: "sound", sound: true, forge: func(store.KV) error { return nil }},
		{name: "state", forge: func(kv store.KV) error { return storetest.Forge(kv, storetest.State, victim, other) }},
		{name: "result body", forge: func(kv store.KV) error { return storetest.Forge(kv, storetest.ResultBody, victim, other) }},
		{name: "fingerprint index", forge: func(kv store.KV) error { return storetest.Forge(kv, storetest.Index, victim, other) }},
		{name: "deleted record and index", forge: func(kv store.KV) error {
			return storetest.Forge(kv, storetest.DeletedWithIndex, victim, other)
		}},
		{name: "journal index", forge: func(kv store.KV) error {
			return storetest.Rewrite(kv, victim, func(x *recordv1.Execution) { x.JournalIndex-- })
		}},
		{name: "journal record gone", forge: func(kv store.KV) error {
			return kv.Commit([]store.Write{{Key: leafKey(9), Delete: true}})
		}},
		{name: "journal record not a leaf record", forge: func(kv store.KV) error {
			return kv.Commit([]store.Write{{Key: leafKey(5), Value: []byte{0}}})
		}},
		{name: "journal entry that does not decode", forge: func(kv store.KV) error {
			return onLeaf(kv, 7, func(b []byte) []byte { return append(b, 0xff, 0xff) })
		}},
		{name: "journal entries read by decoding", sound: true, forge: func(kv store.KV) error {
			// Records of executions 1 (records 3 to 7) and 2 (8 to 12)
			// that only the decoder reads, their accepted and last
			// changing ones among them: the check's slow path, split
			// across chunks at the small sizes.
			for _, i := range []int{3, 6, 8, 9, 11} {
				if err := onLeaf(kv, i, func(b []byte) []byte { return appendField(b, kindNum, "transition") }); err != nil {
					return err
				}
			}
			return nil
		}},
		{name: "record read by decoding", sound: true, forge: func(kv store.KV) error {
			v, err := kv.Get([]byte("x/" + victim))
			if err != nil {
				return err
			}
			return kv.Commit([]store.Write{{Key: []byte("x/" + victim), Value: appendField(v, toolNum, "deploy")}})
		}},
		{name: "record read by decoding, changed", forge: func(kv store.KV) error {
			v, err := kv.Get([]byte("x/" + victim))
			if err != nil {
				return err
			}
			return kv.Commit([]store.Write{{Key: []byte("x/" + victim), Value: appendField(v, toolNum, "delete")}})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			_, s := openBadger(t, dir)
			build(t, s, 7, 3)
			s.Close()
			if kv, err := badgerkv.Open(dir, badgerkv.Options{}); err != nil {
				t.Fatal(err)
			} else {
				if err := tt.forge(kv); err != nil {
					t.Fatal(err)
				}
				kv.Close()
			}
			_, s = openBadger(t, dir)
			defer s.Close()
			want, err := s.CheckState(t.Context(), store.CheckAll)
			if err != nil {
				t.Fatal(err)
			}
			if want.OK() != tt.sound {
				t.Fatalf("CheckState(CheckAll).OK() = %v, want %v: %v", want.OK(), tt.sound, want)
			}
			for _, c := range []struct{ chunk, block int }{{4096, 64}, {1, 1}, {2, 1}, {3, 1}, {5, 2}, {7, 1}, {64, 1}} {
				restore := store.SetStateChunking(c.chunk, c.block)
				got, err := s.CheckState(t.Context(), store.CheckAll)
				pre, perr := s.CheckAllPrescanned(t.Context())
				restore()
				if err != nil || perr != nil {
					t.Fatal(err, perr)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("chunks of %d, blocks of %d: report differs from the default's (-default +got):\n%s", c.chunk, c.block, diff)
				}
				if diff := cmp.Diff(want, pre); diff != "" {
					t.Errorf("chunks of %d, blocks of %d, state read beside the journal: report differs from the default's (-default +got):\n%s", c.chunk, c.block, diff)
				}
			}
		})
	}
}
