// Package tokens holds agents' bearer tokens in the control plane's store:
// it creates, lists, revokes and authenticates them, journals every change
// (token_created, token_revoked, token_migrated: the token's id and actor,
// never the token or its hash), and imports a tokens.json left by earlier
// versions once.
//
// A token is "latch_" followed by 32 random bytes in unpadded base64url. It
// is returned once by Create and never stored, logged or shown again: the
// store keeps its SHA-256. Tokens are high-entropy, so an unsalted hash is
// no guessing oracle. Authenticating is one read of the store (h/<hash>,
// then t/<id>); last_used_at moves at most once per LastUsedEvery, so a
// busy agent does not cost a write per call.
//
// A stored token authenticates nobody until it is checked against its
// journal record (store.CheckToken: the record the token journal index
// names, its inclusion in the newest signed checkpoint when that covers
// it), once per token and process: a token planted in a stopped store is
// refused at its first use, on a store of any size, and the mismatch is
// kept (Failed, Mismatches) for the control plane to stop serving, as it
// does for every state that disagrees with the journal. Tokens this
// service creates or imports are known sound and skip the check.
//
// Operator tokens (CreateOperator, AuthenticateOperator) are the same
// records with operator set: they sign an operator into the console under
// the token's actor as the operator's name. The two kinds never stand in
// for each other: Authenticate refuses an operator token, AuthenticateOperator
// an agent token, and List/Revoke act on one kind at a time.
//
// Imported by controlplane/api, controlplane/admin, controlplane/console
// and the latch command.
package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/actorname"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Prefix starts every token, so that leaked tokens are easy to recognise.
const Prefix = "latch_"

// OperatorPrefix starts every operator token (after Prefix, so the scanners
// that know Latch tokens find these too).
const OperatorPrefix = Prefix + "op_"

// Journal kinds of token records.
const (
	KindCreated  = recordv1.EntryKind_ENTRY_KIND_TOKEN_CREATED
	KindRevoked  = recordv1.EntryKind_ENTRY_KIND_TOKEN_REVOKED
	KindMigrated = recordv1.EntryKind_ENTRY_KIND_TOKEN_MIGRATED
)

// Origins of a token.
const (
	OriginAPI        = store.TokenOriginAPI
	OriginTokensJSON = "tokens.json"
)

// MaxTTL bounds a token's lifetime at creation.
const MaxTTL = 10 * 365 * 24 * time.Hour

var (
	// ErrInvalid is returned by Authenticate for an unknown or malformed
	// credential.
	ErrInvalid = errors.New("tokens: invalid credential")
	// ErrRevoked is returned by Authenticate for a revoked token.
	ErrRevoked = errors.New("tokens: token revoked")
	// ErrExpired is returned by Authenticate for a token past its expiry.
	ErrExpired = errors.New("tokens: token expired")
	// ErrNotFound is returned by Revoke when no live token has that id or actor.
	ErrNotFound = errors.New("tokens: token not found")
	// ErrBadActor is returned by Create for an actor name it refuses.
	ErrBadActor = errors.New("tokens: bad actor name")
	// ErrBadTTL is returned by Create for a negative or too long TTL.
	ErrBadTTL = errors.New("tokens: bad ttl")
	// ErrBadFile is returned by Migrate for a tokens.json it cannot read.
	ErrBadFile = errors.New("tokens: bad tokens.json")
)

// ValidActor reports whether name is an acceptable actor name for a token:
// actorname.CheckIssued (1-128 letters, digits, _ . @ -, starting with a
// letter or digit; a subset of the actor-name rule the front applies).
func ValidActor(name string) bool { return actorname.CheckIssued(name) == nil }

// Static is a credential known without the store (latch dev's dev token):
// never stored, never journaled.
type Static struct {
	Credential string
	Actor      string
	ID         string
}

// Config names the service's dependencies.
type Config struct {
	Logger hclog.Logger
	Store  *store.Store
	// Clock defaults to time.Now.
	Clock func() time.Time
	// LastUsedEvery is how stale last_used_at may get (default 1m).
	LastUsedEvery time.Duration
	// Static credentials accepted besides the stored tokens.
	Static []Static
	// Verifier is the journal's verifier key (note text form). When set, a
	// stored token's journal record that the newest signed checkpoint
	// covers is proven included in its tree before the token first
	// authenticates; without it the token is checked against the record
	// alone.
	Verifier string
	// IndexReady, when set, is closed once the store's token journal index
	// is built (a store written before it gets it built while serving:
	// store.IndexTokens). Until then a stored token's first use waits for
	// it, up to the caller's context.
	IndexReady <-chan struct{}
	// Anchor is a signed checkpoint known from outside the store (the
	// newest of the checkpoint copy, opened with the journal's verifier):
	// when it covers more of the journal than the store's newest, records
	// are proven against it, so checkpoints deleted from the store do not
	// let a record forged in place pass.
	Anchor *journal.Checkpoint
}

// Service is the token store of a control plane.
type Service struct {
	log      hclog.Logger
	st       *store.Store
	clock    func() time.Time
	every    time.Duration
	static   []Static
	verifier string
	ready    <-chan struct{}
	outside  *journal.Checkpoint

	// cleared holds the ids of the stored tokens checked against their
	// journal record (or made by this service) in this process.
	cleared sync.Map
	// mu guards mismatches; failed is closed at the first.
	mu         sync.Mutex
	mismatches []store.Mismatch
	failed     chan struct{}
	failOnce   sync.Once
}

// New builds the service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("tokens: Config.Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.LastUsedEvery <= 0 {
		cfg.LastUsedEvery = time.Minute
	}
	for _, s := range cfg.Static {
		if s.Credential == "" || s.Actor == "" || s.ID == "" {
			return nil, errors.New("tokens: a static credential needs Credential, Actor and ID")
		}
		if err := actorname.CheckIssued(s.Actor); err != nil {
			return nil, fmt.Errorf("%w: static credential %s: %w", ErrBadActor, s.ID, err)
		}
	}
	return &Service{log: cfg.Logger.Named("tokens"), st: cfg.Store, clock: cfg.Clock, every: cfg.LastUsedEvery, static: cfg.Static,
		verifier: cfg.Verifier, ready: cfg.IndexReady, outside: cfg.Anchor, failed: make(chan struct{})}, nil
}

// Failed is closed when a stored token was found to disagree with its
// journal record (it authenticated nobody): the caller stops serving.
func (s *Service) Failed() <-chan struct{} { return s.failed }

// Mismatches returns the token mismatches found so far.
func (s *Service) Mismatches() []store.Mismatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]store.Mismatch(nil), s.mismatches...)
}

// admit checks a stored token against its journal record unless this
// process has done so (or made the token). A mismatch is kept and closes
// Failed; the error matches store.ErrStateMismatch.
func (s *Service) admit(ctx context.Context, t *recordv1.AgentToken) error {
	if _, ok := s.cleared.Load(t.GetId()); ok {
		return nil
	}
	if s.ready != nil {
		select {
		case <-s.ready:
		case <-ctx.Done():
			return fmt.Errorf("tokens: %s cannot be checked against its journal record yet: the token journal index is being built (once, on a store written before it); retry shortly: %w", t.GetId(), ctx.Err())
		}
	}
	anchor, err := s.anchor()
	if err == nil {
		err = s.st.CheckToken(t, anchor)
	}
	var se *store.StateError
	if errors.As(err, &se) {
		s.mu.Lock()
		s.mismatches = append(s.mismatches, se.Mismatches...)
		s.mu.Unlock()
		s.failOnce.Do(func() { close(s.failed) })
		s.log.Error("a stored token disagrees with its journal record; it authenticated nobody", "token_id", t.GetId(), "error", err)
		return fmt.Errorf("tokens: %s was not authenticated: %w", t.GetId(), err)
	}
	if err != nil {
		return fmt.Errorf("tokens: check %s against its journal record: %w", t.GetId(), err)
	}
	s.cleared.Store(t.GetId(), struct{}{})
	return nil
}

// Anchor is what a stored record is proven against before it is first
// honoured: the newest signed checkpoint, as anchor says (the session rule
// proves an authorized session's journal record against it too).
func (s *Service) Anchor() (*journal.Checkpoint, error) { return s.anchor() }

// anchor is the newest signed checkpoint (the store's, or Config.Anchor
// when it covers more), or nil when there is none or no verifier is
// configured. A store's newest that does not verify is a mismatch: the
// journal's checkpoints were rewritten.
func (s *Service) anchor() (*journal.Checkpoint, error) {
	if s.verifier == "" {
		return s.outside, nil
	}
	notes, err := s.st.NewestCheckpoints(1)
	if err != nil {
		return nil, fmt.Errorf("read the newest checkpoint: %w", err)
	}
	if len(notes) == 0 {
		return s.outside, nil
	}
	c, err := journal.OpenCheckpoint(notes[0], s.verifier)
	if err != nil {
		return nil, &store.StateError{Mismatches: []store.Mismatch{{JournalIndex: -1, Key: "c/ (newest)", Kind: store.MismatchProof,
			Detail: fmt.Sprintf("the newest signed checkpoint does not verify with the journal's key (%v): the checkpoints were rewritten", err)}}}
	}
	if s.outside != nil && s.outside.Size > c.Size {
		return s.outside, nil
	}
	return c, nil
}

// Hash is the hex SHA-256 of a token, as stored.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// idOf is a token's id: derived from its hash, so it is stable and unique.
func idOf(sum string) string { return "tok_" + sum[:12] }

// Create makes a token for actor, valid for ttl (0: until revoked), stores
// its hash, journals token_created and returns the token, once.
func (s *Service) Create(ctx context.Context, actor string, ttl time.Duration) (string, *recordv1.AgentToken, error) {
	return s.Issue(ctx, Issue{Actor: actor, TTL: ttl})
}

// CreateOperator makes an operator token for the operator named name (the
// console signs in with it), as Create does for agents: stored hashed,
// journaled token_created with operator set, returned once.
func (s *Service) CreateOperator(ctx context.Context, name string, ttl time.Duration) (string, *recordv1.AgentToken, error) {
	return s.Issue(ctx, Issue{Actor: name, TTL: ttl, Operator: true})
}

// Issue is one token to create (Service.Issue).
type Issue struct {
	// Actor is the agent, or the operator's name for an operator token.
	Actor string
	// TTL: the token expires this long after creation (0: until revoked).
	TTL time.Duration
	// Operator makes an operator token (console sign-in).
	Operator bool
	// CreatedBy and CreatedVia say who asked for it and over which
	// transport (AgentToken.created_by, created_via; see authz.Caller):
	// stored with the token and journaled, so a console session opened
	// with it is tied to its creator. Empty: not known (in-process callers).
	CreatedBy, CreatedVia string
}

func kindName(operator bool) string {
	if operator {
		return "operator token"
	}
	return "token"
}

// Issue makes the token in: Create and CreateOperator, saying who created
// it.
func (s *Service) Issue(ctx context.Context, in Issue) (string, *recordv1.AgentToken, error) {
	actor, ttl, operator := in.Actor, in.TTL, in.Operator
	if err := actorname.CheckIssued(actor); err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrBadActor, err)
	}
	if ttl < 0 || ttl > MaxTTL {
		return "", nil, fmt.Errorf("%w: %s (give a positive duration of at most %s, or none for a token that lasts until revoked)", ErrBadTTL, ttl, MaxTTL)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, fmt.Errorf("tokens: reading random bytes: %w", err)
	}
	prefix := Prefix
	if operator {
		prefix = OperatorPrefix
	}
	secret := prefix + base64.RawURLEncoding.EncodeToString(raw[:])
	sum := Hash(secret)
	now := s.clock().UTC().Truncate(time.Second)
	t := &recordv1.AgentToken{Id: idOf(sum), Actor: actor, Sha256: sum, CreatedAt: timestamppb.New(now), Origin: OriginAPI, Operator: operator,
		CreatedBy: in.CreatedBy, CreatedVia: in.CreatedVia}
	reason := kindName(operator) + " " + t.GetId() + " created"
	if in.CreatedBy != "" {
		reason += " by " + in.CreatedBy
		if in.CreatedVia != "" {
			reason += " over " + in.CreatedVia
		}
	}
	if ttl > 0 {
		t.ExpiresAt = timestamppb.New(now.Add(ttl))
	}
	err := s.st.Update(ctx, func(tx *store.Tx) error {
		if err := tx.PutToken(t); err != nil {
			return err
		}
		_, err := tx.Append(&recordv1.JournalEntry{Time: timestamppb.New(now), EntryKind: KindCreated, Actor: actor, Reason: reason, Token: store.JournaledToken(t)})
		return err
	})
	if err != nil {
		return "", nil, err
	}
	s.cleared.Store(t.GetId(), struct{}{})
	s.log.Info("token created", "token_id", t.GetId(), "actor", actor, "operator", operator, "expires_at", expiry(t), "created_by", in.CreatedBy, "created_via", in.CreatedVia)
	return secret, t, nil
}

func expiry(t *recordv1.AgentToken) string {
	if t.GetExpiresAt() == nil {
		return "never"
	}
	return t.GetExpiresAt().AsTime().Format(time.RFC3339)
}

// Live reports whether t authenticates at now: not revoked, not expired.
func Live(t *recordv1.AgentToken, now time.Time) bool {
	return t.GetRevokedAt() == nil && (t.GetExpiresAt() == nil || now.Before(t.GetExpiresAt().AsTime()))
}

// List returns the live agent tokens (all: revoked and expired ones too),
// in id order, with their hashes.
func (s *Service) List(all bool) ([]*recordv1.AgentToken, error) { return s.list(all, false) }

// ListOperators is List for operator tokens.
func (s *Service) ListOperators(all bool) ([]*recordv1.AgentToken, error) { return s.list(all, true) }

func (s *Service) list(all, operator bool) ([]*recordv1.AgentToken, error) {
	ts, err := s.st.Tokens()
	if err != nil {
		return nil, err
	}
	now := s.clock()
	out := ts[:0]
	for _, t := range ts {
		if t.GetOperator() == operator && (all || Live(t, now)) {
			out = append(out, t)
		}
	}
	return out, nil
}

// Revoke revokes the live agent token with the given id, or every live
// agent token of the given actor, journals token_revoked for each and
// returns them.
func (s *Service) Revoke(ctx context.Context, idOrActor, by string) ([]*recordv1.AgentToken, error) {
	return s.revoke(ctx, idOrActor, by, false)
}

// RevokeOperator is Revoke for operator tokens (by id or operator name).
func (s *Service) RevokeOperator(ctx context.Context, idOrName, by string) ([]*recordv1.AgentToken, error) {
	return s.revoke(ctx, idOrName, by, true)
}

func (s *Service) revoke(ctx context.Context, idOrActor, by string, operator bool) ([]*recordv1.AgentToken, error) {
	if idOrActor == "" {
		return nil, fmt.Errorf("%w: give a token id or an actor", ErrNotFound)
	}
	if by == "" {
		by = "operator"
	}
	ts, err := s.st.Tokens()
	if err != nil {
		return nil, err
	}
	now := s.clock().UTC().Truncate(time.Second)
	var ids []string
	for _, t := range ts {
		if (t.GetId() == idOrActor || t.GetActor() == idOrActor) && t.GetRevokedAt() == nil && t.GetOperator() == operator {
			ids = append(ids, t.GetId())
		}
	}
	if len(ids) == 0 {
		if operator {
			return nil, fmt.Errorf("%w: no live operator token has id or name %q (see `latch operator token list --all`)", ErrNotFound, idOrActor)
		}
		return nil, fmt.Errorf("%w: no live token has id or actor %q (see `latch token list --all`)", ErrNotFound, idOrActor)
	}
	var out []*recordv1.AgentToken
	err = s.st.Update(ctx, func(tx *store.Tx) error {
		out = out[:0]
		for _, id := range ids {
			t, err := tx.Token(id)
			if err != nil {
				return err
			}
			if t.GetRevokedAt() != nil {
				continue // revoked meanwhile
			}
			t.RevokedAt, t.RevokedBy = timestamppb.New(now), by
			if err := tx.PutToken(t); err != nil {
				return err
			}
			if _, err := tx.Append(&recordv1.JournalEntry{Time: timestamppb.New(now), EntryKind: KindRevoked, Actor: t.GetActor(), Reason: kindName(operator) + " " + id + " revoked by " + by, Token: store.JournaledToken(t)}); err != nil {
				return err
			}
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, t := range out {
		s.log.Info("token revoked", "token_id", t.GetId(), "actor", t.GetActor(), "by", by)
	}
	return out, nil
}

// Authenticate returns the live agent token a credential is, or
// ErrInvalid (an operator token is invalid here), ErrRevoked or ErrExpired.
// It never logs the credential.
func (s *Service) Authenticate(ctx context.Context, credential string) (*recordv1.AgentToken, error) {
	for _, st := range s.static {
		if subtle.ConstantTimeCompare([]byte(credential), []byte(st.Credential)) == 1 {
			return &recordv1.AgentToken{Id: st.ID, Actor: st.Actor, Origin: "static"}, nil
		}
	}
	return s.authenticate(ctx, credential, false)
}

// AuthenticateOperator returns the live operator token a credential is
// (its actor is the operator's name), or ErrInvalid (an agent token is
// invalid here), ErrRevoked or ErrExpired. It never logs the credential.
func (s *Service) AuthenticateOperator(ctx context.Context, credential string) (*recordv1.AgentToken, error) {
	return s.authenticate(ctx, credential, true)
}

func (s *Service) authenticate(ctx context.Context, credential string, operator bool) (*recordv1.AgentToken, error) {
	if !strings.HasPrefix(credential, Prefix) || len(credential) > 256 {
		return nil, ErrInvalid
	}
	sum := Hash(credential)
	t, err := s.st.TokenByHash(sum)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.GetOperator() != operator) {
		return nil, ErrInvalid
	}
	if err != nil {
		return nil, err
	}
	if err := s.admit(ctx, t); err != nil {
		return nil, err
	}
	now := s.clock()
	switch {
	case t.GetRevokedAt() != nil:
		return nil, fmt.Errorf("%w: %s was revoked at %s", ErrRevoked, t.GetId(), t.GetRevokedAt().AsTime().Format(time.RFC3339))
	case !Live(t, now):
		return nil, fmt.Errorf("%w: %s expired at %s", ErrExpired, t.GetId(), expiry(t))
	}
	if t.GetLastUsedAt() == nil || now.Sub(t.GetLastUsedAt().AsTime()) >= s.every {
		s.touch(ctx, t.GetId(), now)
	}
	return t, nil
}

// touch moves last_used_at; a failure only costs the coarse time.
func (s *Service) touch(ctx context.Context, id string, now time.Time) {
	err := s.st.Update(ctx, func(tx *store.Tx) error {
		t, err := tx.Token(id)
		if err != nil {
			return err
		}
		if t.GetLastUsedAt() != nil && now.Sub(t.GetLastUsedAt().AsTime()) < s.every {
			return nil // another call moved it
		}
		t.LastUsedAt = timestamppb.New(now.UTC().Truncate(time.Second))
		return tx.PutToken(t)
	})
	if err != nil {
		s.log.Debug("token last-used time not recorded", "token_id", id, "error", err)
	}
}

// HasActor reports whether the actor holds at least one live token (or a
// static credential). A stored token counts only once it agrees with its
// journal record (the first-use check, admit): a planted one makes no actor
// known. While the token journal index is being built the check waits at
// most hasActorWait, and a token not yet checked does not count.
func (s *Service) HasActor(actor string) bool {
	for _, st := range s.static {
		if st.Actor == actor {
			return true
		}
	}
	ts, err := s.st.Tokens()
	if err != nil {
		s.log.Error("token scan failed", "error", err)
		return false
	}
	now := s.clock()
	ctx, cancel := context.WithTimeout(context.Background(), hasActorWait)
	defer cancel()
	for _, t := range ts {
		if t.GetActor() == actor && !t.GetOperator() && Live(t, now) && s.admit(ctx, t) == nil {
			return true
		}
	}
	return false
}

// hasActorWait bounds how long HasActor waits for the token journal index.
const hasActorWait = time.Second
