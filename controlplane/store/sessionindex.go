package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/journal"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// The session journal index: sj/<session id> is the journal index (8
// bytes, big endian) of the session's last journal record, written by
// Tx.Append in the same commit as every journal record that carries the
// session. CheckSession holds a stored session against the record it
// names before the session rule lets a call proceed on it, so a session
// edited into authorized by hand is not honoured on a store of any size,
// even before the background CheckAll reaches it (a large store serves
// first). m/sessions_indexed (8 bytes, the journal size it was built at)
// says the index exists: it is written with a store's first journal
// record; a store written before the index gets it from IndexSessions, at
// start, reading the journal once.
func sessionJournalKey(id string) []byte { return []byte("sj/" + id) }

var sessionsIndexedKey = []byte("m/sessions_indexed")

// SessionJournalIndex returns the journal index sj/<id> names (the
// session's last journal record), or ErrNotFound.
func (s *Store) SessionJournalIndex(id string) (int64, error) {
	return decodeIndex(s.kv.Get(sessionJournalKey(id)))
}

// ErrSessionsNotIndexed is returned by CheckSession on a store whose
// session journal index was never built (IndexSessions).
var ErrSessionsNotIndexed = errors.New("store: the session journal index is not built yet (IndexSessions builds it at start)")

// indexSession keeps sj/ when Append adds journal record n.
func (t *Tx) indexSession(e *recordv1.JournalEntry, n int64) {
	if n == 0 {
		t.set(sessionsIndexedKey, binary.BigEndian.AppendUint64(nil, 0))
	}
	if id := e.GetSession().GetId(); id != "" {
		t.set(sessionJournalKey(id), binary.BigEndian.AppendUint64(nil, uint64(n)))
	}
}

// CheckSession checks one stored session x against the journal record its
// session journal index names: the record exists and carries this session
// as stored (all but last_seen_at), and, when anchor (the newest signed
// checkpoint; nil: none) covers the record, the record is included in the
// anchor's tree, as CheckToken proves a token's. It returns a *StateError
// (ErrStateMismatch) or nil, ErrSessionsNotIndexed, or another error when
// the store cannot be read. A disagreement seen by the plain reads is
// confirmed in the writer (an authorization writes S/ and sj/ together and
// may land between two reads). Like CheckToken it cannot see whether sj/
// names the session's last record (an index pointed back at the
// session_authorized record of a session since revoked, with S/ edited to
// match): that takes the whole journal, which CheckAll reads.
func (s *Store) CheckSession(x *recordv1.Session, anchor *journal.Checkpoint) error {
	id := x.GetId()
	return confirmInWriter(s, id, "S/"+id, "the agent session's record is gone", x,
		func(get getter) (*recordv1.Session, error) { return decodeSession(get(sessionKey(id))) },
		func(get getter, x *recordv1.Session) ([]Mismatch, error) { return s.checkSession(get, id, x, anchor) })
}

// checkSession is CheckSession on one view of the store.
func (s *Store) checkSession(get getter, id string, x *recordv1.Session, anchor *journal.Checkpoint) ([]Mismatch, error) {
	var out []Mismatch
	add := func(idx int64, key string, kind MismatchKind, format string, args ...any) {
		out = append(out, Mismatch{ExecutionID: id, JournalIndex: idx, Key: key, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	idx, err := decodeIndex(get(sessionJournalKey(id)))
	switch {
	case errors.Is(err, ErrNotFound):
		if _, merr := get(sessionsIndexedKey); errors.Is(merr, ErrNotFound) && s.JournalSize() > 0 {
			return nil, ErrSessionsNotIndexed
		}
		add(-1, "sj/"+id, MismatchUnjournaled, "no journal record of this agent session is indexed: a session is stored that no journal record started: it was not made by this control plane (planted?)")
		return out, nil
	case err != nil:
		add(-1, "sj/"+id, MismatchIndex, "%v", err)
		return out, nil
	}
	v, err := get(journalKey(idx))
	if errors.Is(err, ErrNotFound) {
		add(idx, "sj/"+id, MismatchIndex, "the session journal index names journal record %d, which does not exist", idx)
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	_, data, ok := decodeLeaf(v)
	e := &recordv1.JournalEntry{}
	switch {
	case !ok || proto.Unmarshal(data, e) != nil || e.GetIndex() != uint64(idx):
		add(idx, string(journalKey(idx)), MismatchIndex, "journal record %d, which the session journal index names, is malformed or does not decode as record %d", idx, idx)
		return out, nil
	case e.GetSession().GetId() != id:
		add(idx, "sj/"+id, MismatchUnjournaled, "the session journal index names journal record %d, which is not a record of this agent session: no journal record started it (planted?)", idx)
		return out, nil
	case x.GetId() != id || !sameSession(x, e.GetSession()):
		add(idx, "S/"+id, MismatchRecord, "the agent session differs from its journal record %d in %s", idx, sessionDiff(x, e.GetSession()))
	}
	if anchor != nil && idx < anchor.Size {
		p, err := tlog.ProveRecord(anchor.Size, idx, hashReader(get))
		if err == nil {
			err = tlog.CheckRecord(p, anchor.Size, anchor.Root, idx, journal.LeafHash(data))
		}
		if err != nil {
			add(idx, string(journalKey(idx)), MismatchProof, "journal record %d is not the record the signed checkpoint of tree size %d holds (%v): the journal was rewritten", idx, anchor.Size, err)
		}
	}
	return out, nil
}

// SessionIndexBuilt reports whether the store has a session journal index,
// or nothing journaled yet.
func (s *Store) SessionIndexBuilt() (bool, error) {
	_, err := s.kv.Get(sessionsIndexedKey)
	if errors.Is(err, ErrNotFound) {
		return s.JournalSize() == 0, nil
	}
	return err == nil, err
}

// IndexSessions builds the session journal index of a store written before
// it: it reads the whole journal once (decoding only the records that carry
// a session) and writes sj/ for each session's last record and the marker.
// On a store that has the index it does nothing: this latch's own Appends
// keep it. Only this latch's own updates may write the store meanwhile
// (they index themselves). It returns how many sessions it indexed.
func (s *Store) IndexSessions(ctx context.Context) (int, error) {
	if built, err := s.SessionIndexBuilt(); err != nil || built {
		return 0, err
	}
	size := s.JournalSize()
	last, err := s.lastRecords(ctx, 0, size, journalEntrySession, func(e *recordv1.JournalEntry) string { return e.GetSession().GetId() })
	if err != nil {
		return 0, fmt.Errorf("store: index the sessions' journal records: %w", err)
	}
	err = s.Update(ctx, func(tx *Tx) error {
		for id, i := range last {
			// A session journaled since the scan indexed itself (Append).
			if cur, err := decodeIndex(tx.get(sessionJournalKey(id))); err == nil && cur >= size {
				continue
			}
			tx.set(sessionJournalKey(id), binary.BigEndian.AppendUint64(nil, uint64(i)))
		}
		tx.set(sessionsIndexedKey, binary.BigEndian.AppendUint64(nil, uint64(size)))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: index the sessions' journal records: %w", err)
	}
	return len(last), nil
}
