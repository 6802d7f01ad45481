package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// tsClientDir holds the TypeScript interop client. Install its dependencies
// with the command in tsInstall (CI runs it before `go test`).
const (
	tsClientDir = "testdata/tsclient"
	tsInstall   = "npm ci --prefix mcpfront/testdata/tsclient"
)

// tsNode is the node binary for the TypeScript SDK tests. Outside CI they
// skip when node or the SDK is absent; in CI (.ci/run installs both) they
// fail, so a broken install cannot pass unnoticed.
func tsNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		nodeMissing(t, "node is not installed; install Node.js 20+ and run: "+tsInstall)
	}
	if _, err := os.Stat(filepath.Join(tsClientDir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		nodeMissing(t, "the TypeScript SDK is not installed; run from the repository root: "+tsInstall)
	}
	return node
}

// nodeMissing skips a test that needs a Node package, or fails it in CI.
func nodeMissing(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// The official TypeScript SDK calls a slow tool through a proxy that cuts
// the response stream once; the client resumes on its own with GET +
// Last-Event-ID and gets the result of the one execution.
func TestInteropTypeScriptClient(t *testing.T) {
	node := tsNode(t)
	st := newTestStack(t, stackOptions{ProgressInterval: 200 * time.Millisecond})

	// A proxy between the client and the front that cuts the tools/call
	// stream right after its priming event (which carries an event id).
	target, _ := url.Parse(st.URL)
	c := newCutter("")
	c.base = httputilTransport()
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	proxy.Transport = c
	proxy.FlushInterval = -1
	ps := httptest.NewServer(proxy)
	t.Cleanup(ps.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", ps.URL+"/mcp", st.tokens["alice"], "slow_job", `{"job":"interop"}`)
	cmd.Dir = tsClientDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting node: %v", err)
	}
	key := st.waitArrived(t)
	select {
	case <-c.cut:
	case <-ctx.Done():
		t.Fatalf("the proxy never cut the stream")
	}
	st.effect.release() // finishes while the client is reconnecting
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node client.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var out struct {
		ProtocolVersion string   `json:"protocolVersion"`
		SessionID       string   `json:"sessionId"`
		Tools           []string `json:"tools"`
		Progress        int      `json:"progress"`
		Resumptions     int      `json:"resumptions"`
		Result          struct {
			IsError           bool       `json:"isError"`
			StructuredContent CallResult `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out); err != nil {
		t.Fatalf("client output %q: %v (stderr: %s)", stdout.String(), err, stderr.String())
	}
	cr := out.Result.StructuredContent
	if out.Result.IsError || cr.ExecutionID != key || cr.State != "completed" || cr.Outcome != "succeeded" {
		t.Errorf("TypeScript client result = %+v, want completed execution %s", out.Result, key)
	}
	if c.resumes.Load() == 0 || out.Resumptions == 0 {
		t.Errorf("resume GETs = %d, resumption tokens = %d; want the result to come through a resume", c.resumes.Load(), out.Resumptions)
	}
	if out.SessionID == "" {
		t.Errorf("TypeScript client has no session id; want the 2025-11-25 session era")
	}
	if n := st.effect.count("/slow"); n != 1 {
		t.Errorf("effect count = %d, want 1", n)
	}
	st.waitState(t, key, recordv1.State_STATE_DELIVERED)
	t.Logf("TypeScript client: protocol %s, %d progress notifications, %d resumption tokens", out.ProtocolVersion, out.Progress, out.Resumptions)
}
