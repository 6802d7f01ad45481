// Package auth holds the MCP front's own agent authentication: the JWT
// access-token verifier (jwt.go), the actor-name rule (actor.go), and the
// token shape and errors they share. TokenStore below is the file-backed
// token store of earlier versions: no binary uses it any more (tokens live
// in the control plane's store, controlplane/tokens, which imports an old
// tokens.json once); it stays until its tests and callers are gone.
//
// File format (JSON, mode 0600, replaced atomically on every change):
//
//	{"tokens": [{"id": "tok_…", "actor": "alice", "sha256": "<hex>", "created_at": "<RFC 3339>"}]}
//
// A token is "latch_" followed by 32 random bytes in unpadded base64url. It is
// returned once by Create and never stored, logged or shown again. Tokens are
// high-entropy, so an unsalted SHA-256 is enough: the file is no guessing
// oracle. The store re-reads the file when it changed on disk, so tokens
// created or revoked by `latch token ...` take effect without a restart.
//
// Imported by mcpfront, latch-mcp and the latch command (the --oauth-*
// flags); of Latch it imports only internal/egress, internal/loopback and
// internal/atomicfile, which import only the standard library.
package auth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/latchhq/latch/internal/atomicfile"
)

// Prefix starts every token, so that leaked tokens are easy to recognise.
const Prefix = "latch_"

var (
	// ErrInvalidToken is returned by Verify for an unknown or malformed token.
	ErrInvalidToken = errors.New("auth: invalid token")
	// ErrNotFound is returned by Revoke when no token has that id or actor.
	ErrNotFound = errors.New("auth: token not found")
	// ErrBadActor is returned by Create and ValidateActor for an actor name
	// that breaks the rules of ValidateActor.
	ErrBadActor = errors.New("auth: bad actor name")
)

// Token is one stored token, without the token itself.
type Token struct {
	ID        string    `json:"id"`
	Actor     string    `json:"actor"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"created_at"`
}

type tokenFile struct {
	Tokens []Token `json:"tokens"`
}

// TokenStore is a file of token hashes. It is safe for concurrent use within
// one process; concurrent writers in several processes are not coordinated
// (last write wins), which is fine for an operator's CLI.
type TokenStore struct {
	path string

	mu      sync.Mutex
	tokens  []Token
	byHash  map[string]*Token
	modTime time.Time
	size    int64
}

// OpenTokenStore opens the store at path. A missing file is an empty store;
// it is created by the first Create.
func OpenTokenStore(path string) (*TokenStore, error) {
	if path == "" {
		return nil, errors.New("auth: token file path is empty (set --tokens)")
	}
	s := &TokenStore{path: path}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(true); err != nil {
		return nil, err
	}
	return s, nil
}

// Path is the file the store lives in.
func (s *TokenStore) Path() string { return s.path }

// Create makes a new token for actor, stores its hash and returns the token.
// The token cannot be recovered later: print it once.
func (s *TokenStore) Create(actor string) (string, error) {
	if err := ValidateActor(actor); err != nil {
		return "", err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("auth: reading random bytes: %w", err)
	}
	token := Prefix + base64.RawURLEncoding.EncodeToString(raw[:])
	sum := hashToken(token)

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(false); err != nil {
		return "", err
	}
	next := append(append([]Token(nil), s.tokens...), Token{
		ID:        "tok_" + sum[:12],
		Actor:     actor,
		SHA256:    sum,
		CreatedAt: time.Now().UTC().Truncate(time.Second),
	})
	if err := s.writeLocked(next); err != nil {
		return "", err
	}
	return token, nil
}

// Verify returns the actor and token id of token, or ErrInvalidToken.
func (s *TokenStore) Verify(_ context.Context, token string) (actor, tokenID string, err error) {
	if !strings.HasPrefix(token, Prefix) {
		return "", "", ErrInvalidToken
	}
	sum := hashToken(token)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(false); err != nil {
		return "", "", err
	}
	t, ok := s.byHash[sum]
	if !ok {
		return "", "", ErrInvalidToken
	}
	return t.Actor, t.ID, nil
}

// HasActor reports whether the actor holds at least one live token.
func (s *TokenStore) HasActor(actor string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(false); err != nil {
		return false, err
	}
	for _, t := range s.tokens {
		if t.Actor == actor {
			return true, nil
		}
	}
	return false, nil
}

// List returns the stored tokens (hashes only), oldest first.
func (s *TokenStore) List() ([]Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(false); err != nil {
		return nil, err
	}
	return append([]Token(nil), s.tokens...), nil
}

// Revoke removes the token with the given id, or every token of the given
// actor, and returns how many were removed.
func (s *TokenStore) Revoke(idOrActor string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(false); err != nil {
		return 0, err
	}
	var keep []Token
	for _, t := range s.tokens {
		if t.ID != idOrActor && t.Actor != idOrActor {
			keep = append(keep, t)
		}
	}
	n := len(s.tokens) - len(keep)
	if n == 0 {
		return 0, fmt.Errorf("%w: no token has id or actor %q (see `latch token list`)", ErrNotFound, idOrActor)
	}
	if err := s.writeLocked(keep); err != nil {
		return 0, err
	}
	return n, nil
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// reloadLocked re-reads the file when its size or modification time changed.
func (s *TokenStore) reloadLocked(force bool) error {
	fi, err := os.Stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		s.setLocked(nil)
		s.modTime, s.size = time.Time{}, 0
		return nil
	}
	if err != nil {
		return fmt.Errorf("auth: reading token file: %w", err)
	}
	if !force && fi.ModTime().Equal(s.modTime) && fi.Size() == s.size && s.byHash != nil {
		return nil
	}
	data, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("auth: reading token file: %w", err)
	}
	var f tokenFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("auth: token file %s is not valid: %w", s.path, err)
	}
	s.setLocked(f.Tokens)
	s.modTime, s.size = fi.ModTime(), fi.Size()
	return nil
}

func (s *TokenStore) setLocked(tokens []Token) {
	sort.SliceStable(tokens, func(i, j int) bool { return tokens[i].CreatedAt.Before(tokens[j].CreatedAt) })
	s.tokens = tokens
	s.byHash = make(map[string]*Token, len(tokens))
	for i := range s.tokens {
		s.byHash[s.tokens[i].SHA256] = &s.tokens[i]
	}
}

// writeLocked replaces the file atomically and durably (atomicfile).
func (s *TokenStore) writeLocked(tokens []Token) error {
	if tokens == nil {
		tokens = []Token{}
	}
	data, err := json.MarshalIndent(tokenFile{Tokens: tokens}, "", "  ")
	if err != nil {
		return fmt.Errorf("auth: encoding token file: %w", err)
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("auth: creating token directory: %w", err)
	}
	if err := atomicfile.Write(s.path, append(data, '\n'), 0o600, true); err != nil {
		return fmt.Errorf("auth: writing token file: %w", err)
	}
	return s.reloadLocked(true)
}
