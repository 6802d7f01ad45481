package vault

import (
	"crypto/rand"
	"errors"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// ArgumentSealer seals data at rest under a key derived from the vault
// (DeriveKey, purpose sealerPurpose) with XChaCha20-Poly1305. The engine uses
// it for executions' secret arguments, so they survive a restart without
// ever being on disk in clear. The associated data (the execution ID) binds
// a box to its execution: one moved to another execution does not open.
//
// Its key follows the vault's data key: the same vault opens its boxes
// across restarts and lock cycles; a vault created anew (another data key)
// does not. While the vault is locked, Seal and Open fail with ErrLocked.
type ArgumentSealer struct {
	v       *Vault
	purpose string
}

// sealerPurpose is the DeriveKey purpose of the sealing key of secret
// arguments; keySealerPurpose that of the control plane's own keys kept in
// a shared store (KeySealer).
const (
	sealerPurpose    = "secret-arguments/v1"
	keySealerPurpose = "store-keys/v1"
)

// sealedVersion is the first byte of every box.
const sealedVersion = 1

// ErrUnsealable is returned by Open for a box that does not open: modified,
// bound to another execution, or sealed by another vault.
var ErrUnsealable = errors.New("vault: sealed data does not open (modified, moved, or sealed by another vault)")

// ArgumentSealer returns the vault's sealer.
func (v *Vault) ArgumentSealer() *ArgumentSealer {
	return &ArgumentSealer{v: v, purpose: sealerPurpose}
}

// KeySealer returns the sealer of the control plane's own keys (the
// fingerprint HMAC key, the journal signing key) when they are kept in a
// shared store: the same construction as ArgumentSealer under an
// independent key (another DeriveKey purpose), the key's name as the
// associated data. Every replica that opens the same vault opens them.
func (v *Vault) KeySealer() *ArgumentSealer {
	return &ArgumentSealer{v: v, purpose: keySealerPurpose}
}

// Ready reports whether the vault is unlocked, so Seal and Open can work.
func (s *ArgumentSealer) Ready() bool { return !s.v.Status().Locked }

func (s *ArgumentSealer) aead() (interface {
	Seal(dst, nonce, plaintext, ad []byte) []byte
	Open(dst, nonce, ciphertext, ad []byte) ([]byte, error)
	NonceSize() int
}, error) {
	key, err := s.v.DeriveKey(s.purpose, chacha20poly1305.KeySize)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	return chacha20poly1305.NewX(key)
}

// Seal returns version || nonce || ciphertext of plain, bound to ad.
func (s *ArgumentSealer) Seal(ad, plain []byte) ([]byte, error) {
	a, err := s.aead()
	if err != nil {
		return nil, err
	}
	out := make([]byte, 1+a.NonceSize(), 1+a.NonceSize()+len(plain)+chacha20poly1305.Overhead)
	out[0] = sealedVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("vault: read random nonce: %w", err)
	}
	return a.Seal(out, out[1:], plain, ad), nil
}

// Open returns the plaintext of a box made by Seal with the same ad.
func (s *ArgumentSealer) Open(ad, sealed []byte) ([]byte, error) {
	a, err := s.aead()
	if err != nil {
		return nil, err
	}
	if len(sealed) < 1+a.NonceSize()+chacha20poly1305.Overhead || sealed[0] != sealedVersion {
		return nil, ErrUnsealable
	}
	plain, err := a.Open(nil, sealed[1:1+a.NonceSize()], sealed[1+a.NonceSize():], ad)
	if err != nil {
		return nil, ErrUnsealable
	}
	return plain, nil
}
