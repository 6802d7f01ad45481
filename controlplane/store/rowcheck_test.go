package store_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/testing/storetest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestFullCheckHoldsConsoleSessionsAndPins: the full state check (start-up
// on a small store, latch audit verify) holds the console session rows and
// the upstream tool pins against the journal: rows written with their
// records pass; a planted console session, a pin edited after its record
// and a pin no record carries are each reported under their key.
func TestFullCheckHoldsConsoleSessionsAndPins(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, b := range storetest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			s := storetest.OpenStore(t, b.New(t)())
			t.Cleanup(func() { s.Close() })
			alice := openConsoleSession(t, s, hexKey("cookie-alice"), "alice", at, time.Hour)
			pin := &recordv1.UpstreamToolPin{Tool: "tracker.create_issue", Hash: "sha256:aa", Description: "Create an issue.", AcceptedBy: "ops", AcceptedAt: timestamppb.New(at)}
			put := func(p *recordv1.UpstreamToolPin, journaled bool) {
				t.Helper()
				err := s.Update(t.Context(), func(tx *store.Tx) error {
					if journaled {
						if _, err := tx.Append(&recordv1.JournalEntry{Time: timestamppb.New(at), EntryKind: recordv1.EntryKind_ENTRY_KIND_UPSTREAM_TOOL_PINNED, Actor: "ops", UpstreamToolPin: p}); err != nil {
							return err
						}
					}
					return tx.PutUpstreamToolPin(p)
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			put(pin, true)
			check := func() map[string]store.MismatchKind {
				t.Helper()
				rep, err := s.CheckState(t.Context(), store.CheckAll)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]store.MismatchKind{}
				for _, m := range rep.Mismatches {
					got[m.Key] = m.Kind
				}
				return got
			}
			if got := check(); len(got) != 0 {
				t.Fatalf("CheckState of rows written with their records = %v, want no mismatch", got)
			}

			planted := proto.Clone(alice).(*recordv1.ConsoleSession)
			planted.KeySha256 = hexKey("cookie-mallory")
			planted.Id = store.ConsoleSessionID(planted.GetKeySha256())
			planted.Credential.ConsoleSession = planted.Id
			if err := s.Update(t.Context(), func(tx *store.Tx) error { return tx.PutConsoleSession(planted) }); err != nil {
				t.Fatal(err)
			}
			edited := proto.Clone(pin).(*recordv1.UpstreamToolPin)
			edited.Hash, edited.Description = "sha256:bb", "Create an issue (and close the others)."
			put(edited, false)
			put(&recordv1.UpstreamToolPin{Tool: "tracker.delete_all", Hash: "sha256:cc"}, false)
			want := map[string]store.MismatchKind{
				"cs/" + planted.GetId():  store.MismatchRecord,
				"u/tracker.create_issue": store.MismatchRecord,
				"u/tracker.delete_all":   store.MismatchUnjournaled,
			}
			got := check()
			for k, kind := range want {
				if got[k] != kind {
					t.Errorf("CheckState: %s reported as %q, want %q (all: %v)", k, got[k], kind, got)
				}
			}
			if len(got) != len(want) {
				t.Errorf("CheckState reported %v, want exactly %v", got, want)
			}
		})
	}
}
