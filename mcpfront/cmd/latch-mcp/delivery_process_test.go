package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/internal/testing/testbin"
)

// proc is a process a test started, stopped by its PID when the test ends.
type proc struct {
	cmd *exec.Cmd
	log *testbin.Buffer
}

func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), log: &testbin.Buffer{}}
	p.cmd.Stderr, p.cmd.Stdout = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s log:\n%s", filepath.Base(bin), p.log.String())
		}
	})
	return p
}

// kill stops the process with SIGKILL (no chance to save anything) and
// reaps it; twice is harmless.
func (p *proc) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// deliveryWorld is a control plane (latch serve) over a data dir, a target
// that holds /deploy until released, and fronts on one state dir.
type deliveryWorld struct {
	data, state, catalog, sock string
	arrived                    chan struct{}
	gate                       chan struct{}
}

func newDeliveryWorld(t *testing.T) *deliveryWorld {
	t.Helper()
	w := &deliveryWorld{data: t.TempDir(), state: filepath.Join(t.TempDir(), "front"), arrived: make(chan struct{}, 10), gate: make(chan struct{})}
	target := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/deploy" {
			w.arrived <- struct{}{}
			select {
			case <-w.gate:
			case <-r.Context().Done():
				return
			}
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusCreated)
		fmt.Fprint(rw, `{"ok":true}`)
	}))
	t.Cleanup(target.Close)
	t.Cleanup(func() {
		select {
		case <-w.gate:
		default:
			close(w.gate)
		}
	})
	w.catalog = filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(w.catalog, fmt.Appendf(nil, processCatalog, target.URL, ""), 0o600); err != nil {
		t.Fatal(err)
	}
	w.sock = filepath.Join(w.data, "control.sock")
	return w
}

func (w *deliveryWorld) controlPlane(t *testing.T) *proc {
	t.Helper()
	_ = os.Remove(w.sock) // left by a killed one
	p := startProc(t, latchBin, "serve", "--data", w.data, "--catalog", w.catalog, "--vault-key-file", filepath.Join(w.data, "vault.key"), "--trusted-actor", "alice")
	testbin.Eventually(t, "latch serve's socket", func() bool { _, err := os.Stat(w.sock); return err == nil })
	return p
}

// front starts latch-mcp on the world's state dir and returns it with its
// MCP URL.
func (w *deliveryWorld) front(t *testing.T) (*proc, string) {
	t.Helper()
	p := startProc(t, frontBin, "--control-plane", "unix://"+w.sock, "--listen", "127.0.0.1:0", "--actor", "alice", "--state-dir", w.state, "--log-level", "debug")
	urlRE := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+/mcp)`)
	var url string
	testbin.Eventually(t, "latch-mcp to serve", func() bool {
		if m := urlRE.FindStringSubmatch(p.log.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	return p, url
}

// execution is the one execution in the control plane (latch exec list).
func (w *deliveryWorld) execution(t *testing.T) map[string]any {
	t.Helper()
	out := strings.TrimSpace(latch(t, "exec", "list", "--data", w.data, "--json"))
	if out == "" || strings.Contains(out, "\n") {
		t.Fatalf("latch exec list = %q, want exactly one execution", out)
	}
	var x map[string]any
	if err := json.Unmarshal([]byte(out), &x); err != nil {
		t.Fatalf("latch exec list --json: %v: %s", err, out)
	}
	return x
}

// mcpPost posts one JSON-RPC message in a 2025-11-25 session.
func mcpPost(t *testing.T, ctx context.Context, url, session, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", body, err)
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s %s", body, resp.Status, b)
	}
	return resp
}

// sseEvent reads one server-sent event: its id and data.
func sseEvent(r *bufio.Reader) (id, data string, err error) {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return id, data, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" && (id != "" || data != ""):
			return id, data, nil
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimSpace(line[5:])
		}
	}
}

// TestDeliveryRecordedOnceTheControlPlaneIsBack runs latch serve and
// latch-mcp as processes. The agent's stream is cut while its deploy runs;
// the execution completes; the control plane is killed; the agent resumes
// (GET + Last-Event-ID) and gets its answer from the front alone, so the
// front writes it with the control plane down. Its delivery report is kept
// on disk; the front is killed too. Both come back, the new front sends
// the report at its start, and explain says delivered.
func TestDeliveryRecordedOnceTheControlPlaneIsBack(t *testing.T) {
	w := newDeliveryWorld(t)
	cp := w.controlPlane(t)
	front, url := w.front(t)

	init := mcpPost(t, t.Context(), url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"delivery-test","version":"1"}}}`)
	session := init.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, init.Body)
	init.Body.Close()
	if session == "" {
		t.Fatal("initialize answered without Mcp-Session-Id")
	}
	mcpPost(t, t.Context(), url, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()

	callCtx, cut := context.WithCancel(t.Context())
	call := mcpPost(t, callCtx, url, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"deploy","arguments":{"v":"1"}}}`)
	lastID, _, err := sseEvent(bufio.NewReader(call.Body))
	if err != nil || lastID == "" {
		t.Fatalf("first event of the call's stream: id %q, %v; want the priming event's id", lastID, err)
	}
	<-w.arrived
	cut() // the network drops the stream while the target works
	call.Body.Close()

	close(w.gate)
	testbin.Eventually(t, "the front to get the completed execution", func() bool {
		return strings.Contains(front.log.String(), "state=STATE_COMPLETED")
	})
	id, _ := w.execution(t)["id"].(string)
	cp.kill()

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Last-Event-ID", lastID)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("resume GET: %v %v", resp, err)
	}
	body, err := io.ReadAll(resp.Body) // the replayed answer; the stream ends after it
	resp.Body.Close()
	if err != nil || !bytes.Contains(body, []byte(`"id":2`)) || !bytes.Contains(body, []byte(id)) {
		t.Fatalf("resumed stream = %q, %v; want the answer to call 2 (execution %s)", body, err, id)
	}

	queue := filepath.Join(w.state, "deliveries.pb")
	testbin.Eventually(t, "the delivery report kept on disk", func() bool { _, err := os.Stat(queue); return err == nil })
	front.kill()

	w.controlPlane(t)
	if out := latch(t, "exec", "explain", id, "--data", w.data); !strings.Contains(out, "Delivery not recorded") {
		t.Fatalf("explain before the front is back:\n%s\nwant 'Delivery not recorded' (nothing recorded yet, never a failure)", out)
	}
	front2, _ := w.front(t)
	testbin.Eventually(t, "the kept report to land", func() bool {
		var v struct {
			Execution map[string]any `json:"execution"`
		}
		_ = json.Unmarshal([]byte(latch(t, "exec", "show", id, "--data", w.data, "--json")), &v)
		return v.Execution["delivery"] == "delivered"
	})
	out := latch(t, "exec", "explain", id, "--data", w.data)
	if !strings.Contains(out, "Yes: the result was delivered at") || strings.Contains(strings.ToLower(out), "delivery fail") {
		t.Errorf("explain after the report landed:\n%s\nwant 'Yes: the result was delivered at'", out)
	}
	if !strings.Contains(front2.log.String(), "sending the delivery reports kept from before this start") {
		t.Errorf("the second front did not say it sent the kept reports")
	}
	testbin.Eventually(t, "the queue file removed once taken", func() bool { _, err := os.Stat(queue); return os.IsNotExist(err) })
}

// TestCallerLeftRecordedByTheFront: a stateless caller that gives up while
// its execution runs is recorded as having left before the answer, and
// latch exec explain says "not delivered, the caller left before the
// answer" once the execution completed.
func TestCallerLeftRecordedByTheFront(t *testing.T) {
	w := newDeliveryWorld(t)
	w.controlPlane(t)
	_, url := w.front(t)

	client := mcp.NewClient(&mcp.Implementation{Name: "leaver", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	ctx, leave := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		// A progress token: the front watches the execution (it knows its
		// id) instead of waiting inside Submit.
		p := &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"v": "left"}}
		p.SetProgressToken("t1")
		_, err := cs.CallTool(ctx, p)
		errc <- err
	}()
	<-w.arrived
	testbin.Eventually(t, "the execution to be dispatched", func() bool { return w.execution(t)["state"] == "dispatched" })
	leave()
	if err := <-errc; err == nil {
		t.Fatal("the call that left returned no error")
	}
	id, _ := w.execution(t)["id"].(string)
	testbin.Eventually(t, "the caller_left record", func() bool { return w.execution(t)["delivery"] == "not_delivered_caller_left" })
	close(w.gate)
	testbin.Eventually(t, "the execution to complete", func() bool { return w.execution(t)["state"] == "completed" })
	out := latch(t, "exec", "explain", id, "--data", w.data)
	if !strings.Contains(out, "No: not delivered, the caller left before the answer") {
		t.Errorf("explain:\n%s\nwant 'No: not delivered, the caller left before the answer'", out)
	}
	if show := latch(t, "exec", "show", id, "--data", w.data); !strings.Contains(show, "not delivered (the caller left before the answer)") {
		t.Errorf("exec show:\n%s\nwant the delivery row 'not delivered (the caller left before the answer)'", show)
	}
}
