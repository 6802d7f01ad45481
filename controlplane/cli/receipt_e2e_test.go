package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/receipt"
)

// nodeBin is a Node.js with WebCrypto Ed25519: the conformance suite's
// Node 22 (.ci/run installs it), else the one on PATH.
func nodeBin(t *testing.T) string {
	t.Helper()
	if p, err := filepath.Abs("../../mcpfront/testdata/conformance/node_modules/.bin/node"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("node"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("node is not installed: .ci/run installs it")
	}
	t.Skip("node is not installed")
	return ""
}

// jsVerify runs receipt/receipt.mjs on each receipt file under the key
// file and returns, per file, "ok" or the error kind it refused it with.
func jsVerify(t *testing.T, keyFile string, files ...string) []string {
	t.Helper()
	mod, _ := filepath.Abs("../../receipt/receipt.mjs")
	script := fmt.Sprintf(`import { readFileSync } from 'node:fs';
import { verifyReceipt } from %q;
const key = readFileSync(process.argv[1], 'utf8').trim();
for (const f of process.argv.slice(2)) {
  const r = await verifyReceipt(JSON.parse(readFileSync(f, 'utf8')), key);
  console.log(r.ok ? 'ok' : r.kind);
}`, "file://"+mod)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, nodeBin(t), append([]string{"--input-type=module", "-e", script, keyFile}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

// TestReceiptThroughDev: a tool call through `latch dev` (real processes,
// the MCP front over HTTP) answers with a receipt in structuredContent and
// its one-line form in the text; `latch receipt verify` and the JavaScript
// module accept it and refuse a copy with any one field changed; after a
// restart the receipt still verifies, and `latch exec receipt` issues one
// that verifies too.
func TestReceiptThroughDev(t *testing.T) {
	data := filepath.Join(t.TempDir(), "dev")
	dev := startDev(t, data)
	raw, err := os.ReadFile(datadir.DevInfo(data))
	if err != nil {
		t.Fatal(err)
	}
	var info devInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "receipt-e2e", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: info.MCPURL,
		HTTPClient: &http.Client{Transport: bearerRT{"latch_dev_test_token"}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "create_ticket", Arguments: map[string]any{"title": "receipt please"}})
	if err != nil || res.IsError {
		t.Fatalf("CallTool: %v %+v", err, res)
	}
	// latch_receipt returns the execution's receipt any time after.
	id, _ := res.StructuredContent.(map[string]any)["execution_id"].(string)
	lr, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "latch_receipt", Arguments: map[string]any{"execution_id": id}})
	cs.Close()
	if err != nil || lr.IsError {
		t.Fatalf("latch_receipt: %v %+v", err, lr)
	}
	lrc, _ := json.Marshal(lr.StructuredContent)
	sc, _ := json.Marshal(res.StructuredContent)
	var got struct {
		ExecutionID string          `json:"execution_id"`
		Receipt     json.RawMessage `json:"receipt"`
	}
	if err := json.Unmarshal(sc, &got); err != nil || got.Receipt == nil {
		t.Fatalf("structuredContent = %s, want a receipt", sc)
	}
	r, err := receipt.Parse(got.Receipt)
	if err != nil {
		t.Fatal(err)
	}
	if r.ExecutionID != got.ExecutionID || r.State != "completed" || r.Outcome != "succeeded" || r.Tool != "create_ticket" {
		t.Errorf("receipt = %s %s %s %s, want %s completed succeeded create_ticket", r.ExecutionID, r.State, r.Outcome, r.Tool, got.ExecutionID)
	}
	last := res.Content[len(res.Content)-1].(*mcp.TextContent).Text
	if last != r.Line() || !strings.Contains(last, r.Digest()) {
		t.Errorf("last text block = %q, want the receipt's line %q", last, r.Line())
	}

	dir := t.TempDir()
	key := datadir.Verifier(data)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name+".json")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// What a client saved: the whole structuredContent.
	valid := write("valid", sc)
	if out, code := runCLI(t, "receipt", "verify", valid, "--key", key); code != 0 || !strings.Contains(out, "receipt verified") {
		t.Fatalf("latch receipt verify = exit %d\n%s", code, out)
	}
	if out, code := runCLI(t, "receipt", "verify", write("latch_receipt", lrc), "--key", key); code != 0 {
		t.Errorf("latch receipt verify of latch_receipt's answer = exit %d\n%s", code, out)
	}
	flip := func(b []byte) []byte { b = append([]byte(nil), b...); b[len(b)/2] ^= 1; return b }
	tampered := map[string]func(x *receipt.Receipt){
		"execution_id":  func(x *receipt.Receipt) { x.ExecutionID += "0" },
		"tool":          func(x *receipt.Receipt) { x.Tool = "deploy_release" },
		"actor":         func(x *receipt.Receipt) { x.Actor += "x" },
		"fingerprint":   func(x *receipt.Receipt) { x.Fingerprint = "sha256:00" },
		"state":         func(x *receipt.Receipt) { x.State = "outcome_unknown" },
		"outcome":       func(x *receipt.Receipt) { x.Outcome = "failed_at_target" },
		"target_status": func(x *receipt.Receipt) { x.TargetStatus++ },
		"result_sha256": func(x *receipt.Receipt) { x.ResultSHA256 = strings.Repeat("0", 64) },
		"journal_index": func(x *receipt.Receipt) { x.JournalIndex++ },
		"leaf_hash":     func(x *receipt.Receipt) { x.LeafHash = flip(x.LeafHash) },
		"record":        func(x *receipt.Receipt) { x.Record = flip(x.Record) },
		"proof":         func(x *receipt.Receipt) { x.Proof[0] = flip(x.Proof[0]) },
		"checkpoint":    func(x *receipt.Receipt) { x.Checkpoint = strings.Replace(x.Checkpoint, "\n", "\n1", 1) },
	}
	var files, names []string
	for name, f := range tampered {
		x := *r
		x.Proof = append([][]byte(nil), r.Proof...)
		f(&x)
		p := write(name, receipt.Marshal(&x))
		if out, code := runCLI(t, "receipt", "verify", p, "--key", key); code != 1 || !strings.Contains(out, "does NOT verify") {
			t.Errorf("latch receipt verify (%s changed) = exit %d\n%s\nwant exit 1, not verified", name, code, out)
		}
		files, names = append(files, p), append(names, name)
	}
	js := jsVerify(t, key, append([]string{write("receipt", got.Receipt)}, files...)...)
	if len(js) != len(files)+1 || js[0] != "ok" {
		t.Fatalf("receipt.mjs = %v, want ok then a refusal per tampered copy", js)
	}
	for i, name := range names {
		if js[i+1] == "ok" {
			t.Errorf("receipt.mjs accepted the receipt with %s changed", name)
		}
	}

	dev.cmd.Process.Signal(syscall.SIGINT)
	if err := dev.cmd.Wait(); err != nil {
		t.Fatalf("latch dev exited with %v after Ctrl-C", err)
	}
	checkInteropExports(t, data, r)
	startDev(t, data)
	if out, code := runCLI(t, "receipt", "verify", valid, "--key", key); code != 0 {
		t.Errorf("latch receipt verify after a restart = exit %d\n%s", code, out)
	}
	out, code := runCLI(t, "exec", "receipt", got.ExecutionID, "--data", data)
	if code != 0 {
		t.Fatalf("latch exec receipt = exit %d\n%s", code, out)
	}
	again := write("again", []byte(out))
	if out, code := runCLI(t, "receipt", "verify", again, "--key", key); code != 0 {
		t.Errorf("latch receipt verify of latch exec receipt's after a restart = exit %d\n%s", code, out)
	}
	if js := jsVerify(t, key, again); len(js) != 1 || js[0] != "ok" {
		t.Errorf("receipt.mjs on latch exec receipt's = %v, want ok", js)
	}
}

// checkInteropExports: the draft MCP audit layout is one chained line per
// journal record (each event_hash the SHA-256 of the line's JCS form
// without it, each previous_hash the line before's), and the decision
// layout has the receipt's execution allowed and succeeded with its result
// hash.
func checkInteropExports(t *testing.T, data string, r *receipt.Receipt) {
	t.Helper()
	out, code := runCLI(t, "audit", "export", data, "--format", "mcp-audit-draft")
	if code != 0 {
		t.Fatalf("audit export --format mcp-audit-draft = exit %d\n%s", code, out)
	}
	prev, n, sawRecord := "", 0, false
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d %q: %v", n, line, err)
		}
		if m["previous_hash"] != prev {
			t.Fatalf("line %d previous_hash %v, want %q", n, m["previous_hash"], prev)
		}
		h := m["event_hash"].(string)
		delete(m, "event_hash")
		b, _ := json.Marshal(m)
		c, err := fingerprint.Canonicalize(b)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(c); hex.EncodeToString(sum[:]) != h {
			t.Fatalf("line %d event_hash %s is not the SHA-256 of its canonical form", n, h)
		}
		if l := m["latch"].(map[string]any); l["leaf_hash"] == r.Digest() {
			sawRecord = m["principal"] == r.Actor && m["tool"] == r.Tool && m["outcome"] == "succeeded" && m["event_type"] == "tool_call.transition"
		}
		prev, n = h, n+1
	}
	if !sawRecord {
		t.Errorf("the MCP audit draft has no succeeded tool_call line with the receipt's leaf hash %s:\n%s", r.Digest(), out)
	}
	out, code = runCLI(t, "audit", "export", data, "--format", "mcp-decision-draft")
	if code != 0 {
		t.Fatalf("audit export --format mcp-decision-draft = exit %d\n%s", code, out)
	}
	var allowed, succeeded bool
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if m["execution_id"] != r.ExecutionID {
			continue
		}
		allowed = allowed || (m["type"] == "decision" && m["decision"] == "allow")
		succeeded = succeeded || (m["type"] == "outcome" && m["outcome"] == "succeeded" && m["result_sha256"] == r.ResultSHA256)
	}
	if !allowed || !succeeded {
		t.Errorf("decision draft for %s: allowed %v, succeeded with the result hash %v; want both\n%s", r.ExecutionID, allowed, succeeded, out)
	}
	if out, code := runCLI(t, "audit", "export", data, "--format", "nope"); code != 2 {
		t.Errorf("audit export --format nope = exit %d, want 2\n%s", code, out)
	}
}
