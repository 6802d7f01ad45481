package mcpfront

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// MaxAuthCacheBound is the longest a front may trust an earlier answer of
// the control plane about a token: a revoked token is refused at most this
// long after `latch token revoke`.
const MaxAuthCacheBound = 5 * time.Second

// maxAuthCache bounds the cache; past it, it is emptied (answers are only
// ever an optimisation).
const maxAuthCache = 10_000

// extraCredential is the TokenInfo.Extra key of a token the control plane
// authenticates itself (CredentialForwarder): the front sends it with every
// Submit, Get, List, Watch and Cancel. JWTs never get it (oauth.go): their
// actor reaches the control plane as the request's actor field.
const extraCredential = "credential"

// ErrTokenRefused is returned by ControlPlaneTokens.Verify for a token the
// control plane does not accept (unknown, revoked, expired).
var ErrTokenRefused = errors.New("mcpfront: token refused by the control plane")

// ControlPlaneTokens verifies agents' bearer tokens by asking the control
// plane (AuthenticateAgent). Answers, refusals included, are cached for at
// most the cache bound, keyed by the token's SHA-256 (the token itself is
// not kept); errors reaching the control plane are not cached. It
// implements TokenVerifier and CredentialForwarder: the control plane
// authenticates the token again on every Submit, so a revoked token never
// starts an execution even while the cache still holds it.
type ControlPlaneTokens struct {
	cp    controlplanev1.ControlPlaneClient
	bound time.Duration
	clock func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]authAnswer
}

type authAnswer struct {
	actor, id string
	refused   error
	until     time.Time
}

var (
	_ TokenVerifier       = (*ControlPlaneTokens)(nil)
	_ CredentialForwarder = (*ControlPlaneTokens)(nil)
)

// NewControlPlaneTokens builds a verifier over cp. bound is the cache bound
// (0: MaxAuthCacheBound; above it: refused); clock defaults to time.Now.
func NewControlPlaneTokens(cp controlplanev1.ControlPlaneClient, bound time.Duration, clock func() time.Time) (*ControlPlaneTokens, error) {
	if cp == nil {
		return nil, fmt.Errorf("%w: ControlPlaneTokens needs a control plane client", ErrBadConfig)
	}
	if bound == 0 {
		bound = MaxAuthCacheBound
	}
	if bound < 0 || bound > MaxAuthCacheBound {
		return nil, fmt.Errorf("%w: token cache bound %s is outside (0, %s]: revocation must take effect within %s", ErrBadConfig, bound, MaxAuthCacheBound, MaxAuthCacheBound)
	}
	if clock == nil {
		clock = time.Now
	}
	return &ControlPlaneTokens{cp: cp, bound: bound, clock: clock, cache: map[[32]byte]authAnswer{}}, nil
}

// ForwardCredential reports that the front sends these tokens with Submit.
func (c *ControlPlaneTokens) ForwardCredential(string) bool { return true }

// Verify returns the actor and token id of token, or ErrTokenRefused.
func (c *ControlPlaneTokens) Verify(ctx context.Context, token string) (string, string, error) {
	key := sha256.Sum256([]byte(token))
	now := c.clock()
	c.mu.Lock()
	a, ok := c.cache[key]
	c.mu.Unlock()
	if ok && now.Before(a.until) {
		if a.refused != nil {
			return "", "", a.refused
		}
		return a.actor, a.id, nil
	}
	resp, err := c.cp.AuthenticateAgent(ctx, &controlplanev1.AuthenticateAgentRequest{Credential: token})
	switch status.Code(err) {
	case codes.OK:
		a = authAnswer{actor: resp.GetActor(), id: resp.GetTokenId(), until: now.Add(c.bound)}
		if exp := resp.GetExpiresAt(); exp != nil && exp.AsTime().Before(a.until) {
			a.until = exp.AsTime()
		}
	case codes.Unauthenticated, codes.InvalidArgument:
		a = authAnswer{refused: fmt.Errorf("%w: %s", ErrTokenRefused, status.Convert(err).Message()), until: now.Add(c.bound)}
	default:
		return "", "", fmt.Errorf("mcpfront: asking the control plane about a token: %w", err)
	}
	c.mu.Lock()
	if len(c.cache) >= maxAuthCache {
		clear(c.cache)
	}
	c.cache[key] = a
	c.mu.Unlock()
	if a.refused != nil {
		return "", "", a.refused
	}
	return a.actor, a.id, nil
}
