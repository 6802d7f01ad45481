package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Agent tokens and the catalog in force (see the key list in doc.go).

func tokenKey(id string) []byte        { return []byte("t/" + id) }
func tokenHashKey(sum string) []byte   { return []byte("h/" + sum) }
func catalogSourceKey(v string) []byte { return []byte("k/" + v) }

// tokenJournalKey indexes a token's last journal record: tj/<token id> is
// its journal index, 8 bytes big endian, written by Tx.Append in the same
// commit as every journal record that carries the token (token_created,
// token_migrated, token_revoked). Authentication checks a token against
// the record it names (tokencheck.go) before the token is first used.
func tokenJournalKey(id string) []byte { return []byte("tj/" + id) }

// tokensIndexedKey says how far the token journal index is known to be
// complete: its value N (8 bytes, big endian) means every journal record
// below N that carries a token is indexed under tj/. Records from N on
// were indexed by Append when this latch wrote them; a latch without the
// index (a replica not yet upgraded) writes them unindexed, and
// IndexTokens reads the records from N on again when a stored token
// disagrees with its entry. Absent: the store was written before the
// index (IndexTokens reads the whole journal once).
var tokensIndexedKey = []byte("m/tokens_indexed")

var catalogKey = []byte("m/catalog")

// indexToken keeps tj/ when Append adds journal record n: a record that
// carries a token is that token's last one. The marker is written with
// the store's first journal record, so a new store is indexed from the
// start; an older store is indexed by IndexTokens (the marker stays unset
// until then).
func (t *Tx) indexToken(e *recordv1.JournalEntry, n int64) {
	if n == 0 {
		t.set(tokensIndexedKey, binary.BigEndian.AppendUint64(nil, 0))
	}
	if id := e.GetToken().GetId(); id != "" {
		t.set(tokenJournalKey(id), binary.BigEndian.AppendUint64(nil, uint64(n)))
	}
}

// Token returns an agent token as this update sees it, or ErrNotFound.
func (t *Tx) Token(id string) (*recordv1.AgentToken, error) {
	return decodeToken(t.get(tokenKey(id)))
}

// TokenByHash returns the token whose SHA-256 is sum, or ErrNotFound.
func (t *Tx) TokenByHash(sum string) (*recordv1.AgentToken, error) {
	id, err := t.get(tokenHashKey(sum))
	if err != nil {
		return nil, err
	}
	return t.Token(string(id))
}

// PutToken stores a token and its hash index. A token's hash never changes:
// a record whose id is stored under another hash is refused.
func (t *Tx) PutToken(x *recordv1.AgentToken) error {
	if x.GetId() == "" || x.GetSha256() == "" {
		return errors.New("store: token without id or hash")
	}
	if id, err := t.get(tokenHashKey(x.GetSha256())); err == nil && string(id) != x.GetId() {
		return fmt.Errorf("store: token hash already belongs to %s", id)
	}
	data, err := proto.Marshal(x)
	if err != nil {
		return fmt.Errorf("store: encode token: %w", err)
	}
	t.set(tokenKey(x.GetId()), data)
	t.set(tokenHashKey(x.GetSha256()), []byte(x.GetId()))
	return nil
}

// Catalog returns the catalog version last recorded, or ErrNotFound.
func (t *Tx) Catalog() (*recordv1.CatalogVersion, error) {
	return decodeCatalog(t.get(catalogKey))
}

// PutCatalog records the catalog version in force and keeps its source
// bytes under its version, so the contract an execution was accepted under
// (Execution.catalog_version) can be read back.
func (t *Tx) PutCatalog(c *recordv1.CatalogVersion, source []byte) error {
	data, err := proto.Marshal(c)
	if err != nil {
		return fmt.Errorf("store: encode catalog version: %w", err)
	}
	t.set(catalogKey, data)
	if source != nil {
		t.set(catalogSourceKey(c.GetVersion()), append([]byte(nil), source...))
	}
	return nil
}

// Token returns a committed token, or ErrNotFound.
func (s *Store) Token(id string) (*recordv1.AgentToken, error) {
	return decodeToken(s.kv.Get(tokenKey(id)))
}

// TokenByHash returns the committed token whose SHA-256 is sum, or ErrNotFound.
func (s *Store) TokenByHash(sum string) (*recordv1.AgentToken, error) {
	id, err := s.kv.Get(tokenHashKey(sum))
	if err != nil {
		return nil, err
	}
	return s.Token(string(id))
}

// Tokens returns every stored token (revoked ones too), in id order.
func (s *Store) Tokens() ([]*recordv1.AgentToken, error) {
	return scanDecoded(s.kv, "t/", decodeToken)
}

// TokenJournalIndex returns the journal index tj/<id> names (the token's
// last journal record), or ErrNotFound.
func (s *Store) TokenJournalIndex(id string) (int64, error) {
	return decodeIndex(s.kv.Get(tokenJournalKey(id)))
}

func decodeIndex(v []byte, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("store: token journal index is %d bytes, want 8", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// TokenIndexBuilt reports whether the store has a token journal index
// (see tokensIndexedKey), or nothing journaled yet: false means
// IndexTokens has the whole journal to read.
func (s *Store) TokenIndexBuilt() (bool, error) {
	_, err := s.kv.Get(tokensIndexedKey)
	if errors.Is(err, ErrNotFound) {
		return s.JournalSize() == 0, nil
	}
	return err == nil, err
}

// TokenOriginAPI is the origin of the tokens Latch generates (latch token
// create): 32 random bytes.
const TokenOriginAPI = "api"

// JournaledToken is a token as its journal records carry it. Latch's own
// tokens (TokenOriginAPI) keep their hash: with 256 random bits behind it
// it gives nothing away, and it ties the record to the stored token's
// whole hash, not only to the 48 bits its id holds (else a secret whose
// hash shares them could be swapped in by hand). Imported ones
// (tokens.json) lose it: those secrets may be weak, and journal exports go
// to auditors.
func JournaledToken(t *recordv1.AgentToken) *recordv1.AgentToken {
	c := proto.Clone(t).(*recordv1.AgentToken)
	if c.GetOrigin() != TokenOriginAPI {
		c.Sha256 = ""
	}
	return c
}

// IndexTokens makes the token journal index (tj/) right, from the journal.
// On a store written before the index it reads the whole journal (once:
// on a million executions, 4M journal records, 34 s on a loaded 2-core
// machine, 11 s of CPU), so the server runs it while serving. Otherwise
// it checks each stored token against the record its entry names (a few
// reads per token) and, when one disagrees (a latch without the index
// journaled tokens meanwhile, or the store was edited), reads again the
// journal records the index is not known to cover (from the marker on:
// those written since this latch last started); when none disagrees it
// moves the marker to the journal's end. It decodes only the records that
// carry a token. Only this latch's own updates may write the store
// meanwhile (they index themselves). It returns why it read the journal
// ("" when it did not) and how many tokens it indexed. A stored token no
// journal record carries (planted) gets no entry: it never authenticates.
func (s *Store) IndexTokens(ctx context.Context) (reason string, n int, err error) {
	from, err := decodeIndex(s.kv.Get(tokensIndexedKey))
	size := s.JournalSize()
	switch {
	case errors.Is(err, ErrNotFound) && size == 0:
		return "", 0, nil // nothing journaled yet: the first Append sets the marker
	case errors.Is(err, ErrNotFound):
		from, reason = 0, "the store was written before the token journal index"
	case err != nil:
		return "", 0, fmt.Errorf("store: read the token index marker: %w", err)
	default:
		if reason, _, err = s.staleTokenIndex(ctx); err != nil {
			return "", 0, err
		}
		if reason == "" {
			if from < size {
				err = s.Update(ctx, func(tx *Tx) error {
					tx.set(tokensIndexedKey, binary.BigEndian.AppendUint64(nil, uint64(size)))
					return nil
				})
			}
			return "", 0, err
		}
	}
	last, err := s.lastRecords(ctx, from, size, journalEntryToken, func(e *recordv1.JournalEntry) string { return e.GetToken().GetId() })
	if err != nil {
		return reason, 0, fmt.Errorf("store: index the tokens' journal records: %w", err)
	}
	err = s.Update(ctx, func(tx *Tx) error {
		for id, i := range last {
			// A token journaled since the scan indexed itself (Append).
			if cur, err := decodeIndex(tx.get(tokenJournalKey(id))); err == nil && cur >= size && cur < tx.size {
				continue
			}
			tx.set(tokenJournalKey(id), binary.BigEndian.AppendUint64(nil, uint64(i)))
		}
		tx.set(tokensIndexedKey, binary.BigEndian.AppendUint64(nil, uint64(size)))
		return nil
	})
	if err != nil {
		return reason, 0, fmt.Errorf("store: index the tokens' journal records: %w", err)
	}
	// Rebuilt from the journal, the index vouches for every stored token
	// a journal record carries; one it still disagrees with (planted, or
	// edited) is a store that disagrees with its journal, not served from.
	if _, ms, err := s.staleTokenIndex(ctx); err != nil {
		return reason, len(last), err
	} else if len(ms) > 0 {
		return reason, len(last), &StateError{Mismatches: ms}
	}
	return reason, len(last), nil
}

// staleTokenIndex says why the token journal index cannot be trusted (""
// when it can): the first stored token (in id order) whose entry is
// missing or names a record that does not carry it as stored, with that
// mismatch. The tokens are checked staleCheckers at a time: their point
// reads then overlap (on PostgreSQL concurrent reads share one query), so a
// takeover with many tokens does not pay three round trips per token one
// after the other.
func (s *Store) staleTokenIndex(ctx context.Context) (string, []Mismatch, error) {
	type stored struct {
		id string
		x  *recordv1.AgentToken
	}
	var all []stored
	var reason string
	var found []Mismatch
	err := s.kv.Scan([]byte("t/"), false, func(k, v []byte) bool {
		id := string(k[2:])
		x, err := decodeToken(v, nil)
		if err != nil {
			reason = "token " + id + " does not decode"
			found = []Mismatch{{ExecutionID: id, JournalIndex: -1, Key: "t/" + id, Kind: MismatchRecord, Detail: "the token record does not decode"}}
			return false
		}
		all = append(all, stored{id, x})
		return ctx.Err() == nil
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return "", nil, fmt.Errorf("store: check the token journal index: %w", err)
	}
	results := make([][]Mismatch, len(all))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(staleCheckers)
	for i, t := range all {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			ms, err := s.checkToken(s.kv.Get, t.id, t.x, nil)
			results[i] = ms
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return "", nil, fmt.Errorf("store: check the token journal index: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return "", nil, fmt.Errorf("store: check the token journal index: %w", err)
	}
	for _, ms := range results { // the first in id order, like the scan
		if len(ms) > 0 && found == nil {
			reason = "a stored token disagrees with the journal record its index entry names (" + ms[0].String() + ")"
			found = ms[:1]
		}
	}
	return reason, found, nil
}

// staleCheckers is how many stored tokens staleTokenIndex checks at once.
const staleCheckers = 16

// journalEntryToken is the field number of JournalEntry.token.
var journalEntryToken = (&recordv1.JournalEntry{}).ProtoReflect().Descriptor().Fields().ByName("token").Number()

// carriesToken reports whether an encoded JournalEntry has a token field,
// reading only its top-level tags (most records carry none: decoding each
// would cost the migration of a large store seconds).
func carriesToken(b []byte) bool { return carriesField(b, journalEntryToken) }

// lastRecords reads the journal from index from up to size and returns,
// for each id that idOf reads off an entry carrying field (a token, a
// session), the index of its last record: what a journal index (tj/, sj/)
// of a store written before it is built from. Only the entries that carry
// field are decoded; damaged leaves are left to the journal check.
func (s *Store) lastRecords(ctx context.Context, from, size int64, field protowire.Number, idOf func(*recordv1.JournalEntry) string) (map[string]int64, error) {
	last := map[string]int64{}
	var derr error
	err := s.kv.ScanFrom([]byte("j/"), journalKey(from), false, func(k, v []byte) bool {
		_, data, ok := decodeLeaf(v)
		if !ok || !carriesField(data, field) {
			return ctx.Err() == nil
		}
		i, err := strconv.ParseInt(string(k[2:]), 16, 64)
		if err != nil {
			derr = fmt.Errorf("store: journal key %q is malformed", k)
			return false
		}
		e := &recordv1.JournalEntry{}
		if proto.Unmarshal(data, e) == nil && idOf(e) != "" && i < size {
			last[idOf(e)] = i
		}
		return ctx.Err() == nil
	})
	if err == nil {
		err = derr
	}
	if err == nil {
		err = ctx.Err()
	}
	return last, err
}

// carriesField reports whether an encoded journal entry has field num set
// (or is malformed: the decoder judges those).
func carriesField(b []byte, field protowire.Number) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return true // let the decoder judge a malformed record
		}
		if num == field {
			return true
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return true
		}
		b = b[n:]
	}
	return false
}

// Catalog returns the committed catalog version, or ErrNotFound.
func (s *Store) Catalog() (*recordv1.CatalogVersion, error) {
	return decodeCatalog(s.kv.Get(catalogKey))
}

// CatalogSource returns the source bytes of a catalog version, or ErrNotFound.
func (s *Store) CatalogSource(version string) ([]byte, error) {
	return s.kv.Get(catalogSourceKey(version))
}

func decodeToken(data []byte, err error) (*recordv1.AgentToken, error) {
	if err != nil {
		return nil, err
	}
	x := &recordv1.AgentToken{}
	if err := proto.Unmarshal(data, x); err != nil {
		return nil, fmt.Errorf("store: decode token: %w", err)
	}
	return x, nil
}

func decodeCatalog(data []byte, err error) (*recordv1.CatalogVersion, error) {
	if err != nil {
		return nil, err
	}
	x := &recordv1.CatalogVersion{}
	if err := proto.Unmarshal(data, x); err != nil {
		return nil, fmt.Errorf("store: decode catalog version: %w", err)
	}
	return x, nil
}
