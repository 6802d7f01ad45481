package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/internal/testing/oauthtest"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestDevAcceptsJWTs: `latch dev --oauth-issuer` (a real process) takes a
// JWT from a loopback test issuer: a tool call through the go-sdk client
// runs as the mapped actor; an unmapped subject and a token for another
// audience are refused with 401; the metadata document names the issuer.
func TestDevAcceptsJWTs(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	data := filepath.Join(t.TempDir(), "dev")
	startDev(t, data, "--oauth-issuer", is.URL, "--oauth-actor-map", "agent-7=ops-bot")
	raw, err := os.ReadFile(datadir.DevInfo(data))
	if err != nil {
		t.Fatal(err)
	}
	var info devInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatal(err)
	}

	connect := func(token string) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "jwt-e2e", Version: "1"}, nil)
		return c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: info.MCPURL, HTTPClient: &http.Client{Transport: bearerRT{token}}, DisableStandaloneSSE: true}, nil)
	}
	cs, err := connect(is.Token(t, is.Claims("agent-7", info.MCPURL)))
	if err != nil {
		t.Fatalf("Connect with a JWT: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_ticket", Arguments: map[string]any{"title": "from a JWT"}})
	if err != nil || res.IsError {
		t.Fatalf("CallTool with a JWT: %v %+v", err, res)
	}
	l, err := client(t, data).List(context.Background(), &controlplanev1.ListRequest{Actor: "ops-bot", Limit: 10})
	if err != nil || len(l.GetExecutions()) != 1 || !strings.HasPrefix(l.GetExecutions()[0].GetEvidence().GetTokenId(), "jwt_") {
		t.Fatalf("executions of ops-bot = %v (%v), want the one call, with a jwt_ token id", l.GetExecutions(), err)
	}

	for name, tok := range map[string]string{
		"unmapped subject": is.Token(t, is.Claims("agent-8", info.MCPURL)),
		"other audience":   is.Token(t, is.Claims("agent-7", "https://elsewhere.example.com/mcp")),
	} {
		req, _ := http.NewRequest(http.MethodPost, info.MCPURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="`) {
			t.Errorf("%s: status %d, WWW-Authenticate %q; want 401 naming the resource metadata", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}

	resp, err := http.Get(strings.TrimSuffix(info.MCPURL, "/mcp") + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || doc.Resource != info.MCPURL || len(doc.AuthorizationServers) != 1 || doc.AuthorizationServers[0] != is.URL {
		t.Errorf("metadata = %+v (%v), want resource %s and issuer %s", doc, err, info.MCPURL, is.URL)
	}
}
