package mcpchannel

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/testing/testlog"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

const redirectToken = "upstream-bearer-0123456789"

type oneCredential struct{ v vault.Credential }

func (o oneCredential) Get(string) (vault.Credential, error) { return o.v, nil }

// sink is the other origin a redirect points at; it records every request.
type sink struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string // "Authorization | body" of each request
}

func newSink(t *testing.T) *sink {
	s := &sink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.seen = append(s.seen, r.Method+" "+r.Header.Get("Authorization")+" | "+string(b))
		s.mu.Unlock()
		http.Error(w, "not here", http.StatusNotFound)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// redirectingUpstream is an MCP server over Streamable HTTP on loopback that
// answers 307 to other+path for every POST whose body matches (all of them
// when match is "").
func redirectingUpstream(t *testing.T, other, match string) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "refund"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if match == "" || bytes.Contains(b, []byte(match)) {
				http.Redirect(w, r, other+r.URL.Path, http.StatusTemporaryRedirect)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

func redirectCatalog(t *testing.T, url string) *tools.Catalog {
	t.Helper()
	cat, err := tools.Parse("c.yaml", []byte(`
upstreams:
  pay:
    transport: http
    url: `+url+`
    allow_private: true
    credential: pay-token
    timeout: 5s
tools:
  pay.refund: {upstream: pay, tool: refund, replay: review}
`))
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func redirectChannel(t *testing.T) *Channel {
	c := newTestChannel(t, Config{
		Logger:      testlog.New(t, 0),
		Credentials: oneCredential{vault.Credential{Kind: vault.KindBearer, Fields: vault.Fields{"token": redirectToken}}},
		ConnectWait: 5 * time.Second,
	})
	t.Cleanup(c.Close)
	return c
}

// TestHTTPUpstreamRedirectAtConnect: an HTTP upstream with a credential that
// answers 307 to another origin (another loopback port) gets nothing of
// Latch's sent there, neither the credential nor the JSON-RPC body; the
// tool is held with a reason naming the redirect.
func TestHTTPUpstreamRedirectAtConnect(t *testing.T) {
	other := newSink(t)
	url := redirectingUpstream(t, other.srv.URL, "")
	c := redirectChannel(t) // closed before the servers: it holds their streams
	_, held := c.Bind(t.Context(), redirectCatalog(t, url))
	if len(held) != 1 || !strings.Contains(held[0].Reason, "redirect") || !strings.Contains(held[0].Reason, strings.TrimPrefix(other.srv.URL, "http://")) {
		t.Errorf("Bind held %+v; want pay.refund held, naming the redirect to %s", held, other.srv.URL)
	}
	if got := other.requests(); len(got) != 0 {
		t.Errorf("the redirect target received %d requests, want none: %q", len(got), got)
	}
}

// TestHTTPUpstreamRedirectOnCall: an upstream that answers tools/call with
// a 307 to another origin: the call fails with an error naming the
// redirect, and the other origin receives nothing.
func TestHTTPUpstreamRedirectOnCall(t *testing.T) {
	other := newSink(t)
	url := redirectingUpstream(t, other.srv.URL, `"tools/call"`)
	c := redirectChannel(t) // closed before the servers: it holds their streams
	bound, held := c.Bind(t.Context(), redirectCatalog(t, url))
	if len(held) != 0 {
		t.Fatalf("Bind held %+v, want nothing held", held)
	}
	c.setCatalog(bound)
	a := c.Dispatch(t.Context(), engine.Call{
		Execution: &recordv1.Execution{Id: "exe_redirect"},
		Tool:      bound.Tools["pay.refund"],
		Target:    bound.Targets["pay"],
	})
	if a.Class != engine.NotSent || !a.Final || !strings.Contains(a.Reason, "redirect") || !strings.Contains(a.Reason, strings.TrimPrefix(other.srv.URL, "http://")) {
		t.Errorf("Dispatch = %+v; want not sent (final), naming the redirect to %s", a, other.srv.URL)
	}
	if got := other.requests(); len(got) != 0 {
		t.Errorf("the redirect target received %d requests, want none: %q", len(got), got)
	}
}
