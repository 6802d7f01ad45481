package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

const secretCatalog = `
targets:
  echo: {channel: http, base_url: %q, allow_private: true, idempotency_header: Idempotency-Key}
  this-host: {channel: local, hostagent_socket: %q}
tools:
  send_memo:
    description: Send a memo to a target that echoes it.
    input_schema: {type: object, required: [memo], properties: {memo: {type: string}}}
    target: echo
    request: {method: POST, path: /echo, headers: {X-Memo: "{{memo}}"}, body: {memo: "{{memo}}"}}
    replay: idempotency_key
    fingerprint: {secret: [memo]}
  print_memo:
    description: A command that prints its secret.
    input_schema: {type: object, required: [memo], properties: {memo: {type: string}}}
    target: this-host
    command: [/bin/sh, -c, 'echo "memo: $MEMO"; echo "again $MEMO" >&2; exit 3']
    env: {MEMO: "{{memo}}"}
    replay: status_query
    fingerprint: {secret: [memo]}
`

// TestSecretEchoesNeverStoredOrReturned plants a secret argument in two real
// executions under `latch dev`: an HTTP target that echoes it in its body and
// in kept headers (Location, ETag, Content-Location), and a command run by
// the host agent that prints it on stdout and stderr. Neither what the
// control plane answers (Submit, Get, History, latch exec show) nor any file
// of the control plane's data dir holds the secret, nor any file of the host
// agent's (its output copy of the command included).
func TestSecretEchoesNeverStoredOrReturned(t *testing.T) {
	const secret = "Zq9-planted-SECRET-4471"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Location", "/memos?m="+url.QueryEscape(r.Header.Get("X-Memo")))
		w.Header().Set("ETag", `"`+r.Header.Get("X-Memo")+`"`)
		w.Header().Set("Content-Location", "/memos/"+url.PathEscape(r.Header.Get("X-Memo")))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"received":%s,"header":%q}`, body, r.Header.Get("X-Memo"))
	}))
	t.Cleanup(echo.Close)
	dir := t.TempDir()
	data := filepath.Join(dir, "d")
	catalog := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(catalog, []byte(fmt.Sprintf(secretCatalog, echo.URL, filepath.Join(data, "hostagent.sock"))), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := startDev(t, data, "--catalog", catalog)
	c := client(t, data)
	args := []byte(`{"memo":"` + secret + `"}`)

	var answers [][]byte
	ids := map[string]string{}
	for _, tool := range []string{"send_memo", "print_memo"} {
		r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "dev", Tool: tool, Arguments: args, WaitMs: 20000})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		id := r.GetExecution().GetId()
		ids[tool] = id
		x := waitFor(t, c, id, recordv1.State_STATE_COMPLETED)
		g, err := c.Get(context.Background(), &controlplanev1.GetRequest{ExecutionId: id})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(g.GetResult().GetBody(), []byte("[REDACTED]")) {
			t.Errorf("%s: stored body %q shows no redaction: the target's echo did not reach the test", tool, g.GetResult().GetBody())
		}
		h, err := c.History(context.Background(), &controlplanev1.HistoryRequest{ExecutionId: id})
		if err != nil {
			t.Fatal(err)
		}
		// A retry attaches and returns the stored result.
		again, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "dev", Tool: tool, Arguments: args, WaitMs: 5000})
		if err != nil || again.GetExecution().GetId() != id {
			t.Fatalf("%s retry: %v, %v; want attached to %s", tool, again, err, id)
		}
		show, _ := runCLI(t, "exec", "show", id, "--data", data)
		for _, msg := range []proto.Message{r, x, g, h, again} {
			b, _ := protojson.Marshal(msg)
			answers = append(answers, b)
		}
		answers = append(answers, []byte(show))
	}
	if ids["print_memo"] != "" {
		if x, _ := c.Get(context.Background(), &controlplanev1.GetRequest{ExecutionId: ids["print_memo"]}); x.GetExecution().GetTargetStatus() != 3 {
			t.Errorf("print_memo exit status %d, want 3 (the command ran)", x.GetExecution().GetTargetStatus())
		}
	}
	for i, a := range answers {
		if bytes.Contains(a, []byte(secret)) {
			t.Errorf("answer %d returned to the caller holds the secret:\n%s", i, a)
		}
	}

	dev.cmd.Process.Signal(syscall.SIGINT)
	if err := dev.cmd.Wait(); err != nil {
		t.Fatalf("latch dev exited with %v after Ctrl-C", err)
	}
	// The host agent's output copy of the command, on the host that ran it,
	// is redacted there too (the control plane names MEMO in secret_env).
	hostOutput := filepath.Join(data, "hostagent", "exec", ids["print_memo"], "output")
	if b, err := os.ReadFile(hostOutput); err != nil || !bytes.Contains(b, []byte("memo: [REDACTED]")) || !bytes.Contains(b, []byte("again [REDACTED]")) {
		t.Errorf("the host agent's output file %s = %q, %v; want both lines, redacted: the command never printed the secret, and the test proves nothing", hostOutput, b, err)
	}
	filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSocket != 0 {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("secret found in %s", strings.TrimPrefix(p, data))
		}
		return nil
	})
}

// TestDevRefusesBadAllowOrigin: --allow-origin takes origins, checked
// before anything starts (exit 2, saying what an origin looks like).
func TestDevRefusesBadAllowOrigin(t *testing.T) {
	data := filepath.Join(t.TempDir(), "d")
	out, code := runCLI(t, "dev", "--data", data, "--listen", "127.0.0.1:0", "--demo-listen", "127.0.0.1:0", "--allow-origin", "https://console.example.com", "--allow-origin", "null")
	if code != 2 || !strings.Contains(out, "--allow-origin") || !strings.Contains(out, "scheme://host[:port]") {
		t.Fatalf("latch dev --allow-origin null: exit %d\n%s\nwant exit 2 naming the flag and the origin form", code, out)
	}
	if _, err := os.Stat(data); err == nil {
		t.Errorf("latch dev created %s before refusing its arguments", data)
	}
}

// TestDevNamesEveryBusyPort: with the MCP and ops addresses taken, latch dev
// names both, each with its flag, in one message, and starts nothing.
func TestDevNamesEveryBusyPort(t *testing.T) {
	taken := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l.Addr().String()
	}
	mcpAddr, opsAddr := taken(), taken()
	data := filepath.Join(t.TempDir(), "d")
	out, code := runCLI(t, "dev", "--data", data, "--listen", mcpAddr, "--demo-listen", "127.0.0.1:0", "--http-listen", opsAddr)
	if code != 1 || !strings.Contains(out, "MCP front on "+mcpAddr) || !strings.Contains(out, "--listen to use another") ||
		!strings.Contains(out, "ops listener on "+opsAddr) || !strings.Contains(out, "--ops-listen to use another") || !strings.Contains(out, "nothing was started") {
		t.Fatalf("latch dev with two busy ports: exit %d\n%s\nwant exit 1 naming both addresses and their flags", code, out)
	}
}
