package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/internal/testing/testbin"
)

var latchBin, frontBin string

func TestMain(m *testing.M) {
	testbin.Main(m, []string{"github.com/latchhq/latch/controlplane/cmd/latch", "github.com/latchhq/latch/mcpfront/cmd/latch-mcp"}, []*string{&latchBin, &frontBin})
}

const processCatalog = `
targets:
  api: {channel: http, base_url: %q, allow_private: true, idempotency_header: Idempotency-Key}
tools:
  deploy:
    description: Deploy.
    input_schema: {type: object, required: [v], properties: {v: {type: string}}}
    target: api
    request: {method: POST, path: /deploy, body: {v: "{{v}}"}}
    replay: idempotency_key
%s`

// start runs a process, stops it when the test ends and returns its stderr.
func start(t *testing.T, bin string, args ...string) *testbin.Buffer {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out := &testbin.Buffer{}
	cmd.Stderr, cmd.Stdout = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s log:\n%s", filepath.Base(bin), out.String())
		}
	})
	return out
}

func latch(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(latchBin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("latch %v: %v\n%s%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// TestFrontFollowsTheControlPlane runs latch serve and latch-mcp as
// processes: the front gets its tools from the control plane, a catalog
// reload shows in the tools/list of an open session without restarting
// the front, and a token revoked while the session is open starts nothing
// at its next call and is then refused by the front.
func TestFrontFollowsTheControlPlane(t *testing.T) {
	var deploys atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/deploy" {
			deploys.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(target.Close)
	data := t.TempDir()
	catalog := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(catalog, fmt.Appendf(nil, processCatalog, target.URL, ""), 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, latchBin, "serve", "--data", data, "--catalog", catalog, "--vault-key-file", filepath.Join(data, "vault.key"), "--trusted-actor", "alice")
	sock := filepath.Join(data, "control.sock")
	testbin.Eventually(t, "latch serve's socket", func() bool { _, err := os.Stat(sock); return err == nil })
	token := strings.TrimSpace(latch(t, "token", "create", "alice", "--data", data))

	log := start(t, frontBin, "--control-plane", "unix://"+sock, "--listen", "127.0.0.1:0", "--log-level", "debug")
	urlRE := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+/mcp)`)
	var url string
	testbin.Eventually(t, "latch-mcp to serve", func() bool {
		m := urlRE.FindStringSubmatch(log.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	})

	client := mcp.NewClient(&mcp.Implementation{Name: "process-test", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}, DisableStandaloneSSE: true}
	cs, err := client.Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	names := func() []string {
		lt, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range lt.Tools {
			if !strings.HasPrefix(tl.Name, "latch_") {
				out = append(out, tl.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	if got := names(); !slices.Equal(got, []string{"deploy"}) {
		t.Fatalf("tools/list = %v, want [deploy]", got)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"v": "1"}})
	if err != nil || res.IsError {
		t.Fatalf("deploy: %v %+v", err, res)
	}

	ping := "  ping:\n    description: Ping.\n    input_schema: {type: object}\n    target: api\n    request: {method: GET, path: /ping}\n    replay: read_only\n"
	if err := os.WriteFile(catalog, fmt.Appendf(nil, processCatalog, target.URL, ping), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := latch(t, "catalog", "reload", "--data", data); !strings.Contains(out, "in force") {
		t.Fatalf("catalog reload: %s", out)
	}
	testbin.Eventually(t, "the reloaded catalog in the front's tools/list", func() bool { return slices.Equal(names(), []string{"deploy", "ping"}) })

	latch(t, "token", "revoke", "alice", "--data", data)
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"v": "2"}})
	if err == nil && !res.IsError {
		t.Fatalf("deploy with a revoked token = %+v, want a refusal", res)
	}
	testbin.Eventually(t, "the front to refuse the revoked token", func() bool {
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ping"})
		return err != nil && strings.Contains(err.Error(), "Unauthorized")
	})
	if n := deploys.Load(); n != 1 {
		t.Errorf("the target saw %d deploys, want 1 (the revoked token's call must start nothing)", n)
	}
}
