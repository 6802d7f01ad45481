package mcpchannel_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/devstack"
	"github.com/latchhq/latch/internal/testing/testbin"
)

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// TestAgentCallsUpstreamThroughTheFront: an MCP agent connected to `latch
// dev` sees the contracted upstream tools (and not the others), calls one,
// and gets Latch's structured answer with the upstream's result; the
// agent's token never reaches the (HTTP) upstream.
func TestAgentCallsUpstreamThroughTheFront(t *testing.T) {
	up := newCounter(t)
	info := startDev(t, httpCatalog(t, up.serveHTTP(), "idempotency_key"))
	ctx := context.Background()
	sess := agent(t, info)
	lt, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		if strings.HasPrefix(tl.Name, "counter.") {
			names = append(names, tl.Name)
		}
	}
	if strings.Join(names, " ") != "counter.add_note counter.count counter.fail" {
		t.Errorf("agent sees upstream tools %v, want exactly the contracted ones", names)
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "counter.add_note", Arguments: map[string]any{"text": "from an agent"}})
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if res.IsError || !strings.Contains(string(sc), `"state":"completed"`) || !strings.Contains(string(sc), "noted: from an agent") {
		t.Errorf("agent's answer: isError %v structured %s", res.IsError, sc)
	}
	eff := up.effects()
	if len(eff) != 1 || !strings.HasPrefix(eff[0], "act_") {
		t.Errorf("upstream effects = %q, want one, keyed by the execution ID", eff)
	}
	if auth, err := os.ReadFile(up.dir + "/auth"); err == nil && strings.Contains(string(auth), info.Token) {
		t.Errorf("the upstream was sent the agent's token: %q", auth)
	}
}

// TestUpstreamAnswerDescribedAsToolResult: an upstream tool's answer is
// described to the model as an upstream tool's result (or error result),
// never as an HTTP target's status (it has none: "status 0" before).
func TestUpstreamAnswerDescribedAsToolResult(t *testing.T) {
	up := newCounter(t)
	info := startDev(t, httpCatalog(t, up.serveHTTP(), "idempotency_key"))
	sess := agent(t, info)
	for _, tc := range []struct {
		tool, want string
		isError    bool
	}{
		{"counter.add_note", "the upstream tool returned its result", false},
		{"counter.fail", "upstream tool, which returned an error result", true},
	} {
		res, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{"text": "describe me"}})
		if err != nil {
			t.Fatal(err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		sc, _ := json.Marshal(res.StructuredContent)
		if res.IsError != tc.isError || !strings.Contains(text, tc.want) || !strings.Contains(text, "Upstream tool result:") {
			t.Errorf("%s: isError %v, text %q; want isError %v and %q", tc.tool, res.IsError, text, tc.isError, tc.want)
		}
		if strings.Contains(text, "status 0") || strings.Contains(text, "HTTP status") || !strings.Contains(string(sc), `"answer":"upstream_tool_result"`) {
			t.Errorf("%s: described as an HTTP answer: text %q, structured %s", tc.tool, text, sc)
		}
	}
}

// startDev runs `latch dev` on catalog and returns its dev.json.
func startDev(t *testing.T, catalog string) devstack.Info {
	t.Helper()
	data := t.TempDir()
	cmd := exec.Command(latchBin, "dev", "--data", data, "--catalog", catalog, "--listen", "127.0.0.1:0", "--demo-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "LATCH_DEV_TOKEN=latch_dev_upstream_token")
	out := &testbin.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("latch dev output:\n%s", out.String())
		}
	})
	var info devstack.Info
	testbin.Eventually(t, "latch dev to start (its info file)", func() bool {
		b, err := os.ReadFile(datadir.DevInfo(data))
		return err == nil && json.Unmarshal(b, &info) == nil && info.MCPURL != ""
	})
	return info
}

// agent is an MCP client session with the dev front.
func agent(t *testing.T, info devstack.Info) *mcp.ClientSession {
	t.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	sess, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: info.MCPURL, HTTPClient: &http.Client{Transport: bearer{info.Token, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// TestAgentCutAndReissue: the agent's call is cut (its context ends, its
// session goes) while the upstream holds the dispatched call; the agent
// re-issues it on a new session, which attaches to the same execution and
// returns its result once the upstream answers: one effect.
func TestAgentCutAndReissue(t *testing.T) {
	up := newCounter(t)
	info := startDev(t, stdioCatalog(t, up, "review"))
	up.hold()
	first := agent(t, info)
	ctx, cancel := context.WithCancel(context.Background())
	cut := make(chan error, 1)
	go func() {
		_, err := first.CallTool(ctx, &mcp.CallToolParams{Name: "counter.add_note", Arguments: map[string]any{"text": "page oncall"}})
		cut <- err
	}()
	up.waitHolding(1)
	cancel()
	if err := <-cut; err == nil {
		t.Fatal("the cut call returned an answer")
	}
	first.Close()

	again := make(chan *mcp.CallToolResult, 1)
	second := agent(t, info)
	go func() {
		res, err := second.CallTool(context.Background(), &mcp.CallToolParams{Name: "counter.add_note", Arguments: map[string]any{"text": "page oncall"}})
		if err != nil {
			t.Error(err)
		}
		again <- res
	}()
	up.release()
	res := <-again
	if res == nil {
		t.FailNow()
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(sc), `"disposition":"attached"`) || !strings.Contains(string(sc), `"state":"completed"`) {
		t.Errorf("re-issued call's answer = %s, want attached to the first execution, completed", sc)
	}
	if n := len(up.effects()); n != 1 {
		t.Errorf("upstream effects = %d, want exactly 1", n)
	}
}
