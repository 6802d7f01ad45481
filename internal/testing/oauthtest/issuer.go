// Package oauthtest is a local OAuth authorization server for tests: an
// httptest server on loopback that publishes OpenID Connect discovery and a
// JWKS, and signs access tokens with keys made by the test. Test support
// only: no binary may link it (internal/testing/testbin.TestSupport).
package oauthtest

import (
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer is a test authorization server. Its identifier is URL.
type Issuer struct {
	URL string

	srv         *httptest.Server
	jwksFetches atomic.Int64

	mu      sync.Mutex
	signing key   // signs new tokens
	served  []key // published in the JWKS
}

type key struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

// NewIssuer starts an issuer with one RSA-2048 key, "k1" (RS256), and stops
// it when the test ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("oauthtest: generating RSA key: %v", err)
	}
	is := &Issuer{}
	is.signing = key{kid: "k1", alg: jose.RS256, priv: priv}
	is.served = []key{is.signing}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                is.URL,
			"jwks_uri":                              is.URL + "/jwks",
			"authorization_endpoint":                is.URL + "/authorize",
			"token_endpoint":                        is.URL + "/token",
			"response_types_supported":              []string{"code"},
			"code_challenge_methods_supported":      []string{"S256"},
			"id_token_signing_alg_values_supported": []string{"RS256", "EdDSA"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		is.jwksFetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(is.JWKS())
	})
	// URL is set before the server starts: handlers read it.
	is.srv = httptest.NewUnstartedServer(mux)
	is.URL = "http://" + is.srv.Listener.Addr().String()
	is.srv.Start()
	t.Cleanup(is.srv.Close)
	return is
}

// JWKS is the key set the issuer publishes (public keys only).
func (is *Issuer) JWKS() jose.JSONWebKeySet {
	is.mu.Lock()
	defer is.mu.Unlock()
	var set jose.JSONWebKeySet
	for _, k := range is.served {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
	}
	return set
}

// JWKSFetches counts the requests for the JWKS.
func (is *Issuer) JWKSFetches() int { return int(is.jwksFetches.Load()) }

// Rotate replaces the signing key with a new Ed25519 key, kid, and publishes
// only that key.
func (is *Issuer) Rotate(t testing.TB, kid string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("oauthtest: generating Ed25519 key: %v", err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.signing = key{kid: kid, alg: jose.EdDSA, priv: priv}
	is.served = []key{is.signing}
}

// Claims are valid claims for a token of this issuer: sub, aud, an hour of
// validity from now.
func (is *Issuer) Claims(sub, aud string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": is.URL, "sub": sub, "aud": aud,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"jti": base64.RawURLEncoding.EncodeToString(randBytes(9)),
	}
}

// Token signs claims with the current signing key (typ "at+jwt").
func (is *Issuer) Token(t testing.TB, claims map[string]any) string {
	t.Helper()
	is.mu.Lock()
	k := is.signing
	is.mu.Unlock()
	return Sign(t, k.alg, k.priv, k.kid, claims)
}

// TokenWithType signs claims with the current key under the given typ
// header.
func (is *Issuer) TokenWithType(t testing.TB, typ string, claims map[string]any) string {
	t.Helper()
	is.mu.Lock()
	k := is.signing
	is.mu.Unlock()
	return sign(t, k.alg, k.priv, k.kid, typ, claims)
}

// TokenWithKeyID signs claims with the current key but names kid.
func (is *Issuer) TokenWithKeyID(t testing.TB, kid string, claims map[string]any) string {
	t.Helper()
	is.mu.Lock()
	k := is.signing
	is.mu.Unlock()
	return sign(t, k.alg, k.priv, kid, "at+jwt", claims)
}

// Sign signs claims with priv under alg and kid.
func Sign(t testing.TB, alg jose.SignatureAlgorithm, priv crypto.Signer, kid string, claims map[string]any) string {
	t.Helper()
	return sign(t, alg, priv, kid, "at+jwt", claims)
}

func sign(t testing.TB, alg jose.SignatureAlgorithm, priv crypto.Signer, kid, typ string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: priv, KeyID: kid}}, (&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		t.Fatalf("oauthtest: NewSigner: %v", err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatalf("oauthtest: signing: %v", err)
	}
	return tok
}

// PublicKeyPEM is the current signing key's public key as PEM (what an
// attacker who read the JWKS has).
func (is *Issuer) PublicKeyPEM(t testing.TB) []byte {
	t.Helper()
	is.mu.Lock()
	defer is.mu.Unlock()
	der, err := x509.MarshalPKIXPublicKey(is.signing.priv.Public())
	if err != nil {
		t.Fatalf("oauthtest: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// KeyID is the current signing key's id.
func (is *Issuer) KeyID() string {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.signing.kid
}

// Forge builds a compact JWS by hand, the way an attacker does: header and
// claims as given, signed with HMAC-SHA256 under hmacKey, or with an empty
// signature when hmacKey is nil (alg "none").
func Forge(t testing.TB, header, claims map[string]any, hmacKey []byte) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	if hmacKey == nil {
		return input + "."
	}
	mac := hmac.New(sha256.New, hmacKey)
	mac.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
