package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/testing/storetest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// newToken is a token of secret as the tokens service stores it.
func newToken(secret, actor string) *recordv1.AgentToken {
	s := sha256.Sum256([]byte(secret))
	sum := hex.EncodeToString(s[:])
	return &recordv1.AgentToken{Id: "tok_" + sum[:12], Actor: actor, Sha256: sum, Origin: "api",
		CreatedAt: timestamppb.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))}
}

// putToken stores t and journals it as kind, as the tokens service does.
func putToken(tx *store.Tx, t *recordv1.AgentToken, kind string) (int64, error) {
	if err := tx.PutToken(t); err != nil {
		return 0, err
	}
	return tx.Append(&recordv1.JournalEntry{Kind: kind, Actor: t.GetActor(), Token: store.JournaledToken(t)})
}

func indexValue(i int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }

func journalKey(i int64) string { return fmt.Sprintf("j/%016x", i) }

// tokenStore is a stopped Badger store holding alice's token, bob's token
// (created, then revoked), a journal record that changes no state (filler)
// and a signed checkpoint over all of it.
type tokenStore struct {
	open                   func() store.KV // opens the stopped store's backend again
	alice, bob             *recordv1.AgentToken
	aliceAt, bobAt, filler int64 // journal indexes: alice created, bob created, the filler
	checkpoint             []byte
	verifier               string
}

func buildTokenStore(t *testing.T, open func() store.KV) *tokenStore {
	t.Helper()
	ts := &tokenStore{open: open, alice: newToken("latch_alice", "alice"), bob: newToken("latch_bob", "bob")}
	skey, vkey, err := journal.GenerateKey("test/tokens")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := journal.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	ts.verifier = vkey
	s := storetest.OpenStore(t, open())
	build(t, s, 5, 2)
	err = s.Update(context.Background(), func(tx *store.Tx) error {
		var err error
		if ts.aliceAt, err = putToken(tx, ts.alice, "token_created"); err != nil {
			return err
		}
		if ts.filler, err = tx.Append(&recordv1.JournalEntry{Kind: "key_created", Reason: "a record no state depends on"}); err != nil {
			return err
		}
		if ts.bobAt, err = putToken(tx, ts.bob, "token_created"); err != nil {
			return err
		}
		ts.bob.RevokedAt, ts.bob.RevokedBy = timestamppb.New(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)), "ops"
		if _, err = putToken(tx, ts.bob, "token_revoked"); err != nil {
			return err
		}
		n, root, err := tx.TreeHash()
		if err != nil {
			return err
		}
		if ts.checkpoint, err = signer.Sign(n, root, time.Now()); err != nil {
			return err
		}
		tx.PutCheckpoint(n, ts.checkpoint)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	return ts
}

// plant writes a token into the stopped store by hand: its record and
// hash index, and a token journal index entry when at >= 0.
func plant(kv store.KV, x *recordv1.AgentToken, at int64) error {
	v, err := proto.Marshal(x)
	if err != nil {
		return err
	}
	ws := []store.Write{{Key: []byte("t/" + x.GetId()), Value: v}, {Key: []byte("h/" + x.GetSha256()), Value: []byte(x.GetId())}}
	if at >= 0 {
		ws = append(ws, store.Write{Key: []byte("tj/" + x.GetId()), Value: indexValue(at)})
	}
	return kv.Commit(ws)
}

// TestCheckTokenAgainstItsIndexedRecord forges a stopped store once per
// case and checks what CheckToken (one token, through tj/, the check a
// token gets before it first authenticates) and the full check
// (CheckAll, audit verify) report.
func TestCheckTokenAgainstItsIndexedRecord(t *testing.T) {
	mallory := newToken("latch_mallory", "mallory")
	tests := []struct {
		name  string
		forge func(kv store.KV, ts *tokenStore) error
		// check is the token CheckToken is given (read from the store).
		check func(ts *tokenStore) string
		// token: what CheckToken reports with the checkpoint as anchor;
		// unanchored: without it (nil: as token).
		token, unanchored []found
		all               []found
	}{
		{
			name:  "sound",
			forge: func(store.KV, *tokenStore) error { return nil },
			check: func(ts *tokenStore) string { return ts.alice.GetId() },
			token: []found{}, all: []found{},
		},
		{
			name:  "sound revoked",
			forge: func(store.KV, *tokenStore) error { return nil },
			check: func(ts *tokenStore) string { return ts.bob.GetId() },
			token: []found{}, all: []found{},
		},
		{
			name:  "planted without an index entry",
			forge: func(kv store.KV, _ *tokenStore) error { return plant(kv, mallory, -1) },
			check: func(*tokenStore) string { return mallory.GetId() },
			token: []found{{mallory.GetId(), store.MismatchUnjournaled}},
			all:   []found{{mallory.GetId(), store.MismatchUnjournaled}},
		},
		{
			name:  "planted with an index entry naming another token's record",
			forge: func(kv store.KV, ts *tokenStore) error { return plant(kv, mallory, ts.aliceAt) },
			check: func(*tokenStore) string { return mallory.GetId() },
			token: []found{{mallory.GetId(), store.MismatchUnjournaled}},
			all:   []found{{mallory.GetId(), store.MismatchUnjournaled}},
		},
		{
			name:  "planted with an index entry past the journal",
			forge: func(kv store.KV, _ *tokenStore) error { return plant(kv, mallory, 1<<40) },
			check: func(*tokenStore) string { return mallory.GetId() },
			token: []found{{mallory.GetId(), store.MismatchIndex}},
			all:   []found{{mallory.GetId(), store.MismatchUnjournaled}},
		},
		{
			name: "record edited",
			forge: func(kv store.KV, ts *tokenStore) error {
				x := proto.Clone(ts.alice).(*recordv1.AgentToken)
				x.Actor = "root"
				return storetest.Put(kv, "t/"+x.GetId(), x)
			},
			check: func(ts *tokenStore) string { return ts.alice.GetId() },
			token: []found{{"tok_" + newToken("latch_alice", "").GetSha256()[:12], store.MismatchRecord}},
			all:   []found{{"tok_" + newToken("latch_alice", "").GetSha256()[:12], store.MismatchRecord}},
		},
		{
			// A secret of the forger's own whose hash shares the 48 bits
			// the id holds (2^48 tries) swapped in: the record carries the
			// generated token's whole hash.
			name: "hash swapped within the id's 48 bits",
			forge: func(kv store.KV, ts *tokenStore) error {
				x := proto.Clone(ts.alice).(*recordv1.AgentToken)
				x.Sha256 = x.GetSha256()[:12] + strings.Repeat("0", 52)
				v, err := proto.Marshal(x)
				if err != nil {
					return err
				}
				return kv.Commit([]store.Write{{Key: []byte("t/" + x.GetId()), Value: v}, {Key: []byte("h/" + x.GetSha256()), Value: []byte(x.GetId())},
					{Key: []byte("h/" + ts.alice.GetSha256()), Delete: true}})
			},
			check: func(ts *tokenStore) string { return ts.alice.GetId() },
			token: []found{{newToken("latch_alice", "").GetId(), store.MismatchRecord}},
			all:   []found{{newToken("latch_alice", "").GetId(), store.MismatchRecord}},
		},
		{
			name: "hash index moved",
			forge: func(kv store.KV, ts *tokenStore) error {
				return kv.Commit([]store.Write{{Key: []byte("h/" + ts.alice.GetSha256()), Value: []byte(ts.bob.GetId())}})
			},
			check: func(ts *tokenStore) string { return ts.alice.GetId() },
			token: []found{{newToken("latch_alice", "").GetId(), store.MismatchIndex}},
			all:   []found{{newToken("latch_bob", "").GetId(), store.MismatchIndex}},
		},
		{
			// The limit of the one-token check: an index pointed back at
			// the record before the revocation, with the record edited
			// to match, agrees with the record it names. The full check
			// reads the whole journal and finds both.
			name: "revoked token restored, index pointed back",
			forge: func(kv store.KV, ts *tokenStore) error {
				x := proto.Clone(ts.bob).(*recordv1.AgentToken)
				x.RevokedAt, x.RevokedBy = nil, ""
				if err := storetest.Put(kv, "t/"+x.GetId(), x); err != nil {
					return err
				}
				return kv.Commit([]store.Write{{Key: []byte("tj/" + x.GetId()), Value: indexValue(ts.bobAt)}})
			},
			check: func(ts *tokenStore) string { return ts.bob.GetId() },
			token: []found{},
			all:   []found{{newToken("latch_bob", "").GetId(), store.MismatchRecord}},
		},
		{
			// A journal record forged in place of a checkpointed one,
			// with the token it carries planted to match: the inclusion
			// proof against the signed checkpoint refuses it. The state
			// check trusts journal leaves as stored (audit verify's
			// journal check reports the rewritten leaf).
			name: "journal record forged in place of a checkpointed one",
			forge: func(kv store.KV, ts *tokenStore) error {
				v, err := kv.Get([]byte(journalKey(ts.filler)))
				if err != nil {
					return err
				}
				data, err := journal.EncodeEntry(&recordv1.JournalEntry{Index: uint64(ts.filler), Kind: "token_created", Actor: "mallory", Token: store.JournaledToken(mallory)})
				if err != nil {
					return err
				}
				leaf := append(append([]byte(nil), v[:1+int(v[0])*32]...), data...)
				if err := kv.Commit([]store.Write{{Key: []byte(journalKey(ts.filler)), Value: leaf}}); err != nil {
					return err
				}
				return plant(kv, mallory, ts.filler)
			},
			check:      func(*tokenStore) string { return mallory.GetId() },
			token:      []found{{mallory.GetId(), store.MismatchProof}},
			unanchored: []found{},
			all:        []found{},
		},
	}
	for _, b := range storetest.Backends {
		for _, tt := range tests {
			t.Run(b.Name+"/"+tt.name, func(t *testing.T) {
				ts := buildTokenStore(t, b.New(t))
				kv := ts.open()
				if err := tt.forge(kv, ts); err != nil {
					t.Fatal(err)
				}
				kv.Close()
				s := storetest.OpenStore(t, ts.open())
				defer s.Close()
				anchor, err := journal.OpenCheckpoint(ts.checkpoint, ts.verifier)
				if err != nil {
					t.Fatal(err)
				}
				id := tt.check(ts)
				x, err := s.Token(id)
				if err != nil {
					t.Fatal(err)
				}
				check := func(what string, anchor *journal.Checkpoint, want []found) {
					t.Helper()
					err := s.CheckToken(x, anchor)
					var se *store.StateError
					got := []found{}
					switch {
					case errors.As(err, &se):
						got = summary(se.Mismatches)
						if !errors.Is(err, store.ErrStateMismatch) {
							t.Errorf("CheckToken(%s) %s = %v, want an error matching ErrStateMismatch", id, what, err)
						}
					case err != nil:
						t.Fatalf("CheckToken(%s) %s = %v", id, what, err)
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("CheckToken(%s) %s mismatches (-want +got):\n%s", id, what, diff)
					}
				}
				check("anchored", anchor, tt.token)
				unanchored := tt.unanchored
				if unanchored == nil {
					unanchored = tt.token
				}
				check("without a checkpoint", nil, unanchored)
				rep, err := s.CheckState(context.Background(), store.CheckAll)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.all, summary(rep.Mismatches)); diff != "" {
					t.Errorf("CheckAll mismatches (-want +got):\n%s\n%s", diff, rep)
				}
			})
		}
	}
}

// TestIndexTokensBuildsTheIndexOfAnOlderStore: a store written before the
// token journal index (no tj/, no marker) refuses to check a token until
// IndexTokens ran; IndexTokens reads the journal once and indexes every
// journaled token at its last record (bob at his revocation), leaves a
// planted token unindexed (so it is refused), and is one read the next time.
func TestIndexTokensBuildsTheIndexOfAnOlderStore(t *testing.T) {
	for _, b := range storetest.Backends {
		t.Run(b.Name, func(t *testing.T) { testIndexTokens(t, b.New(t)) })
	}
}

func testIndexTokens(t *testing.T, open func() store.KV) {
	ts := buildTokenStore(t, open)
	mallory := newToken("latch_mallory", "mallory")
	kv := ts.open()
	ws := []store.Write{{Key: []byte("m/tokens_indexed"), Delete: true}}
	for _, x := range []*recordv1.AgentToken{ts.alice, ts.bob} {
		ws = append(ws, store.Write{Key: []byte("tj/" + x.GetId()), Delete: true})
	}
	if err := kv.Commit(ws); err != nil {
		t.Fatal(err)
	}
	if err := plant(kv, mallory, -1); err != nil {
		t.Fatal(err)
	}
	kv.Close()

	s := storetest.OpenStore(t, ts.open())
	defer s.Close()
	rep, err := s.CheckState(context.Background(), store.CheckAll)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]found{{mallory.GetId(), store.MismatchUnjournaled}}, summary(rep.Mismatches)); diff != "" {
		t.Errorf("CheckAll before the index is built (-want +got):\n%s", diff)
	}
	if err := s.CheckToken(ts.alice, nil); !errors.Is(err, store.ErrTokensNotIndexed) {
		t.Errorf("CheckToken before IndexTokens = %v, want ErrTokensNotIndexed", err)
	}
	// The index is built for the journaled tokens; the planted one, which
	// no journal record carries, makes IndexTokens report the store as
	// disagreeing with its journal (the server does not serve from it).
	reason, n, err := s.IndexTokens(context.Background())
	if !errors.Is(err, store.ErrStateMismatch) || !strings.Contains(err.Error(), mallory.GetId()) || n != 2 || reason == "" {
		t.Fatalf("IndexTokens = %q, %d, %v; want 2 tokens indexed, why, and a state mismatch naming %s", reason, n, err, mallory.GetId())
	}
	for _, tc := range []struct {
		x  *recordv1.AgentToken
		at int64
	}{{ts.alice, ts.aliceAt}, {ts.bob, ts.bobAt + 1}} {
		if i, err := s.TokenJournalIndex(tc.x.GetId()); err != nil || i != tc.at {
			t.Errorf("TokenJournalIndex(%s) = %d, %v; want %d (its last journal record)", tc.x.GetId(), i, err, tc.at)
		}
		x, err := s.Token(tc.x.GetId())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CheckToken(x, nil); err != nil {
			t.Errorf("CheckToken(%s) after IndexTokens = %v", tc.x.GetId(), err)
		}
	}
	x, err := s.Token(mallory.GetId())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckToken(x, nil); !errors.Is(err, store.ErrStateMismatch) {
		t.Errorf("CheckToken(planted) after IndexTokens = %v, want ErrStateMismatch", err)
	}
	// A planted token makes the index look stale: the records written
	// since the index was built (none) are read again; the planted token
	// stays unindexed.
	if reason, n, err := s.IndexTokens(context.Background()); !errors.Is(err, store.ErrStateMismatch) || n != 0 || !strings.Contains(reason, mallory.GetId()) {
		t.Errorf("IndexTokens again = %q, %d, %v; want the journal's tail read again because of %s, no token in it, and the mismatch again", reason, n, err, mallory.GetId())
	}
	rep, err = s.CheckState(context.Background(), store.CheckAll)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]found{{mallory.GetId(), store.MismatchUnjournaled}}, summary(rep.Mismatches)); diff != "" {
		t.Errorf("CheckAll after the index is built (-want +got):\n%s", diff)
	}
}

// TestIndexTokensRepairsWhatAnOlderLatchLeft: on an indexed store, a sound
// index costs no journal read (the marker moves to the journal's end);
// after an older latch (a replica not yet upgraded) revoked a token and
// created another without indexing them, IndexTokens finds the index
// stale, reads the journal records written since the marker, and both
// tokens check (the full check agrees too).
func TestIndexTokensRepairsWhatAnOlderLatchLeft(t *testing.T) {
	ts := buildTokenStore(t, storetest.Backends[0].New(t))
	s := storetest.OpenStore(t, ts.open())
	if reason, n, err := s.IndexTokens(context.Background()); reason != "" || n != 0 || err != nil {
		t.Errorf("IndexTokens on a sound indexed store = %q, %d, %v; want nothing to do", reason, n, err)
	}
	carol := newToken("latch_carol", "carol")
	a := proto.Clone(ts.alice).(*recordv1.AgentToken)
	a.RevokedAt, a.RevokedBy = timestamppb.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), "ops"
	var aliceRevoked, carolAt int64
	err := s.Update(context.Background(), func(tx *store.Tx) error {
		var err error
		if aliceRevoked, err = putToken(tx, a, "token_revoked"); err != nil {
			return err
		}
		carolAt, err = putToken(tx, carol, "token_created")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// What the older latch would have left: no entry for carol, alice's
	// still naming her token_created record.
	kv := ts.open()
	if err := kv.Commit([]store.Write{{Key: []byte("tj/" + carol.GetId()), Delete: true}, {Key: []byte("tj/" + a.GetId()), Value: indexValue(ts.aliceAt)}}); err != nil {
		t.Fatal(err)
	}
	kv.Close()
	s = storetest.OpenStore(t, ts.open())
	defer s.Close()
	reason, n, err := s.IndexTokens(context.Background())
	if err != nil || reason == "" || n != 2 {
		t.Fatalf("IndexTokens after an older latch wrote = %q, %d, %v; want the 2 tokens it journaled indexed", reason, n, err)
	}
	for _, tc := range []struct {
		id string
		at int64
	}{{a.GetId(), aliceRevoked}, {carol.GetId(), carolAt}} {
		if i, err := s.TokenJournalIndex(tc.id); err != nil || i != tc.at {
			t.Errorf("TokenJournalIndex(%s) = %d, %v; want %d", tc.id, i, err, tc.at)
		}
		x, err := s.Token(tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CheckToken(x, nil); err != nil {
			t.Errorf("CheckToken(%s) after the rebuild = %v", tc.id, err)
		}
	}
	rep, err := s.CheckState(context.Background(), store.CheckAll)
	if err != nil || !rep.OK() {
		t.Errorf("CheckAll after the rebuild = %v, %v; want ok", rep, err)
	}
}

// TestCheckAllTokensJournaledAfterTheRead: the background pass reads the
// journal first and the tokens later; a token created, or revoked, after
// the journal was read is checked again through its index, not reported
// (which stopped the control plane), while a planted token still is.
func TestCheckAllTokensJournaledAfterTheRead(t *testing.T) {
	ts := buildTokenStore(t, storetest.Backends[0].New(t))
	mallory := newToken("latch_mallory", "mallory")
	kv := ts.open()
	if err := plant(kv, mallory, -1); err != nil {
		t.Fatal(err)
	}
	kv.Close()
	s := storetest.OpenStore(t, ts.open())
	defer s.Close()
	read := s.JournalSize() // the journal as the pass read it
	carol := newToken("latch_carol", "carol")
	err := s.Update(context.Background(), func(tx *store.Tx) error {
		if _, err := putToken(tx, carol, "token_created"); err != nil {
			return err
		}
		a := proto.Clone(ts.alice).(*recordv1.AgentToken)
		a.RevokedAt, a.RevokedBy = timestamppb.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), "ops"
		_, err := putToken(tx, a, "token_revoked")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.CheckAllFrom(context.Background(), func(fn func(int64, []byte, bool) bool) error {
		for i := range read {
			b, err := s.JournalEntry(i)
			if err != nil {
				return err
			}
			if !fn(i, b, true) {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]found{{mallory.GetId(), store.MismatchUnjournaled}}, summary(rep.Mismatches)); diff != "" {
		t.Errorf("CheckAll over the journal read before carol was created and alice revoked (-want +got):\n%s\n%s", diff, rep)
	}
}

// BenchmarkCheckToken is what a stored token costs at its first use after
// a start (once per token and process): the token journal index, its
// journal record, the hash index and the inclusion proof against a signed
// checkpoint of a 2^16-record journal (Badger). Without the proof it is a
// few reads ("unanchored").
func BenchmarkCheckToken(b *testing.B) {
	_, s := openBadger(b, b.TempDir())
	defer s.Close()
	skey, vkey, err := journal.GenerateKey("test/tokens")
	if err != nil {
		b.Fatal(err)
	}
	signer, err := journal.NewSigner(skey)
	if err != nil {
		b.Fatal(err)
	}
	x := newToken("latch_alice", "alice")
	const n = 1 << 16
	for lo := 0; lo < n; lo += 500 {
		err := s.Update(context.Background(), func(tx *store.Tx) error {
			if lo == 500*(n/1000) {
				if _, err := putToken(tx, x, "token_created"); err != nil {
					return err
				}
			}
			for range 500 {
				if _, err := tx.Append(&recordv1.JournalEntry{Kind: "key_created", Reason: "filler"}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	var note []byte
	if err := s.Update(context.Background(), func(tx *store.Tx) error {
		size, root, err := tx.TreeHash()
		if err != nil {
			return err
		}
		note, err = signer.Sign(size, root, time.Now())
		tx.PutCheckpoint(size, note)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	anchor, err := journal.OpenCheckpoint(note, vkey)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name   string
		anchor *journal.Checkpoint
	}{{"anchored", anchor}, {"unanchored", nil}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := s.CheckToken(x, bc.anchor); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
