package auth_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/internal/egress"
	"github.com/latchhq/latch/internal/testing/oauthtest"
	"github.com/latchhq/latch/internal/testing/testlog"
	"github.com/latchhq/latch/mcpfront/auth"
)

const resource = "https://mcp.example.com/mcp"

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newVerifier(t *testing.T, is *oauthtest.Issuer, mod func(*auth.JWTConfig)) (*auth.JWTVerifier, *clock) {
	t.Helper()
	clk := &clock{now: time.Now()}
	cfg := auth.JWTConfig{
		Logger:   testlog.New(t, hclog.Trace),
		Issuers:  []auth.Issuer{{URL: is.URL}},
		Resource: resource,
		Now:      clk.Now,
	}
	if mod != nil {
		mod(&cfg)
	}
	v, err := auth.NewJWTVerifier(cfg)
	if err != nil {
		t.Fatalf("NewJWTVerifier: %v", err)
	}
	return v, clk
}

func with(claims map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range claims {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
			continue
		}
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func TestJWTVerify(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	other := oauthtest.NewIssuer(t) // a real issuer that is not configured
	v, _ := newVerifier(t, is, nil)
	now := time.Now()
	good := is.Claims("alice", resource)
	pemKey := is.PublicKeyPEM(t)
	jwk := is.JWKS().Keys[0]
	jwkJSON, _ := jwk.MarshalJSON()
	_, strayKey, _ := ed25519.GenerateKey(rand.Reader)

	tests := []struct {
		name      string
		token     string
		wantActor string // "" means refused
		wantErr   string // part of the refusal reason
	}{
		{"valid", is.Token(t, good), "alice", ""},
		{"audience list holding the resource", is.Token(t, with(good, "aud", []string{"https://other.example.com", resource})), "alice", ""},
		{"audience with a trailing slash", is.Token(t, with(good, "aud", resource+"/")), "alice", ""},
		{"expired within the leeway", is.Token(t, with(good, "exp", now.Add(-10*time.Second).Unix())), "alice", ""},
		{"expired", is.Token(t, with(good, "exp", now.Add(-2*time.Minute).Unix())), "", "expired"},
		{"no exp", is.Token(t, with(good, "exp", nil)), "", "no exp"},
		{"not valid yet", is.Token(t, with(good, "nbf", now.Add(5*time.Minute).Unix())), "", "not valid yet"},
		{"issued in the future", is.Token(t, with(good, "iat", now.Add(5*time.Minute).Unix())), "", "future"},
		{"wrong audience", is.Token(t, with(good, "aud", "https://other.example.com/mcp")), "", "audience"},
		{"no audience", is.Token(t, with(good, "aud", nil)), "", "audience"},
		{"audience of another path", is.Token(t, with(good, "aud", "https://mcp.example.com/other")), "", "audience"},
		{"wrong issuer", other.Token(t, other.Claims("alice", resource)), "", "not configured"},
		{"no issuer", is.Token(t, with(good, "iss", nil)), "", "not configured"},
		{"configured iss, signed by another issuer's key", other.Token(t, good), "", "verifies the signature"},
		{"configured kid, signed by a stray key", oauthtest.Sign(t, jose.EdDSA, strayKey, is.KeyID(), good), "", "verifies the signature"},
		{"alg none", oauthtest.Forge(t, map[string]any{"alg": "none", "typ": "JWT", "kid": is.KeyID()}, good, nil), "", "asymmetric"},
		{"alg None", oauthtest.Forge(t, map[string]any{"alg": "None", "kid": is.KeyID()}, good, nil), "", "asymmetric"},
		{"HS256 keyed with the public key PEM", oauthtest.Forge(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": is.KeyID()}, good, pemKey), "", "asymmetric"},
		{"HS256 keyed with the public JWK", oauthtest.Forge(t, map[string]any{"alg": "HS256", "kid": is.KeyID()}, good, jwkJSON), "", "asymmetric"},
		{"HS512 keyed with the public key PEM", oauthtest.Forge(t, map[string]any{"alg": "HS512", "kid": is.KeyID()}, good, pemKey), "", "asymmetric"},
		{"no actor claim", is.Token(t, with(good, "sub", nil)), "", `no "sub" claim`},
		{"sub not a string", is.Token(t, with(good, "sub", 42)), "", "malformed"},
		{"actor claim not a string", is.Token(t, with(good, "sub", []string{"alice"})), "", "malformed"},
		{"actor claim with a space", is.Token(t, with(good, "sub", "alice smith")), "", "actor name"},
		{"actor claim with a control character", is.Token(t, with(good, "sub", "alice\n")), "", "actor name"},
		{"garbage", "a.b.c", "", "asymmetric"},
		{"oversized", strings.Repeat("a", 20000) + ".b.c", "", "bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := v.Verify(context.Background(), tt.token)
			if tt.wantActor != "" {
				if err != nil {
					t.Fatalf("Verify: %v, want actor %q", err, tt.wantActor)
				}
				if id.Actor != tt.wantActor || id.Issuer != is.URL || !strings.HasPrefix(id.TokenID, "jwt_") {
					t.Errorf("Verify = %+v, want actor %q issuer %s and a jwt_ token id", id, tt.wantActor, is.URL)
				}
				return
			}
			if !errors.Is(err, auth.ErrInvalidToken) {
				t.Fatalf("Verify error = %v, want ErrInvalidToken", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Verify error = %q, want it to say %q", err, tt.wantErr)
			}
		})
	}
}

// A typ header other than JWT/at+jwt on a properly signed token is refused.
func TestJWTTypeHeader(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	v, _ := newVerifier(t, is, nil)
	for _, tt := range []struct {
		typ string
		ok  bool
	}{{"JWT", true}, {"at+jwt", true}, {"application/at+jwt", true}, {"logout+jwt", false}, {"dpop+jwt", false}} {
		_, err := v.Verify(context.Background(), is.TokenWithType(t, tt.typ, is.Claims("alice", resource)))
		if (err == nil) != tt.ok {
			t.Errorf("typ %q: Verify error = %v, want accepted %t", tt.typ, err, tt.ok)
		}
	}
}

// Keys rotate: a token naming an unknown kid makes the verifier refetch the
// JWKS, at most once per RefreshInterval.
func TestJWTKeyRotation(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	v, clk := newVerifier(t, is, func(c *auth.JWTConfig) { c.RefreshInterval = 10 * time.Second })
	ctx := context.Background()
	if _, err := v.Verify(ctx, is.Token(t, is.Claims("alice", resource))); err != nil {
		t.Fatalf("Verify with k1: %v", err)
	}
	if got := is.JWKSFetches(); got != 1 {
		t.Fatalf("JWKS fetches after the first token = %d, want 1", got)
	}
	old := is.Token(t, is.Claims("alice", resource))
	is.Rotate(t, "k2")
	rotated := is.Token(t, is.Claims("bob", resource))

	// Within the refresh interval of the first fetch: no refetch, refused.
	clk.Advance(time.Second)
	if _, err := v.Verify(ctx, rotated); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("Verify with k2 inside the refresh interval: error = %v, want ErrInvalidToken", err)
	}
	if got := is.JWKSFetches(); got != 1 {
		t.Fatalf("JWKS fetches inside the refresh interval = %d, want still 1", got)
	}
	// Cached keys still verify meanwhile, without fetching.
	if _, err := v.Verify(ctx, old); err != nil {
		t.Fatalf("Verify with cached k1: %v", err)
	}

	clk.Advance(10 * time.Second)
	id, err := v.Verify(ctx, rotated)
	if err != nil {
		t.Fatalf("Verify with k2 after the refresh interval: %v", err)
	}
	if id.Actor != "bob" {
		t.Errorf("actor = %q, want bob", id.Actor)
	}
	if got := is.JWKSFetches(); got != 2 {
		t.Fatalf("JWKS fetches after rotation = %d, want 2", got)
	}

	// A flood of made-up key ids fetches nothing more within the interval.
	for i := range 50 {
		forged := is.TokenWithKeyID(t, "forged-"+string(rune('a'+i%26)), is.Claims("mallory", resource))
		if _, err := v.Verify(ctx, forged); !errors.Is(err, auth.ErrInvalidToken) {
			t.Fatalf("Verify with an unknown kid: error = %v, want ErrInvalidToken", err)
		}
	}
	if got := is.JWKSFetches(); got != 2 {
		t.Errorf("JWKS fetches after 50 unknown key ids = %d, want 2 (bounded)", got)
	}
	// The retired key is gone from the set: refused.
	if _, err := v.Verify(ctx, old); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("Verify with the retired k1: error = %v, want ErrInvalidToken", err)
	}
}

// Keys older than MaxKeyAge are refetched even for a known kid.
func TestJWTMaxKeyAge(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	v, clk := newVerifier(t, is, func(c *auth.JWTConfig) { c.MaxKeyAge = time.Minute })
	tok := is.Token(t, is.Claims("alice", resource))
	for range 3 {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(2 * time.Minute)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if got := is.JWKSFetches(); got != 2 {
		t.Errorf("JWKS fetches = %d, want 2 (one at start, one after MaxKeyAge)", got)
	}
}

func TestJWTKeysUnavailable(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	v, _ := newVerifier(t, is, func(c *auth.JWTConfig) { c.Issuers = []auth.Issuer{{URL: is.URL, JWKSURL: deadURL + "/jwks"}} })
	_, err := v.Verify(context.Background(), is.Token(t, is.Claims("alice", resource)))
	if !errors.Is(err, auth.ErrKeysUnavailable) {
		t.Fatalf("Verify with an unreachable JWKS: error = %v, want ErrKeysUnavailable", err)
	}
	if err := v.Warm(context.Background()); !errors.Is(err, auth.ErrKeysUnavailable) {
		t.Errorf("Warm with an unreachable JWKS: error = %v, want ErrKeysUnavailable", err)
	}
}

// An explicit JWKS URL is used as given, without discovery.
func TestJWTExplicitJWKSURL(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	v, _ := newVerifier(t, is, func(c *auth.JWTConfig) { c.Issuers = []auth.Issuer{{URL: is.URL, JWKSURL: is.URL + "/jwks"}} })
	if _, err := v.Verify(context.Background(), is.Token(t, is.Claims("alice", resource))); err != nil {
		t.Fatal(err)
	}
}

// Discovery refuses metadata that names another issuer (RFC 8414 §3.3) and
// finds RFC 8414 metadata with path insertion.
func TestJWTDiscovery(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	jwks := is.JWKS()
	var base string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server/tenant", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"issuer":"` + base + `/tenant","jwks_uri":"` + base + `/keys"}`))
	})
	mux.HandleFunc("GET /evil/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"issuer":"https://attacker.example.com","jwks_uri":"` + base + `/keys"}`))
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		b, _ := jwksJSON(jwks)
		w.Write(b)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base = srv.URL

	v, _ := newVerifier(t, is, func(c *auth.JWTConfig) { c.Issuers = []auth.Issuer{{URL: base + "/tenant"}} })
	tok := is.Token(t, with(is.Claims("alice", resource), "iss", base+"/tenant"))
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("Verify through RFC 8414 discovery: %v", err)
	}

	v, _ = newVerifier(t, is, func(c *auth.JWTConfig) { c.Issuers = []auth.Issuer{{URL: base + "/evil"}} })
	err := v.Warm(context.Background())
	if !errors.Is(err, auth.ErrKeysUnavailable) || !strings.Contains(err.Error(), "attacker.example.com") {
		t.Errorf("Warm with metadata naming another issuer: error = %v, want ErrKeysUnavailable naming it", err)
	}
}

func jwksJSON(set jose.JSONWebKeySet) ([]byte, error) {
	var parts []string
	for _, k := range set.Keys {
		b, err := k.MarshalJSON()
		if err != nil {
			return nil, err
		}
		parts = append(parts, string(b))
	}
	return []byte(`{"keys":[` + strings.Join(parts, ",") + `]}`), nil
}

func TestJWTActorRules(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	tests := []struct {
		name      string
		mod       func(*auth.JWTConfig)
		claims    map[string]any
		wantActor string
	}{
		{"sub by default", nil, is.Claims("alice", resource), "alice"},
		{"another claim", func(c *auth.JWTConfig) { c.ActorClaim = "email" }, with(is.Claims("x", resource), "email", "alice@example.com"), "alice@example.com"},
		{"prefix", func(c *auth.JWTConfig) { c.ActorPrefix = "oidc:" }, is.Claims("alice", resource), "oidc:alice"},
		{"map", func(c *auth.JWTConfig) { c.ActorMap = map[string]string{"00u1abc": "alice"} }, is.Claims("00u1abc", resource), "alice"},
		{"map refuses unlisted", func(c *auth.JWTConfig) { c.ActorMap = map[string]string{"00u1abc": "alice"} }, is.Claims("00u2xyz", resource), ""},
		{"prefix keeps the length rule", func(c *auth.JWTConfig) { c.ActorPrefix = "p:" }, is.Claims(strings.Repeat("a", auth.MaxActorLen-1), resource), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, _ := newVerifier(t, is, tt.mod)
			id, err := v.Verify(context.Background(), is.Token(t, tt.claims))
			if tt.wantActor == "" {
				if !errors.Is(err, auth.ErrInvalidToken) {
					t.Fatalf("Verify error = %v, want ErrInvalidToken", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if id.Actor != tt.wantActor {
				t.Errorf("actor = %q, want %q", id.Actor, tt.wantActor)
			}
		})
	}
}

func TestJWTScopes(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	v, _ := newVerifier(t, is, nil)
	for _, tt := range []struct {
		claims map[string]any
		want   []string
	}{
		{with(is.Claims("a", resource), "scope", "mcp:tools read"), []string{"mcp:tools", "read"}},
		{with(is.Claims("a", resource), "scp", []string{"mcp:tools"}), []string{"mcp:tools"}},
		{with(is.Claims("a", resource), "scp", "x y"), []string{"x", "y"}},
		{is.Claims("a", resource), nil},
	} {
		id, err := v.Verify(context.Background(), is.Token(t, tt.claims))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, id.Scopes); diff != "" {
			t.Errorf("scopes (-want +got):\n%s", diff)
		}
	}
}

func TestNewJWTVerifierRefuses(t *testing.T) {
	good := auth.Issuer{URL: "https://idp.example.com"}
	tests := []struct {
		name string
		cfg  auth.JWTConfig
		want string
	}{
		{"no issuer", auth.JWTConfig{Resource: resource}, "no issuer"},
		{"plain http issuer", auth.JWTConfig{Resource: resource, Issuers: []auth.Issuer{{URL: "http://idp.example.com"}}}, "loopback"},
		{"plain http JWKS", auth.JWTConfig{Resource: resource, Issuers: []auth.Issuer{{URL: good.URL, JWKSURL: "http://idp.example.com/jwks"}}}, "loopback"},
		{"duplicate issuer", auth.JWTConfig{Resource: resource, Issuers: []auth.Issuer{good, good}}, "twice"},
		{"no resource", auth.JWTConfig{Issuers: []auth.Issuer{good}}, "resource URL"},
		{"bad mapped actor", auth.JWTConfig{Resource: resource, Issuers: []auth.Issuer{good}, ActorMap: map[string]string{"x": "two words"}}, "actor map"},
		{"huge leeway", auth.JWTConfig{Resource: resource, Issuers: []auth.Issuer{good}, Leeway: time.Hour}, "leeway"},
	}
	for _, tt := range tests {
		_, err := auth.NewJWTVerifier(tt.cfg)
		if !errors.Is(err, auth.ErrBadJWTConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewJWTVerifier error = %v, want ErrBadJWTConfig saying %q", tt.name, err, tt.want)
		}
	}
}

func TestLooksLikeJWT(t *testing.T) {
	for tok, want := range map[string]bool{
		"eyJh.eyJz.sig": true,
		"latch_" + base64.RawURLEncoding.EncodeToString(make([]byte, 32)): false,
		"latch_a.b.c": false,
		"a.b":         false,
		"a.b.c.d.e":   false,
	} {
		if got := auth.LooksLikeJWT(tok); got != want {
			t.Errorf("LooksLikeJWT(%q) = %t, want %t", tok, got, want)
		}
	}
}

func TestMetadata(t *testing.T) {
	v, err := auth.NewJWTVerifier(auth.JWTConfig{Resource: resource, Issuers: []auth.Issuer{{URL: "https://a.example.com"}, {URL: "https://b.example.com/tenant"}}})
	if err != nil {
		t.Fatal(err)
	}
	m := v.Metadata()
	if diff := cmp.Diff([]string{"https://a.example.com", "https://b.example.com/tenant"}, m.AuthorizationServers); diff != "" {
		t.Errorf("authorization_servers (-want +got):\n%s", diff)
	}
	if m.Resource != resource || !cmp.Equal(m.BearerMethodsSupported, []string{"header"}) {
		t.Errorf("metadata = %+v, want resource %s and bearer methods [header]", m, resource)
	}
}

// Many goroutines verifying across a key rotation: no race, and the JWKS is
// fetched at most once per refresh interval however many tokens name the
// new key at once.
func TestJWTConcurrentRotation(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	v, clk := newVerifier(t, is, nil)
	ctx := context.Background()
	if _, err := v.Verify(ctx, is.Token(t, is.Claims("alice", resource))); err != nil {
		t.Fatal(err)
	}
	is.Rotate(t, "k2")
	clk.Advance(auth.DefaultRefreshInterval)
	tok := is.Token(t, is.Claims("bob", resource))
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := v.Verify(ctx, tok); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Verify after rotation: %v", err)
	}
	if got := is.JWKSFetches(); got != 2 {
		t.Errorf("JWKS fetches = %d, want 2 (32 concurrent tokens with a new kid share one fetch)", got)
	}
}

// Nothing panics on input, and nothing but a valid token is accepted.
func FuzzJWTVerify(f *testing.F) {
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.")
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.e30.AAAA")
	f.Fuzz(func(t *testing.T, tok string) {
		v, err := auth.NewJWTVerifier(auth.JWTConfig{
			Issuers:  []auth.Issuer{{URL: "https://idp.example.com", JWKSURL: "https://127.0.0.1:1/jwks"}},
			Resource: resource,
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(context.Background(), tok); err == nil {
			t.Fatalf("Verify(%q) accepted a token no key signed", tok)
		}
	})
}

func BenchmarkJWTVerify(b *testing.B) {
	for _, alg := range []string{"RS256", "EdDSA"} {
		b.Run(alg, func(b *testing.B) {
			is := oauthtest.NewIssuer(b)
			if alg == "EdDSA" {
				is.Rotate(b, "ed")
			}
			v, err := auth.NewJWTVerifier(auth.JWTConfig{Issuers: []auth.Issuer{{URL: is.URL}}, Resource: resource})
			if err != nil {
				b.Fatal(err)
			}
			tok := is.Token(b, is.Claims("alice", resource))
			if _, err := v.Verify(context.Background(), tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := v.Verify(context.Background(), tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestJWKSFetchAddressPolicy: keys are fetched under the address policy. An
// issuer on a public name may not point the front at loopback (nor private
// addresses) for its keys unless AllowPrivate (--oauth-allow-private): the
// loopback JWKS server receives nothing, and the error says why.
func TestJWKSFetchAddressPolicy(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	for _, allow := range []bool{false, true} {
		v, _ := newVerifier(t, is, func(c *auth.JWTConfig) {
			c.Issuers = []auth.Issuer{{URL: "https://idp.example.test", JWKSURL: is.URL + "/jwks"}}
			c.AllowPrivate = allow
		})
		err := v.Warm(t.Context())
		if allow {
			if err != nil || is.JWKSFetches() != 1 {
				t.Fatalf("Warm with AllowPrivate = %v, %d JWKS fetches; want the keys fetched once", err, is.JWKSFetches())
			}
			continue
		}
		if !errors.Is(err, egress.ErrRefused) || !errors.Is(err, auth.ErrKeysUnavailable) || !strings.Contains(err.Error(), "--oauth-allow-private") {
			t.Fatalf("Warm = %v; want ErrKeysUnavailable and ErrRefused naming --oauth-allow-private", err)
		}
		if n := is.JWKSFetches(); n != 0 {
			t.Fatalf("the refused JWKS server got %d fetches, want 0", n)
		}
	}
}

// TestJWKSFetchRedirects: a redirect within the issuer's origin is followed;
// one to another origin (another loopback port) is not, and that origin gets
// no request.
func TestJWKSFetchRedirects(t *testing.T) {
	other := oauthtest.NewIssuer(t)
	is := oauthtest.NewIssuer(t)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved-here":
			http.Redirect(w, r, "/keys", http.StatusFound)
		case "/keys":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(is.JWKS())
		default:
			http.Redirect(w, r, other.URL+"/jwks", http.StatusFound)
		}
	}))
	t.Cleanup(front.Close)
	tests := []struct {
		name, jwks string
		want       error
	}{
		{"same origin", front.URL + "/moved-here", nil},
		{"other origin", front.URL + "/jwks", egress.ErrRedirect},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, _ := newVerifier(t, is, func(c *auth.JWTConfig) {
				c.Issuers = []auth.Issuer{{URL: front.URL, JWKSURL: tt.jwks}}
			})
			err := v.Warm(t.Context())
			if tt.want == nil && err != nil {
				t.Fatalf("Warm = %v, want the keys through the same-origin redirect", err)
			}
			if tt.want != nil && (!errors.Is(err, tt.want) || !strings.Contains(err.Error(), strings.TrimPrefix(other.URL, "http://"))) {
				t.Fatalf("Warm = %v; want %v naming %s", err, tt.want, other.URL)
			}
		})
	}
	if n := other.JWKSFetches(); n != 0 {
		t.Errorf("the other origin got %d JWKS fetches, want 0", n)
	}
}

// TestJWTActorInvisibleCharacters: a claim that would make an actor name
// with invisible characters (shown as "dev" in `latch exec list` and the
// console) or in a non-NFC form is refused, saying why.
func TestJWTActorInvisibleCharacters(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	v, _ := newVerifier(t, is, nil)
	for _, tt := range []struct{ sub, why string }{
		{"dev\u200b", "U+200B"},
		{"dev\u00a0", "U+00A0"},
		{"a\u202eb", "U+202E"},
		{"\u0085x", "U+0085"},
		{"e\u0301", "NFC"},
	} {
		_, err := v.Verify(context.Background(), is.Token(t, is.Claims(tt.sub, resource)))
		if !errors.Is(err, auth.ErrInvalidToken) || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("Verify(sub %q) error = %v, want ErrInvalidToken naming %s", tt.sub, err, tt.why)
		}
	}
}
