package store

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Console sign-in sessions (controlplane/console) are kept here, in the
// store every replica shares (PostgreSQL in HA), so that a session
// survives a restart and works on whichever replica is active. A session
// is a secret: only the SHA-256 of its key (the browser's cookie) is kept,
// under cs/ID, where ID is named by the hash of that hash, so the id the
// journal records does not reveal the stored hash either.
//
// Integrity, as for tokens: a row is live only while the journal record
// that opened it (ConsoleSession.journal_index, kind operator_signed_in)
// names the same id, credential and opening time; a row planted without
// one, or changed after, signs nobody in (ErrConsoleSessionForged). The
// expiry cannot be stretched by editing the row either: the console also
// bounds a session by its opening time plus its own TTL.

// ErrConsoleSessionForged: a console session row is not the one its
// journal record opened.
var ErrConsoleSessionForged = errors.New("store: the console session does not match the journal record that opened it")

func consoleSessionKey(id string) []byte { return []byte("cs/" + id) }

// ConsoleSessionID is the id of the console session whose key hashes to
// keySHA256 (hex): "cs_" and the first 26 hex digits of its SHA-256.
func ConsoleSessionID(keySHA256 string) string {
	sum := sha256.Sum256([]byte(keySHA256))
	return "cs_" + hex.EncodeToString(sum[:])[:26]
}

// PutConsoleSession keeps x (opened by the journal record x.journal_index,
// appended in the same transaction).
func (t *Tx) PutConsoleSession(x *recordv1.ConsoleSession) error {
	if x.GetId() == "" || x.GetId() != ConsoleSessionID(x.GetKeySha256()) {
		return errors.New("store: console session without its id or key hash")
	}
	data, err := proto.Marshal(x)
	if err != nil {
		return fmt.Errorf("store: encode console session: %w", err)
	}
	t.set(consoleSessionKey(x.GetId()), data)
	return nil
}

// DeleteConsoleSession forgets the console session id (signed out).
func (t *Tx) DeleteConsoleSession(id string) { t.del(consoleSessionKey(id)) }

// ConsoleSession is the console session whose key hashes to keySHA256,
// checked against the journal record that opened it; ErrNotFound when
// there is none, ErrConsoleSessionForged when the row is not what its
// record opened.
func (s *Store) ConsoleSession(keySHA256 string) (*recordv1.ConsoleSession, error) {
	id := ConsoleSessionID(keySHA256)
	v, err := s.kv.Get(consoleSessionKey(id))
	if err != nil {
		return nil, err
	}
	return s.openedConsoleSession(id, keySHA256, v)
}

// openedConsoleSession is the console session row v stored under id,
// checked against the journal record that opened it (ConsoleSession; the
// state check's checkRows holds every row so).
func (s *Store) openedConsoleSession(id, keySHA256 string, v []byte) (*recordv1.ConsoleSession, error) {
	x := &recordv1.ConsoleSession{}
	if err := proto.Unmarshal(v, x); err != nil {
		return nil, fmt.Errorf("%w: %s does not decode: %w", ErrConsoleSessionForged, id, err)
	}
	if x.GetId() != id || subtle.ConstantTimeCompare([]byte(x.GetKeySha256()), []byte(keySHA256)) != 1 {
		return nil, fmt.Errorf("%w: %s is stored under another key", ErrConsoleSessionForged, id)
	}
	data, err := s.JournalEntry(x.GetJournalIndex())
	if err != nil {
		return nil, fmt.Errorf("%w: %s names journal record %d, which cannot be read: %w", ErrConsoleSessionForged, id, x.GetJournalIndex(), err)
	}
	e, err := journal.DecodeEntry(data)
	if err != nil || lifecycle.EntryKindOf(e) != KindConsoleSignedIn || e.GetCredential().GetConsoleSession() != id ||
		!proto.Equal(e.GetCredential(), x.GetCredential()) || !e.GetTime().AsTime().Equal(x.GetOpenedAt().AsTime()) {
		return nil, fmt.Errorf("%w: %s (journal record %d)", ErrConsoleSessionForged, id, x.GetJournalIndex())
	}
	return x, nil
}

// KindConsoleSignedIn is the journal kind of the record that opens a
// console session (the console's KindSignedIn).
const KindConsoleSignedIn = recordv1.EntryKind_ENTRY_KIND_OPERATOR_SIGNED_IN

// PruneConsoleSessions forgets the console sessions that ended before
// now and returns how many are left; the caller passes the time.
func (s *Store) PruneConsoleSessions(ctx context.Context, now time.Time) (int, error) {
	var expired []string
	left := 0
	err := s.kv.Scan([]byte("cs/"), false, func(k, v []byte) bool {
		x := &recordv1.ConsoleSession{}
		if proto.Unmarshal(v, x) != nil || !now.Before(x.GetExpiresAt().AsTime()) {
			expired = append(expired, string(k[len("cs/"):]))
		} else {
			left++
		}
		return true
	})
	if err != nil || len(expired) == 0 {
		return left, err
	}
	return left, s.Update(ctx, func(tx *Tx) error {
		for _, id := range expired {
			tx.DeleteConsoleSession(id)
		}
		return nil
	})
}

// ConsoleSessions are the console sessions kept, unchecked (ConsoleSession
// checks one), in id order.
func (s *Store) ConsoleSessions() ([]*recordv1.ConsoleSession, error) {
	return scanDecoded(s.kv, "cs/", func(v []byte, err error) (*recordv1.ConsoleSession, error) {
		if err != nil {
			return nil, err
		}
		x := &recordv1.ConsoleSession{}
		return x, proto.Unmarshal(v, x)
	})
}
