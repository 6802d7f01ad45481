package vault

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/httpdispatch"
	"github.com/latchhq/latch/internal/egress"
	"github.com/latchhq/latch/internal/testing/testlog"
	"github.com/latchhq/latch/tools"
)

const (
	oauthClientID = "latch-client"
	oauthSecret   = "client-secret-0123456789"
)

// oauthServer is a token endpoint (client credentials grant) and an API that
// accepts only tokens it issued. The API echoes the Authorization header it
// got, so a test can see whether a token would reach a stored result.
type oauthServer struct {
	expiresIn int
	mu        sync.Mutex
	issued    map[string]bool
	fetches   int
	lastForm  map[string]string
}

func (s *oauthServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/token":
		r.ParseForm()
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		w.Header().Set("Content-Type", "application/json")
		if r.PostForm.Get("grant_type") != "client_credentials" || id != oauthClientID || secret != oauthSecret {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client","error_description":"client authentication failed"}`)
			return
		}
		s.mu.Lock()
		s.fetches++
		tok := fmt.Sprintf("access-token-%d-abcdef", s.fetches)
		s.issued[tok] = true
		s.lastForm = map[string]string{"scope": r.PostForm.Get("scope"), "audience": r.PostForm.Get("audience")}
		s.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": s.expiresIn})
	default:
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		s.mu.Lock()
		ok := s.issued[tok]
		s.mu.Unlock()
		if !ok {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"seen_authorization":%q}`, r.Header.Get("Authorization"))
	}
}

func newOAuthServer(t *testing.T, expiresIn int) (*oauthServer, *httptest.Server) {
	s := &oauthServer{expiresIn: expiresIn, issued: map[string]bool{}}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func oauthCred(tokenURL string) Credential {
	return Credential{Kind: KindOAuth2ClientCredentials, Fields: Fields{"token_url": tokenURL, "client_id": oauthClientID, "client_secret": oauthSecret, "scopes": JoinList([]string{"deploy:write", "deploy:read"}), "audience": "https://api.example.com"}}
}

// TestOAuth2ClientCredentials: through the vault and the dispatcher, the
// first call fetches a token and later calls reuse it while it is valid; a
// token about to expire is fetched again; a locked vault forgets it; the
// token and the client secret never reach a stored result or a log line.
func TestOAuth2ClientCredentials(t *testing.T) {
	srv, ts := newOAuthServer(t, 3600)
	v, _, vlog := newUnlocked(t, "correct horse battery staple")
	c := oauthCred(ts.URL + "/token")
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	if err := v.Put("api", c); err != nil {
		t.Fatal(err)
	}
	dlog := testlog.New(t, hclog.Trace)
	d := newDispatcher(t, dlog)
	var offset time.Duration // the cache's clock runs this far ahead
	var bodies []string
	call := func(i int) {
		t.Helper()
		got, err := v.Get("api") // a fresh Get per call, as the HTTP channel does
		if err != nil {
			t.Fatal(err)
		}
		got.tokens.now = func() time.Time { return time.Now().Add(offset) }
		kind, err := got.HTTP()
		if err != nil {
			t.Fatal(err)
		}
		obs, err := d.Send(t.Context(), httpdispatch.Call{
			ExecutionID: fmt.Sprintf("act_%d", i),
			Target:      &tools.Target{Name: "api", Channel: tools.ChannelHTTP, HTTPTarget: tools.HTTPTarget{BaseURL: ts.URL, AllowPrivate: true}},
			Method:      http.MethodGet, Path: "/v1/things", Credential: kind,
		})
		if err != nil || obs.Status != http.StatusOK {
			t.Fatalf("call %d: %v, %+v; want 200", i, err, obs)
		}
		bodies = append(bodies, string(obs.Body))
	}
	call(0)
	call(1)
	call(2)
	if srv.fetches != 1 {
		t.Errorf("token fetches after three calls = %d, want 1 (the token is valid for an hour)", srv.fetches)
	}
	offset = time.Hour - 10*time.Second // within the margin of expiry
	call(3)
	if srv.fetches != 2 {
		t.Errorf("token fetches once the token is about to expire = %d, want 2", srv.fetches)
	}
	if srv.lastForm["scope"] != "deploy:write deploy:read" || srv.lastForm["audience"] != "https://api.example.com" {
		t.Errorf("token request form = %v, want the scopes and the audience", srv.lastForm)
	}
	var secrets []string
	for tok := range srv.issued {
		secrets = append(secrets, tok)
	}
	secrets = append(secrets, oauthSecret)
	for _, b := range bodies {
		assertNoSecret(t, "stored body", b, secrets)
	}
	assertNoSecret(t, "dispatcher log", dlog.Logged(), secrets)
	assertNoSecret(t, "vault log", vlog.Logged(), secrets)

	offset = 0
	v.Lock()
	if err := v.Unlock([]byte("correct horse battery staple")); err != nil {
		t.Fatal(err)
	}
	call(4)
	if srv.fetches != 3 {
		t.Errorf("after lock and unlock: fetches %d, want 3 (a locked vault forgets its tokens)", srv.fetches)
	}
}

// TestOAuth2RefusedClientSaysWhy: a token endpoint refusing the client is
// an Apply error naming the endpoint's answer, never the secret; the
// dispatcher sends nothing to the API.
func TestOAuth2RefusedClientSaysWhy(t *testing.T) {
	_, ts := newOAuthServer(t, 3600)
	c := oauthCred(ts.URL + "/token")
	c.Fields["client_secret"] = "wrong-secret-0123456789"
	kind, err := c.HTTP()
	if err != nil {
		t.Fatal(err)
	}
	d := newDispatcher(t, hclog.NewNullLogger())
	_, err = d.Send(t.Context(), httpdispatch.Call{
		ExecutionID: "act_x", Target: &tools.Target{Name: "api", Channel: tools.ChannelHTTP, HTTPTarget: tools.HTTPTarget{BaseURL: ts.URL, AllowPrivate: true}},
		Method: http.MethodGet, Path: "/v1/things", Credential: kind,
	})
	if err == nil || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("Send with a refused client = %v; want the endpoint's invalid_client and no secret", err)
	}
}

func TestOAuth2Validate(t *testing.T) {
	checkValidate(t, func() Credential { return oauthCred("http://127.0.0.1:9/token") }, oauthSecret, []validateCase{
		{"complete", func(*Credential) {}, true},
		{"no scopes or audience", func(c *Credential) { c.Fields["scopes"], c.Fields["audience"] = "", "" }, true},
		{"https elsewhere", func(c *Credential) { c.Fields["token_url"] = "https://auth.example.com/oauth/token" }, true},
		{"plain http elsewhere", func(c *Credential) { c.Fields["token_url"] = "http://auth.example.com/token" }, false},
		{"user info in the URL", func(c *Credential) { c.Fields["token_url"] = "https://u:p@auth.example.com/token" }, false},
		{"no secret", func(c *Credential) { c.Fields["client_secret"] = "" }, false},
		{"scope with a space", func(c *Credential) { c.Fields["scopes"] = JoinList([]string{"a b"}) }, false},
		{"field of another kind", func(c *Credential) { c.Fields["password"] = "x" }, false},
	})
	for _, v := range []any{oauthCred("x"), mustHTTP(t, oauthCred("http://127.0.0.1:9/t")), mustHTTP(t, sigv4Cred("tok-secret"))} {
		for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
			if s := fmt.Sprintf(format, v); strings.Contains(s, oauthSecret) || strings.Contains(s, testSecret) || strings.Contains(s, "tok-secret") {
				t.Errorf("Sprintf(%s) = %s, shows a secret", format, s)
			}
		}
		if b, _ := json.Marshal(v); strings.Contains(string(b), oauthSecret) || strings.Contains(string(b), testSecret) {
			t.Errorf("json.Marshal = %s, shows a secret", b)
		}
	}
}

func mustHTTP(t *testing.T, c Credential) HTTPCredential {
	t.Helper()
	h, err := c.HTTP()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestOAuth2TokenFetchEgress: the token request goes only where token_url
// says, under the address policy. A token endpoint answering 307 to another
// origin (another loopback port) does not get the client secret re-sent
// there, and an address the policy refuses is never connected to (here
// loopback, under a policy without private addresses, so that the test
// itself never sends a packet off this machine); both are errors saying
// why, without the secret.
func TestOAuth2TokenFetchEgress(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		http.Error(w, "no", http.StatusTeapot)
	}))
	t.Cleanup(other.Close)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/token", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirecting.Close)
	tests := []struct {
		name, tokenURL string
		strict         bool // a policy refusing loopback
		want           error
		says           string
	}{
		{"cross-origin redirect", redirecting.URL + "/token", false, egress.ErrRedirect, strings.TrimPrefix(other.URL, "http://")},
		{"refused address", other.URL + "/token", true, egress.ErrRefused, "loopback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.strict {
				prev := tokenClient
				tokenClient = egress.NewClient(egress.Config{Timeout: tokenFetchTimeout}, nil)
				t.Cleanup(func() { tokenClient = prev })
			}
			c := oauthCred(tt.tokenURL)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			kind := mustHTTP(t, c)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://api.example.com/v1", nil)
			err := kind.Apply(req)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("Apply() = %v; want %v, saying %q", err, tt.want, tt.says)
			}
			assertNoSecret(t, "Apply error", err.Error(), []string{oauthSecret})
			if req.Header.Get("Authorization") != "" {
				t.Errorf("Apply set Authorization %q after a failed token fetch", req.Header.Get("Authorization"))
			}
		})
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect's target or the refused address got %d token requests, want 0", n)
	}
}
