package mcpfront

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/latchhq/latch/internal/testing/oauthtest"
	"github.com/latchhq/latch/mcpfront/auth"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// oauthStack is a test stack whose front trusts issuer is.
func oauthStack(t *testing.T, is *oauthtest.Issuer, mod func(*auth.JWTConfig)) *testStack {
	t.Helper()
	return newTestStack(t, stackOptions{OAuth: func(t testing.TB, resource string) *auth.JWTVerifier {
		cfg := auth.JWTConfig{Logger: testLogger(t), Issuers: []auth.Issuer{{URL: is.URL}}, Resource: resource}
		if mod != nil {
			mod(&cfg)
		}
		v, err := auth.NewJWTVerifier(cfg)
		if err != nil {
			t.Fatalf("NewJWTVerifier: %v", err)
		}
		return v
	}})
}

// metadataURLOf is the RFC 9728 metadata URL of the stack's resource.
func (st *testStack) metadataURLOf(t *testing.T) string {
	t.Helper()
	u, err := ResourceMetadataURL(st.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A JWT from a configured issuer, for this front's resource URL, makes a tool
// call as the actor its sub names, in both protocol eras; the token never
// reaches the target.
func TestOAuthToolCall(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	st := oauthStack(t, is, nil)
	for _, era := range []string{eraStateless, eraSession} {
		t.Run("era "+era, func(t *testing.T) {
			tok := is.Token(t, is.Claims("dora", st.URL))
			st.tokens["jwt"] = tok
			cs := st.connect(t, "jwt", clientOptions{Era: era})
			res, cr := call(t, cs, "deploy_release", map[string]any{"service": "api", "version": "jwt-" + era})
			if res.IsError || cr.State != "completed" || cr.Outcome != "succeeded" {
				t.Fatalf("call with a JWT = IsError %v, %+v; want completed", res.IsError, cr)
			}
			e := st.get(t, cr.ExecutionID)
			if e.GetActor() != "dora" {
				t.Errorf("execution actor = %q, want dora (the token's sub)", e.GetActor())
			}
			if id := e.GetEvidence().GetTokenId(); !strings.HasPrefix(id, "jwt_") || strings.Contains(tok, id[4:]) {
				t.Errorf("evidence token id = %q, want jwt_ and a hash prefix, not part of the token", id)
			}
		})
	}
	if n := len(st.executions(t, "dora")); n != 2 {
		t.Errorf("dora has %d executions, want 2", n)
	}
	if got := st.effect.count("/v1/releases"); got != 2 {
		t.Errorf("target hits = %d, want 2", got)
	}
	st.effect.mu.Lock()
	defer st.effect.mu.Unlock()
	for _, a := range st.effect.authz {
		if strings.Contains(a, st.tokens["jwt"]) || strings.Count(a, ".") == 2 {
			t.Errorf("the target received Authorization %q: the client's token was passed through", a)
		}
	}
}

// Static Latch tokens keep working next to JWTs.
func TestOAuthStaticTokensStillWork(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	st := oauthStack(t, is, nil)
	cs := st.connect(t, "alice", clientOptions{})
	_, cr := call(t, cs, "deploy_release", map[string]any{"service": "api", "version": "static"})
	if got := st.get(t, cr.ExecutionID); got.GetActor() != "alice" || !strings.HasPrefix(got.GetEvidence().GetTokenId(), "tok_") {
		t.Errorf("static-token call: actor %q token id %q, want alice and a tok_ id", got.GetActor(), got.GetEvidence().GetTokenId())
	}
}

// Every bad token is a 401 with error="invalid_token" and the metadata URL;
// a request without credentials gets the metadata URL and no error code.
func TestOAuthRefusals(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	other := oauthtest.NewIssuer(t)
	st := oauthStack(t, is, nil)
	good := is.Claims("dora", st.URL)
	now := time.Now()
	header := map[string]any{"alg": "HS256", "typ": "JWT", "kid": is.KeyID()}
	tests := []struct {
		name  string
		token string // "" sends no Authorization
	}{
		{"expired", is.Token(t, with(good, "exp", now.Add(-time.Hour).Unix()))},
		{"wrong audience", is.Token(t, with(good, "aud", "https://elsewhere.example.com/mcp"))},
		{"audience of another front on this host", is.Token(t, with(good, "aud", strings.TrimSuffix(st.URL, "/mcp")+"/other"))},
		{"wrong issuer", other.Token(t, other.Claims("dora", st.URL))},
		{"alg none", oauthtest.Forge(t, map[string]any{"alg": "none", "typ": "JWT"}, good, nil)},
		{"HS256 keyed with the public key", oauthtest.Forge(t, header, good, is.PublicKeyPEM(t))},
		{"bad static token", "latch_notAToken"},
		{"no token", ""},
	}
	metaURL := st.metadataURLOf(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := rawInitialize(t, st.URL, tt.token)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status = %d, want 401", resp.StatusCode)
			}
			chal := resp.Header.Get("WWW-Authenticate")
			cs, err := oauthex.ParseWWWAuthenticate([]string{chal})
			if err != nil || len(cs) != 1 || cs[0].Scheme != "bearer" {
				t.Fatalf("WWW-Authenticate %q: %v, want one Bearer challenge", chal, err)
			}
			if cs[0].Params["resource_metadata"] != metaURL {
				t.Errorf("resource_metadata = %q, want %q", cs[0].Params["resource_metadata"], metaURL)
			}
			wantErr := "invalid_token"
			if tt.token == "" {
				wantErr = ""
			}
			if cs[0].Params["error"] != wantErr {
				t.Errorf("error = %q, want %q (challenge %q)", cs[0].Params["error"], wantErr, chal)
			}
		})
	}
	// The go-sdk client is refused too.
	st.tokens["bad"] = tests[0].token
	client := mcp.NewClient(&mcp.Implementation{Name: "latch-test", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: st.URL, HTTPClient: &http.Client{Transport: bearer{token: st.tokens["bad"], base: http.DefaultTransport}}, DisableStandaloneSSE: true}
	if cs, err := client.Connect(t.Context(), tr, nil); err == nil {
		cs.Close()
		t.Errorf("Connect with an expired JWT succeeded, want refused")
	}
	if n := len(st.executions(t, "dora")); n != 0 {
		t.Errorf("dora has %d executions after refused tokens, want 0", n)
	}
}

func rawInitialize(t *testing.T, url, token string) *http.Response {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// The metadata document (RFC 9728) is served at the path-suffixed URL the
// 401 names and at the root well-known URL, and passes the go-sdk client's
// own checks.
func TestOAuthMetadata(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	st := oauthStack(t, is, nil)
	metaURL := st.metadataURLOf(t)
	if want := strings.TrimSuffix(st.URL, "/mcp") + "/.well-known/oauth-protected-resource/mcp"; metaURL != want {
		t.Fatalf("metadata URL = %q, want %q", metaURL, want)
	}
	root := strings.TrimSuffix(st.URL, "/mcp") + MetadataPath
	for _, u := range []string{metaURL, root} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d, %v", u, resp.StatusCode, err)
		}
		want := map[string]any{
			"resource":                 st.URL,
			"authorization_servers":    []any{is.URL},
			"bearer_methods_supported": []any{"header"},
			"resource_name":            "Latch",
		}
		if diff := cmp.Diff(want, doc); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", u, diff)
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "*" {
			t.Errorf("GET %s: Access-Control-Allow-Origin = %q, want * (public discovery)", u, got)
		}
	}
	prm, err := oauthex.GetProtectedResourceMetadata(context.Background(), metaURL, st.URL, http.DefaultClient)
	if err != nil {
		t.Fatalf("the go-sdk client refuses the metadata: %v", err)
	}
	if !cmp.Equal(prm.AuthorizationServers, []string{is.URL}) {
		t.Errorf("authorization servers = %v, want [%s]", prm.AuthorizationServers, is.URL)
	}
	if resp, _ := http.Post(metaURL, "application/json", strings.NewReader("{}")); resp == nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST to the metadata URL: %v, want 405", resp)
	}
}

// After the issuer rotates its key, a token signed with the new key makes the
// front refetch the JWKS and is accepted.
func TestOAuthKeyRotation(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	var (
		mu  sync.Mutex
		now = time.Now()
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st := oauthStack(t, is, func(c *auth.JWTConfig) { c.Now = clock })
	st.tokens["k1"] = is.Token(t, is.Claims("dora", st.URL))
	call(t, st.connect(t, "k1", clientOptions{}), "deploy_release", map[string]any{"service": "api", "version": "k1"})

	is.Rotate(t, "k2")
	mu.Lock()
	now = now.Add(auth.DefaultRefreshInterval + time.Second)
	mu.Unlock()
	st.tokens["k2"] = is.Token(t, is.Claims("erin", st.URL))
	_, cr := call(t, st.connect(t, "k2", clientOptions{}), "deploy_release", map[string]any{"service": "api", "version": "k2"})
	if got := st.get(t, cr.ExecutionID).GetActor(); got != "erin" {
		t.Errorf("actor after rotation = %q, want erin", got)
	}
	if got := is.JWKSFetches(); got != 2 {
		t.Errorf("JWKS fetches = %d, want 2 (one at first use, one for the new kid)", got)
	}
	st.waitState(t, cr.ExecutionID, recordv1.State_STATE_DELIVERED)
}

// An issuer whose keys cannot be fetched is not the caller's fault: a 500
// saying so, not a 401.
func TestOAuthKeysUnavailable(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	st := oauthStack(t, is, func(c *auth.JWTConfig) { c.Issuers = []auth.Issuer{{URL: is.URL, JWKSURL: is.URL + "/no-such-jwks"}} })
	resp := rawInitialize(t, st.URL, is.Token(t, is.Claims("dora", st.URL)))
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("status with unavailable keys = %d, want 500", resp.StatusCode)
	}
}

// with copies claims and sets (or, for a nil value, deletes) kv pairs.
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
