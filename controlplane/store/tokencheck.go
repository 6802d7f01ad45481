package store

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/journal"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Token records against their journal.
//
// Every token record t/<id> must be the token its last journal record
// (token_created, token_migrated, token_revoked) carries, but for the two
// fields the journal never holds: sha256 (journal records leave it out)
// and last_used_at (moved without a journal record); its id must be the
// one its hash names ("tok_" + the first 12 hex digits), the hash index
// h/<sha256> must point at the token carrying that hash, and the token
// journal index tj/<id> must name a journal record of that token (its
// last, unless a latch without the index journaled the token since:
// IndexTokens catches up at start).
//
// Two checks hold this. CheckAll (checkTokens, with the rest of the state)
// reads the whole journal and compares each token with its last record.
// CheckToken checks one token through tj/ alone, a few reads whatever the
// journal's size: the tokens service runs it before a stored token first
// authenticates anybody, so a token planted in a stopped store (a t/ and
// h/ written by hand, with or without a tj/ entry naming some record)
// never authenticates, on a store of any size, even before the background
// CheckAll reaches it. When the record tj/ names lies inside the newest
// signed checkpoint (the caller's anchor: the store's newest, or the
// checkpoint copy's when it covers more), CheckToken also proves its
// inclusion in that tree (O(log n) stored hashes): a journal record
// forged in place of a checkpointed one does not authenticate either. A
// record appended past the anchor has nothing to be proven against (and
// the next checkpoint signs it). What CheckToken cannot
// see is whether tj/ names the token's last record (an index pointed back
// at the token_created record of a token since revoked, with t/ edited to
// match): that takes the whole journal, which CheckAll reads.

// MismatchProof: a journal record is not the one the newest signed
// checkpoint's tree holds at its index (the record or the tree's stored
// hashes were rewritten), or that checkpoint does not verify.
const MismatchProof MismatchKind = "journal_proof"

// ErrTokensNotIndexed is returned by CheckToken on a store whose token
// journal index was never built (IndexTokens).
var ErrTokensNotIndexed = errors.New("store: the token journal index is not built yet (the control plane builds it while it starts serving a store written before it); retry shortly")

// sameToken reports whether a stored token is what its journal record says:
// every field but the coarse last use, and the hash when the record carries
// it (JournaledToken; older records and imported tokens do not).
func sameToken(stored, journaled *recordv1.AgentToken) bool {
	if journaled.GetSha256() != "" && journaled.GetSha256() != stored.GetSha256() {
		return false
	}
	a := proto.Clone(stored).(*recordv1.AgentToken)
	b := proto.Clone(journaled).(*recordv1.AgentToken)
	a.Sha256, a.LastUsedAt, b.Sha256, b.LastUsedAt = "", nil, "", nil
	return proto.Equal(a, b)
}

// CheckToken checks one stored token x against the journal record its
// token journal index names: the record exists and carries this token
// (sameToken), the token's hash names its id, h/ points back at it, and,
// when anchor (the newest signed checkpoint, opened with the journal's
// verifier; nil: none) covers the record, the record is included in the
// anchor's tree. It returns a *StateError (ErrStateMismatch) or nil, or
// another error when the store cannot be read. A disagreement seen by the
// plain reads is confirmed in the writer (a commit may land between two
// reads: a revocation writes t/ and tj/ together), so only a confirmed one
// is reported.
func (s *Store) CheckToken(x *recordv1.AgentToken, anchor *journal.Checkpoint) error {
	id := x.GetId()
	return confirmInWriter(s, id, "t/"+id, "the token's record is gone", x,
		func(get getter) (*recordv1.AgentToken, error) { return decodeToken(get(tokenKey(id))) },
		func(get getter, x *recordv1.AgentToken) ([]Mismatch, error) { return s.checkToken(get, id, x, anchor) })
}

// confirmInWriter checks record x (of id, stored at key) on the store as
// read and, when that finds a mismatch, once more inside the single writer
// with the record as the writer sees it (load): a record written between two
// reads is no forgery, so only a mismatch the writer's view shows too is
// reported. A record the writer no longer finds is reported missing (gone
// says what); with no writer (the store closed) what was read is reported.
func confirmInWriter[T any](s *Store, id, key, gone string, x T, load func(getter) (T, error), check func(getter, T) ([]Mismatch, error)) error {
	ms, err := check(s.kv.Get, x)
	if err != nil || len(ms) == 0 {
		return err
	}
	uerr := s.Update(context.Background(), func(tx *Tx) error {
		cx, err := load(tx.get)
		switch {
		case errors.Is(err, ErrNotFound):
			ms = []Mismatch{{ExecutionID: id, JournalIndex: -1, Key: key, Kind: MismatchMissing, Detail: gone}}
			return nil
		case err != nil:
			return err
		}
		ms, err = check(tx.get, cx)
		return err
	})
	switch {
	case errors.Is(uerr, ErrClosed): // no writer to ask: report what was read
	case uerr != nil:
		return uerr
	}
	return stateErr(ms)
}

// checkToken is CheckToken on one view of the store.
func (s *Store) checkToken(get getter, id string, x *recordv1.AgentToken, anchor *journal.Checkpoint) ([]Mismatch, error) {
	var out []Mismatch
	add := func(idx int64, key string, kind MismatchKind, format string, args ...any) {
		out = append(out, Mismatch{ExecutionID: id, JournalIndex: idx, Key: key, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	sum := x.GetSha256()
	if x.GetId() != id || len(sum) < 12 || "tok_"+sum[:12] != id {
		add(-1, "t/"+id, MismatchRecord, "the token's hash does not name its id")
		return out, nil
	}
	switch v, err := get(tokenHashKey(sum)); {
	case errors.Is(err, ErrNotFound):
		add(-1, "h/"+sum, MismatchIndex, "the token hash index has no entry for this token")
	case err != nil:
		return nil, err
	case string(v) != id:
		add(-1, "h/"+sum, MismatchIndex, "the token hash index points at %s, not at this token", v)
	}
	idx, err := decodeIndex(get(tokenJournalKey(id)))
	switch {
	case errors.Is(err, ErrNotFound):
		if _, merr := get(tokensIndexedKey); errors.Is(merr, ErrNotFound) && s.JournalSize() > 0 {
			return nil, ErrTokensNotIndexed
		} // with an empty journal no record can have made the token: unjournaled
		add(-1, "tj/"+id, MismatchUnjournaled, "no journal record of this token is indexed: a token is stored that no journal record created: it was not made by this control plane (planted?)")
		return out, nil
	case err != nil:
		add(-1, "tj/"+id, MismatchIndex, "%v", err)
		return out, nil
	}
	key := string(journalKey(idx))
	v, err := get(journalKey(idx))
	if errors.Is(err, ErrNotFound) {
		add(idx, "tj/"+id, MismatchIndex, "the token journal index names journal record %d, which does not exist", idx)
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	_, data, ok := decodeLeaf(v)
	e := &recordv1.JournalEntry{}
	switch {
	case !ok:
		add(idx, key, MismatchIndex, "journal record %d, which the token journal index names, is malformed", idx)
		return out, nil
	case proto.Unmarshal(data, e) != nil || e.GetIndex() != uint64(idx):
		add(idx, key, MismatchIndex, "journal record %d, which the token journal index names, does not decode as record %d", idx, idx)
		return out, nil
	case e.GetToken().GetId() != id:
		add(idx, "tj/"+id, MismatchUnjournaled, "the token journal index names journal record %d, which is not a record of this token: no journal record created it (planted?)", idx)
		return out, nil
	case !sameToken(x, e.GetToken()):
		add(idx, "t/"+id, MismatchRecord, "the token differs from its journal record (actor, times, revocation or origin)")
	}
	if anchor != nil && idx < anchor.Size {
		p, err := tlog.ProveRecord(anchor.Size, idx, hashReader(get))
		if err == nil {
			err = tlog.CheckRecord(p, anchor.Size, anchor.Root, idx, journal.LeafHash(data))
		}
		if err != nil {
			add(idx, key, MismatchProof, "journal record %d is not the record the signed checkpoint of tree size %d holds (%v): the journal was rewritten", idx, anchor.Size, err)
		}
	}
	return out, nil
}

// checkTokens holds t/, h/ and tj/ against the tokens the journal records
// (journaled: the last token record of each id, from the first size
// journal records). On a store being written (CheckAllLive), a token
// journaled after those records changed since the journal was read: its
// mismatches are replaced by CheckToken's (confirmed in the writer).
func (s *Store) checkTokens(ctx context.Context, journaled map[string]*recordv1.AgentToken, size int64, add func(id string, idx int64, key string, kind MismatchKind, format string, args ...any)) (int, error) {
	type found struct {
		id, key string
		idx     int64
		kind    MismatchKind
		detail  string
	}
	var ms []found
	note := func(id string, idx int64, key string, kind MismatchKind, format string, args ...any) {
		ms = append(ms, found{id, key, idx, kind, fmt.Sprintf(format, args...)})
	}
	n := 0
	seen := map[string]bool{}
	hashOf := map[string]string{}
	err := s.kv.Scan([]byte("t/"), false, func(k, v []byte) bool {
		n++
		id := string(k[2:])
		seen[id] = true
		t, err := decodeToken(v, nil)
		j := journaled[id]
		switch {
		case j == nil:
			note(id, -1, "t/"+id, MismatchUnjournaled, "a token is stored that no journal record created: it was not made by this control plane (planted?)")
		case err != nil:
			note(id, -1, "t/"+id, MismatchRecord, "%v", err)
		case t.GetId() != id || len(t.GetSha256()) < 12 || "tok_"+t.GetSha256()[:12] != id:
			note(id, -1, "t/"+id, MismatchRecord, "the token's hash does not name its id")
		case !sameToken(t, j):
			note(id, -1, "t/"+id, MismatchRecord, "the token differs from its journal record (actor, times, revocation or origin)")
		}
		if err == nil {
			hashOf[id] = t.GetSha256()
		}
		return ctx.Err() == nil
	})
	if err != nil {
		return n, fmt.Errorf("store: state check: read tokens: %w", err)
	}
	for id, j := range journaled {
		if !seen[id] && j.GetRevokedAt() == nil {
			note(id, -1, "t/"+id, MismatchMissing, "the journal records this token but its record is gone")
		}
	}
	err = s.kv.Scan([]byte("h/"), false, func(k, v []byte) bool {
		sum, id := string(k[2:]), string(v)
		if h, ok := hashOf[id]; !ok || h != sum {
			note(id, -1, "h/"+sum, MismatchIndex, "the token hash index points at %s, which does not carry this hash", id)
		}
		return ctx.Err() == nil
	})
	if err != nil {
		return n, fmt.Errorf("store: state check: read the token hash index: %w", err)
	}
	// tj/ may lag (a latch without the index journaled tokens; IndexTokens
	// catches up at start): an entry is wrong only when it names a record
	// that is not one of its token's. The token records themselves are
	// held against their last journal record above.
	index := map[string]int64{}
	err = s.kv.Scan([]byte("tj/"), false, func(k, v []byte) bool {
		id := string(k[3:])
		i, err := decodeIndex(v, nil)
		if err != nil {
			note(id, -1, "tj/"+id, MismatchIndex, "%v", err)
			return true
		}
		index[id] = i
		if journaled[id] == nil {
			if !seen[id] {
				note(id, i, "tj/"+id, MismatchIndex, "the token journal index has an entry for a token no journal record carries")
			}
			return true // a stored token: reported as unjournaled above
		}
		if e, err := entryAt(s.kv.Get, i); err != nil || e.GetToken().GetId() != id {
			note(id, i, "tj/"+id, MismatchIndex, "the token journal index names journal record %d, which is not a record of this token", i)
		}
		return ctx.Err() == nil
	})
	if err != nil {
		return n, fmt.Errorf("store: state check: read the token journal index: %w", err)
	}
	// Tokens journaled after the records read (at a record that exists:
	// an index naming none keeps its mismatches): checked again through tj/.
	again := map[string]bool{}
	now := s.JournalSize()
	for _, m := range ms {
		if i, ok := index[m.id]; ok && i >= size && i < now {
			again[m.id] = true
		}
	}
	for _, m := range ms {
		if !again[m.id] {
			add(m.id, m.idx, m.key, m.kind, "%s", m.detail)
		}
	}
	for id := range again {
		t, err := s.Token(id)
		if err != nil {
			add(id, -1, "t/"+id, MismatchMissing, "the token was journaled while the check ran but its record cannot be read: %v", err)
			continue
		}
		err = s.CheckToken(t, nil)
		var se *StateError
		switch {
		case errors.As(err, &se):
			for _, m := range se.Mismatches {
				add(m.ExecutionID, m.JournalIndex, m.Key, m.Kind, "%s", m.Detail)
			}
		case err != nil:
			return n, fmt.Errorf("store: state check: check token %s again: %w", id, err)
		}
	}
	return n, ctx.Err()
}
