package mcpfront

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// testClock is a settable clock shared by the front's token cache and the
// control plane's tokens.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestRevokedTokenRefusedWithinCacheBound: a token revoked while its MCP
// session is open starts nothing at its next call (the control plane
// authenticates the token on every Submit), and once the front's cache
// bound has passed the front itself refuses the token (401).
func TestRevokedTokenRefusedWithinCacheBound(t *testing.T) {
	clk := &testClock{now: time.Now()}
	st := newTestStack(t, stackOptions{Clock: clk.Now})
	cs := st.connect(t, "alice", clientOptions{Era: eraSession})
	if _, cr := call(t, cs, "read_status", map[string]any{"service": "api"}); cr.ExecutionID == "" {
		t.Fatalf("first call: %+v, want an execution", cr)
	}
	before := len(st.executions(t, "alice"))
	if _, err := st.Tokens.Revoke(t.Context(), "alice", "test"); err != nil {
		t.Fatal(err)
	}

	// Within the bound the front still knows the token; Submit refuses it.
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"service": "api", "version": "9"}})
	if err != nil {
		t.Fatalf("call after revoke, within the bound: %v", err)
	}
	if !res.IsError || !strings.Contains(decodeResult(t, res).Note, "nothing was executed") {
		t.Errorf("call after revoke = %+v, want a tool error saying nothing was executed", decodeResult(t, res))
	}
	if n := len(st.executions(t, "alice")); n != before {
		t.Errorf("alice has %d executions after the refused call, want %d", n, before)
	}
	if n := st.effect.count("/v1/releases"); n != 0 {
		t.Errorf("the target saw %d releases, want none", n)
	}

	// Past the bound the front asks again and answers 401.
	clk.Add(MaxAuthCacheBound)
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "read_status", Arguments: map[string]any{"service": "api"}}); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("call after the cache bound = %v, want the front's 401", err)
	}
	// bob is untouched.
	bs := st.connect(t, "bob", clientOptions{Era: eraStateless})
	if _, cr := call(t, bs, "read_status", map[string]any{"service": "api"}); cr.ExecutionID == "" {
		t.Errorf("bob's call: %+v, want an execution", cr)
	}
}

// TestCatalogReloadReachesToolsList: the front serves the control plane's
// catalog and follows it: a reload shows in tools/list of an open session
// without restarting the front; a refused reload changes nothing.
func TestCatalogReloadReachesToolsList(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	path := filepath.Join(t.TempDir(), "catalog.yaml")
	yaml := func(extra string) string {
		return fmt.Sprintf(`
targets:
  effect: {channel: http, base_url: %q, allow_private: true, idempotency_header: Idempotency-Key}
tools:
  deploy_release:
    description: Deploy one version of a service.
    input_schema: {type: object, required: [service, version], properties: {service: {type: string}, version: {type: string}}}
    target: effect
    request: {method: POST, path: /v1/releases, body: {service: "{{service}}", version: "{{version}}"}}
    replay: idempotency_key
%s`, st.effect.srv.URL, extra)
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(yaml(""))
	// The control plane's catalog manager over the stack's store and engine.
	m, err := catalog.Load(t.Context(), catalog.Config{Store: st.store, Source: catalog.File(path), OnChange: st.engine.SetCatalog})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan error, 1)
	go func() { followed <- st.Front.Follow(ctx) }()
	t.Cleanup(func() { cancel(); <-followed })

	cs := st.connect(t, "alice", clientOptions{Era: eraSession})
	names := func() []string {
		lt, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range lt.Tools {
			if !isBuiltin(tl.Name) {
				out = append(out, tl.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	v1 := m.Current().Version
	testbin.Eventually(t, "the front to serve the loaded catalog", func() bool { return st.Front.CatalogVersion() == v1 })
	if got := names(); !slices.Equal(got, []string{"deploy_release"}) {
		t.Fatalf("tools/list = %v, want [deploy_release]", got)
	}

	write(yaml(`  ping:
    description: Ping the service.
    input_schema: {type: object}
    target: effect
    request: {method: GET, path: /ping}
    replay: read_only
`))
	r, err := m.Reload(t.Context(), catalog.TriggerReload)
	if err != nil || !r.Changed {
		t.Fatalf("Reload = %+v, %v", r, err)
	}
	testbin.Eventually(t, "the reloaded catalog in the front", func() bool { return st.Front.CatalogVersion() == r.Version })
	if got := names(); !slices.Equal(got, []string{"deploy_release", "ping"}) {
		t.Fatalf("tools/list after reload = %v, want [deploy_release ping]", got)
	}
	if _, cr := call(t, cs, "ping", nil); cr.ExecutionID == "" {
		t.Errorf("calling the new tool: %+v", cr)
	}

	write(yaml("  broken:\n    target: nowhere\n"))
	if _, err := m.Reload(t.Context(), catalog.TriggerReload); err == nil {
		t.Fatal("Reload(broken) = nil error")
	}
	if got := names(); !slices.Equal(got, []string{"deploy_release", "ping"}) || st.Front.CatalogVersion() != r.Version {
		t.Errorf("after a refused reload tools/list = %v at %s, want the previous catalog %s", got, st.Front.CatalogVersion(), r.Version)
	}
}

// fakeAuth answers AuthenticateAgent from a table and counts the calls.
type fakeAuth struct {
	controlplanev1.ControlPlaneClient
	mu      sync.Mutex
	calls   int
	actors  map[string]string
	expires map[string]time.Time
	down    bool
}

func (f *fakeAuth) AuthenticateAgent(_ context.Context, req *controlplanev1.AuthenticateAgentRequest, _ ...grpc.CallOption) (*controlplanev1.AuthenticateAgentResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down {
		return nil, status.Error(codes.Unavailable, "down")
	}
	a, ok := f.actors[req.GetCredential()]
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "unknown or malformed agent credential")
	}
	resp := &controlplanev1.AuthenticateAgentResponse{Actor: a, TokenId: "tok_" + a}
	if e, ok := f.expires[req.GetCredential()]; ok {
		resp.ExpiresAt = timestamppb.New(e)
	}
	return resp, nil
}

func (f *fakeAuth) set(fn func()) { f.mu.Lock(); fn(); f.mu.Unlock() }
func (f *fakeAuth) count() int    { f.mu.Lock(); defer f.mu.Unlock(); return f.calls }

func TestControlPlaneTokensCache(t *testing.T) {
	clk := &testClock{now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	cp := &fakeAuth{actors: map[string]string{"latch_a": "alice", "latch_short": "sam"}, expires: map[string]time.Time{"latch_short": clk.Now().Add(time.Second)}}
	v, err := NewControlPlaneTokens(cp, 2*time.Second, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	verify := func(tok, wantActor string, wantCalls int) {
		t.Helper()
		a, _, err := v.Verify(t.Context(), tok)
		if a != wantActor || (wantActor == "") != (err != nil) {
			t.Errorf("Verify(%s) = %q, %v; want actor %q", tok, a, err, wantActor)
		}
		if n := cp.count(); n != wantCalls {
			t.Errorf("after Verify(%s) the control plane was asked %d times, want %d", tok, n, wantCalls)
		}
	}
	verify("latch_a", "alice", 1)
	verify("latch_a", "alice", 1) // cached
	cp.set(func() { delete(cp.actors, "latch_a") })
	clk.Add(time.Second)
	verify("latch_a", "alice", 1) // still within the bound
	clk.Add(time.Second)
	verify("latch_a", "", 2) // bound passed: revoked
	verify("latch_a", "", 2) // the refusal is cached too
	verify("latch_short", "sam", 3)
	clk.Add(time.Second)
	verify("latch_short", "sam", 4) // its expiry, shorter than the bound, ended the cache entry
	cp.set(func() { cp.down = true })
	clk.Add(time.Hour)
	if _, _, err := v.Verify(t.Context(), "latch_short"); err == nil {
		t.Error("Verify with the control plane down = nil error")
	}
	if _, _, err := v.Verify(t.Context(), "latch_short"); err == nil || cp.count() != 6 {
		t.Errorf("an unreachable control plane was cached: err %v, calls %d, want 6", err, cp.count())
	}
	for _, bound := range []time.Duration{-time.Second, MaxAuthCacheBound + time.Millisecond} {
		if _, err := NewControlPlaneTokens(cp, bound, nil); err == nil {
			t.Errorf("NewControlPlaneTokens(bound %s) = nil error, want a refusal", bound)
		}
	}
}
