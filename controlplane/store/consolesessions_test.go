package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/testing/storetest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// openConsoleSession opens a console session of key as the console does:
// its operator_signed_in record and its row in one transaction.
func openConsoleSession(t *testing.T, s *store.Store, key, operator string, at time.Time, ttl time.Duration) *recordv1.ConsoleSession {
	t.Helper()
	id := store.ConsoleSessionID(key)
	cred := &recordv1.OperatorCredential{Operator: operator, Kind: "sign_in_link", ConsoleSession: id}
	var x *recordv1.ConsoleSession
	err := s.Update(t.Context(), func(tx *store.Tx) error {
		n, err := tx.Append(&recordv1.JournalEntry{Time: timestamppb.New(at), EntryKind: store.KindConsoleSignedIn, Actor: operator, Credential: cred})
		if err != nil {
			return err
		}
		x = &recordv1.ConsoleSession{Id: id, KeySha256: key, Credential: cred, OpenedAt: timestamppb.New(at), ExpiresAt: timestamppb.New(at.Add(ttl)), JournalIndex: n}
		return tx.PutConsoleSession(x)
	})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func hexKey(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestConsoleSessions: a console session is kept in the store, so it
// survives the store being closed and opened again (a restart) and is seen
// by every store on the same backend (PostgreSQL: every replica); only the
// hash of its key is kept; a row no journal record opened, or one changed
// after, is refused; sign-out and pruning forget it.
func TestConsoleSessions(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, b := range storetest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			open := b.New(t)
			s := storetest.OpenStore(t, open())
			alice := openConsoleSession(t, s, hexKey("cookie-alice"), "alice", at, time.Hour)
			openConsoleSession(t, s, hexKey("cookie-old"), "old", at.Add(-2*time.Hour), time.Hour)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			s = storetest.OpenStore(t, open())
			t.Cleanup(func() { s.Close() })
			got, err := s.ConsoleSession(hexKey("cookie-alice"))
			if err != nil || !proto.Equal(got, alice) {
				t.Fatalf("ConsoleSession after reopening = %v, %v; want alice's", got, err)
			}
			if _, err := s.ConsoleSession(hexKey("cookie-nobody")); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("ConsoleSession of an unknown key = %v, want ErrNotFound", err)
			}
			all, _ := s.ConsoleSessions()
			for _, x := range all {
				raw, _ := proto.Marshal(x)
				if strings.Contains(string(raw), "cookie-alice") {
					t.Error("a stored console session holds its cookie")
				}
			}

			// A planted row (no journal record opened it) and a changed
			// one (another operator) are refused.
			plant := func(x *recordv1.ConsoleSession) {
				t.Helper()
				if err := s.Update(t.Context(), func(tx *store.Tx) error { return tx.PutConsoleSession(x) }); err != nil {
					t.Fatal(err)
				}
			}
			planted := proto.Clone(alice).(*recordv1.ConsoleSession)
			planted.KeySha256 = hexKey("cookie-mallory")
			planted.Id = store.ConsoleSessionID(planted.GetKeySha256())
			planted.Credential.ConsoleSession = planted.Id
			plant(planted)
			if _, err := s.ConsoleSession(planted.GetKeySha256()); !errors.Is(err, store.ErrConsoleSessionForged) {
				t.Errorf("ConsoleSession of a planted row = %v, want ErrConsoleSessionForged", err)
			}
			changed := proto.Clone(alice).(*recordv1.ConsoleSession)
			changed.Credential.Operator = "mallory"
			plant(changed)
			if _, err := s.ConsoleSession(alice.GetKeySha256()); !errors.Is(err, store.ErrConsoleSessionForged) {
				t.Errorf("ConsoleSession of a changed row = %v, want ErrConsoleSessionForged", err)
			}
			plant(alice)

			// Pruning forgets the ended ones (old's); sign-out forgets one.
			left, err := s.PruneConsoleSessions(t.Context(), at.Add(time.Minute))
			if err != nil || left != 2 { // alice's and the planted one
				t.Errorf("PruneConsoleSessions = %d, %v; want 2 left", left, err)
			}
			if _, err := s.ConsoleSession(hexKey("cookie-old")); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("ConsoleSession of an ended session after pruning = %v, want ErrNotFound", err)
			}
			if err := s.Update(t.Context(), func(tx *store.Tx) error { tx.DeleteConsoleSession(alice.GetId()); return nil }); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ConsoleSession(alice.GetKeySha256()); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("ConsoleSession after sign-out = %v, want ErrNotFound", err)
			}
		})
	}
}
