package store

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Session records against their journal.
//
// Every agent session record S/<id> must be the session its last journal
// record (session_started, session_authorized, session_revoked,
// session_ended, session_orphaned) carries, but for last_seen_at, which is
// moved without a journal record. The session rule decides from S/ (an
// authorized session's calls proceed without an operator), so a session
// planted by hand, or one flipped from revoked back to authorized, or one
// whose authorizer was renamed, is a store that disagrees with its journal.
// CheckAll holds every S/ against the journal (checkSessions), and the
// session rule holds an authorized session against the record its session
// journal index names before a call proceeds on it (CheckSession,
// sessionindex.go).

// journaledSession is the last journal record of one session, as the
// journal pass keeps it.
type journaledSession struct {
	index   int64
	session *recordv1.Session
}

// sameSession reports whether a stored session is what its journal record
// says: every field but last_seen_at.
func sameSession(stored, journaled *recordv1.Session) bool {
	a := proto.Clone(stored).(*recordv1.Session)
	b := proto.Clone(journaled).(*recordv1.Session)
	a.LastSeenAt, b.LastSeenAt = nil, nil
	return proto.Equal(a, b)
}

// SameSession reports whether two session records agree in everything but
// last_seen_at (which moves without a journal record).
func SameSession(a, b *recordv1.Session) bool { return sameSession(a, b) }

// sessionDiff names the fields that decide in which a and b differ.
func sessionDiff(stored, journaled *recordv1.Session) string {
	var out []string
	if stored.GetState() != journaled.GetState() {
		out = append(out, fmt.Sprintf("state (stored %s, journal %s)", stored.GetState(), journaled.GetState()))
	}
	if stored.GetAuthorizedBy() != journaled.GetAuthorizedBy() {
		out = append(out, fmt.Sprintf("authorized_by (stored %q, journal %q)", stored.GetAuthorizedBy(), journaled.GetAuthorizedBy()))
	}
	if stored.GetActor() != journaled.GetActor() {
		out = append(out, "actor")
	}
	if stored.GetTrusted() != journaled.GetTrusted() {
		out = append(out, "trusted")
	}
	if len(out) == 0 {
		return "other fields"
	}
	return fmt.Sprint(out)
}

// checkSessions holds every S/ against the sessions the journal records
// (journaled: the last session record of each id, from the first size
// journal records). On a store being written (CheckAllLive) a session
// journaled after those records disagrees with them: a disagreement is
// looked at again with the journal records appended since (read plainly,
// then, for what still disagrees, in the writer, where nothing commits
// between the reads), and only a confirmed one is reported.
func (s *Store) checkSessions(ctx context.Context, journaled map[string]journaledSession, size int64, add func(id string, idx int64, key string, kind MismatchKind, format string, args ...any)) (int, error) {
	n := 0
	var differ []string
	seen := map[string]bool{}
	err := s.kv.Scan([]byte("S/"), false, func(k, v []byte) bool {
		n++
		id := string(k[2:])
		seen[id] = true
		j, ok := journaled[id]
		if len(sessionMismatches(id, v, nil, j, ok)) > 0 {
			differ = append(differ, id)
		}
		return ctx.Err() == nil
	})
	if err != nil {
		return n, fmt.Errorf("store: state check: read sessions: %w", err)
	}
	for id := range journaled {
		if !seen[id] {
			differ = append(differ, id)
		}
	}
	// sj/ names a record of its session (its last: Append writes it with
	// every session record; S/ is held against the last record above).
	err = s.kv.Scan([]byte("sj/"), false, func(k, v []byte) bool {
		id := string(k[3:])
		i, err := decodeIndex(v, nil)
		if err != nil {
			add(id, -1, "sj/"+id, MismatchIndex, "%v", err)
			return true
		}
		if e, err := entryAt(s.kv.Get, i); err != nil || e.GetSession().GetId() != id {
			add(id, i, "sj/"+id, MismatchIndex, "the session journal index names journal record %d, which is not a record of this agent session", i)
		}
		return ctx.Err() == nil
	})
	if err != nil {
		return n, fmt.Errorf("store: state check: read the session journal index: %w", err)
	}
	if len(differ) == 0 {
		return n, ctx.Err()
	}
	sort.Strings(differ)
	ms, upTo, err := s.confirmSessions(s.kv.Get, differ, journaled, size, s.JournalSize())
	if err != nil {
		return n, err
	}
	if len(ms) > 0 && s.JournalSize() > upTo {
		uerr := s.Update(ctx, func(tx *Tx) error {
			ms, _, err = s.confirmSessions(tx.get, differ, journaled, upTo, tx.size)
			return err
		})
		if uerr != nil && !errors.Is(uerr, ErrClosed) {
			return n, uerr
		}
	}
	for _, m := range ms {
		add(m.ExecutionID, m.JournalIndex, m.Key, m.Kind, "%s", m.Detail)
	}
	return n, ctx.Err()
}

// confirmSessions folds the session records of journal records from..to
// into journaled (which it updates) and checks each of ids again on get.
// It returns the mismatches and to.
func (s *Store) confirmSessions(get getter, ids []string, journaled map[string]journaledSession, from, to int64) ([]Mismatch, int64, error) {
	for i := from; i < to; i++ {
		v, err := get(journalKey(i))
		if errors.Is(err, ErrNotFound) {
			continue // the journal check reports gaps
		}
		if err != nil {
			return nil, to, fmt.Errorf("store: state check: read journal record %d: %w", i, err)
		}
		_, data, ok := decodeLeaf(v)
		if !ok || !carriesField(data, journalEntrySession) {
			continue
		}
		e := &recordv1.JournalEntry{}
		if proto.Unmarshal(data, e) == nil && e.GetSession().GetId() != "" {
			journaled[e.GetSession().GetId()] = journaledSession{index: i, session: e.GetSession()}
		}
	}
	var out []Mismatch
	for _, id := range ids {
		v, err := get(sessionKey(id))
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, to, fmt.Errorf("store: state check: read session %s: %w", id, err)
		}
		j, ok := journaled[id]
		out = append(out, sessionMismatches(id, v, err, j, ok)...)
	}
	return out, to, nil
}

// sessionMismatches checks one stored session (v, err: its S/ read)
// against its last journal record (j; ok false: none).
func sessionMismatches(id string, v []byte, err error, j journaledSession, ok bool) []Mismatch {
	m := func(idx int64, kind MismatchKind, format string, args ...any) []Mismatch {
		return []Mismatch{{ExecutionID: id, JournalIndex: idx, Key: "S/" + id, Kind: kind, Detail: fmt.Sprintf(format, args...)}}
	}
	if errors.Is(err, ErrNotFound) {
		if !ok {
			return nil
		}
		return m(j.index, MismatchMissing, "the journal records this agent session (last at journal record %d) but its record is gone", j.index)
	}
	x, err := decodeSession(v, err)
	switch {
	case !ok:
		return m(-1, MismatchUnjournaled, "an agent session is stored (%s) that no journal record started: it was not made by this control plane (planted?)", x.GetState())
	case err != nil:
		return m(j.index, MismatchRecord, "%v", err)
	case x.GetId() != id || !sameSession(x, j.session):
		return m(j.index, MismatchRecord, "the agent session differs from its last journal record (journal record %d) in %s", j.index, sessionDiff(x, j.session))
	}
	return nil
}

// journalEntrySession is the field number of JournalEntry.session.
var journalEntrySession = (&recordv1.JournalEntry{}).ProtoReflect().Descriptor().Fields().ByName("session").Number()
