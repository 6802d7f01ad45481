// Package hmacsig is a credential kind kept outside package vault, the way
// any new kind can be: it signs each HTTP request with HMAC-SHA256 over its
// method, path and body hash, sent as "X-Signature: key_id=<id>,
// sig=<hex>". A program registers it with one line,
// vault.Register(hmacsig.Kind{}); the latch binary does not (it is the
// model and the test of the kind seam: controlplane/httpdispatch's
// TestRegisteredKind). Only control-plane packages import it.
package hmacsig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/latchhq/latch/controlplane/vault"
)

// Name is the kind's name.
const Name vault.Kind = "hmac_sha256"

// Header is the request header the signature travels in.
const Header = "X-Signature"

// Kind is the hmac_sha256 credential kind: a vault.HTTPKind.
type Kind struct{}

var _ vault.HTTPKind = Kind{}

// Name is hmac_sha256.
func (Kind) Name() vault.Kind { return Name }

// Fields are key_id (which key the target should check with, not secret)
// and secret.
func (Kind) Fields() []vault.Field {
	return []vault.Field{
		{Name: "key_id", Required: true, Help: "which key the target checks the signature with"},
		{Name: "secret", Required: true, Secret: true, Help: "the HMAC key"},
	}
}

var keyIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Validate checks the key ID's form; vault.Credential.Validate has checked
// that both fields are set and the secret is long enough to redact.
func (Kind) Validate(c vault.Credential) error {
	if !keyIDRE.MatchString(c.Get("key_id")) {
		return fmt.Errorf("%w: hmac_sha256 key_id must be 1 to 64 letters, digits, '.', '_' or '-'", vault.ErrInvalidCredential)
	}
	return nil
}

// HTTP returns the signer.
func (Kind) HTTP(c vault.Credential) vault.HTTPCredential {
	return Signer{KeyID: c.Get("key_id"), Secret: []byte(c.Get("secret"))}
}

// Signer signs requests.
type Signer struct {
	KeyID  string
	Secret []byte
}

// Sign is the signature of a request: hex HMAC-SHA256 of
// "METHOD\nPATH\nhex(sha256(body))" under secret. Targets check it the
// same way.
func Sign(secret []byte, method, path string, body []byte) string {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "%s\n%s\n%s", method, path, hex.EncodeToString(sum[:]))
	return hex.EncodeToString(m.Sum(nil))
}

// Apply reads the body through r.GetBody (set by the dispatcher) and sets
// the signature header.
func (s Signer) Apply(r *http.Request) error {
	var body []byte
	if r.GetBody != nil {
		rc, err := r.GetBody()
		if err != nil {
			return fmt.Errorf("hmac_sha256: read the body to sign it: %w", err)
		}
		body, err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("hmac_sha256: read the body to sign it: %w", err)
		}
	} else if r.Body != nil && r.Body != http.NoBody {
		return errors.New("hmac_sha256: the request body cannot be re-read to sign it")
	}
	r.Header.Set(Header, "key_id="+s.KeyID+",sig="+Sign(s.Secret, r.Method, r.URL.EscapedPath(), body))
	return nil
}

// Headers is X-Signature.
func (Signer) Headers() []string { return []string{Header} }

// Secrets is the key.
func (s Signer) Secrets() [][]byte { return [][]byte{s.Secret} }

// AppliedSecrets is the signature header Apply set and the signature in
// it (httpdispatch.AppliedSecreter): a signature is one request's, but a
// target quoting it back must not get it stored.
func (Signer) AppliedSecrets(h http.Header) [][]byte {
	v := h.Get(Header)
	if v == "" {
		return nil
	}
	out := [][]byte{[]byte(v)}
	if _, sig, ok := strings.Cut(v, "sig="); ok {
		out = append(out, []byte(sig))
	}
	return out
}

// String never shows the key.
func (Signer) String() string { return "hmacsig.Signer{[redacted]}" }

// Format prints String for every verb.
func (s Signer) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }
