package store

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Token records against their journal (part of CheckAll).
//
// Every token record t/<id> must be the token its last journal record
// (token_created, token_migrated, token_revoked) carries, but for the two
// fields the journal never holds: sha256 (journal records leave it out)
// and last_used_at (moved without a journal record); its id must be the
// one its hash names ("tok_" + the first 12 hex digits), and the hash
// index h/<sha256> must point at the token carrying that hash. A token
// planted in a stopped store (a t/ and h/ written by hand) has no journal
// record: it is reported before the control plane serves a call with it.

// sameToken reports whether a stored token is what its journal record says.
func sameToken(stored, journaled *recordv1.AgentToken) bool {
	a := proto.Clone(stored).(*recordv1.AgentToken)
	b := proto.Clone(journaled).(*recordv1.AgentToken)
	a.Sha256, a.LastUsedAt, b.Sha256, b.LastUsedAt = "", nil, "", nil
	return proto.Equal(a, b)
}

// checkTokens holds t/ and h/ against the tokens the journal records
// (journaled: the last token record of each id).
func (s *Store) checkTokens(ctx context.Context, journaled map[string]*recordv1.AgentToken, add func(id string, idx int64, key string, kind MismatchKind, format string, args ...any)) (int, error) {
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
			add(id, -1, "t/"+id, MismatchUnjournaled, "a token is stored that no journal record created: it was not made by this control plane (planted?)")
		case err != nil:
			add(id, -1, "t/"+id, MismatchRecord, "%v", err)
		case t.GetId() != id || len(t.GetSha256()) < 12 || "tok_"+t.GetSha256()[:12] != id:
			add(id, -1, "t/"+id, MismatchRecord, "the token's hash does not name its id")
		case !sameToken(t, j):
			add(id, -1, "t/"+id, MismatchRecord, "the token differs from its journal record (actor, times, revocation or origin)")
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
			add(id, -1, "t/"+id, MismatchMissing, "the journal records this token but its record is gone")
		}
	}
	err = s.kv.Scan([]byte("h/"), false, func(k, v []byte) bool {
		sum, id := string(k[2:]), string(v)
		if h, ok := hashOf[id]; !ok || h != sum {
			add(id, -1, "h/"+sum, MismatchIndex, "the token hash index points at %s, which does not carry this hash", id)
		}
		return ctx.Err() == nil
	})
	if err != nil {
		return n, fmt.Errorf("store: state check: read the token hash index: %w", err)
	}
	return n, ctx.Err()
}
