package cli

import (
	"context"
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
	"github.com/latchhq/latch/internal/testing/witnesstest"
	"github.com/latchhq/latch/receipt"
)

// TestWitnessThroughDev: `latch dev` with a real witness (litewitness on
// loopback) answers a tool call with a receipt whose checkpoint the
// witness co-signed; `latch receipt verify --witness-key` and receipt.mjs
// accept it and refuse it with the cosignature removed or altered; the
// periodic checkpoints are co-signed too, so `latch audit verify
// --witness-key` finds every record witnessed; after a restart receipts
// stay verifiable and are co-signed again.
func TestWitnessThroughDev(t *testing.T) {
	w := witnesstest.Start(t)
	data := filepath.Join(t.TempDir(), "dev")
	// The first start makes the journal key; the witness is then told
	// about the journal, as an operator would (witnessctl add-log/add-key).
	dev := startDev(t, data)
	stopDev(t, dev)
	vkey, err := os.ReadFile(datadir.Verifier(data))
	if err != nil {
		t.Fatal(err)
	}
	w.AddLog(t, string(vkey))
	wkeyFile := filepath.Join(t.TempDir(), "witness.pub")
	if err := os.WriteFile(wkeyFile, []byte(w.Key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "checkpoints.jsonl")
	args := []string{"--witness-url", w.URL, "--witness-key", wkeyFile, "--checkpoint-interval", "200ms", "--checkpoint-copy", copyPath}
	dev = startDev(t, data, args...)

	dir := t.TempDir()
	key := datadir.Verifier(data)
	call := func(title string) (*receipt.Receipt, string) {
		t.Helper()
		raw, err := os.ReadFile(datadir.DevInfo(data))
		if err != nil {
			t.Fatal(err)
		}
		var info devInfo
		if err := json.Unmarshal(raw, &info); err != nil {
			t.Fatal(err)
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "witness-e2e", Version: "1"}, nil)
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: info.MCPURL,
			HTTPClient: &http.Client{Transport: bearerRT{"latch_dev_test_token"}}, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "create_ticket", Arguments: map[string]any{"title": title}})
		if err != nil || res.IsError {
			t.Fatalf("CallTool: %v %+v", err, res)
		}
		var got struct {
			Receipt json.RawMessage `json:"receipt"`
		}
		sc, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(sc, &got); err != nil || got.Receipt == nil {
			t.Fatalf("structuredContent = %s, want a receipt", sc)
		}
		r, err := receipt.Parse(got.Receipt)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, title+".json")
		if err := os.WriteFile(p, got.Receipt, 0o600); err != nil {
			t.Fatal(err)
		}
		return r, p
	}
	r, valid := call("witnessed")
	if out, code := runCLI(t, "receipt", "verify", valid, "--key", key, "--witness-key", wkeyFile); code != 0 || !strings.Contains(out, "co-signed by witness "+witnesstest.Name) {
		t.Fatalf("latch receipt verify --witness-key = exit %d\n%s\nwant verified, co-signed by %s", code, out, witnesstest.Name)
	}
	// The cosignature removed, or one byte of it changed: refused with
	// --witness-key, while the journal's signature alone still verifies.
	lines := strings.Split(strings.TrimSuffix(r.Checkpoint, "\n"), "\n")
	var stripped, altered []string
	for _, l := range lines {
		if strings.HasPrefix(l, "— "+witnesstest.Name+" ") {
			// A character well inside the signature: the last ones of
			// its 76 bytes in base64 ("x==") hold padding bits a
			// decoder ignores, so changing one there may change nothing.
			altered = append(altered, l[:len(l)-10]+flipB64(l[len(l)-10:]))
			continue
		}
		stripped, altered = append(stripped, l), append(altered, l)
	}
	if len(stripped) == len(lines) {
		t.Fatalf("the receipt's checkpoint carries no line by %s:\n%s", witnesstest.Name, r.Checkpoint)
	}
	var files []string
	for name, cp := range map[string][]string{"stripped": stripped, "altered": altered} {
		x := *r
		x.Checkpoint = strings.Join(cp, "\n") + "\n"
		p := filepath.Join(dir, name+".json")
		if err := os.WriteFile(p, receipt.Marshal(&x), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, code := runCLI(t, "receipt", "verify", p, "--key", key, "--witness-key", wkeyFile); code != 1 || !strings.Contains(out, "not co-signed by the witness") {
			t.Errorf("latch receipt verify --witness-key of the receipt with its cosignature %s = exit %d\n%s\nwant refused", name, code, out)
		}
		if name == "stripped" {
			if out, code := runCLI(t, "receipt", "verify", p, "--key", key); code != 0 {
				t.Errorf("latch receipt verify (no witness asked) of the stripped receipt = exit %d\n%s", code, out)
			}
		}
		files = append(files, p)
	}
	if js := jsVerifyWitness(t, key, w.Key, append([]string{valid}, files...)...); strings.Join(js, " ") != "ok witness witness" {
		t.Errorf("receipt.mjs with the witness key = %v, want ok witness witness", js)
	}

	// The periodic checkpoint after the last call is co-signed too.
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(copyPath)
		if strings.Count(string(b), witnesstest.Name) > 0 && strings.Contains(string(b), fmt.Sprintf("\\n%d\\n", r.JournalIndex+1)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopDev(t, dev)
	out, code := runCLI(t, "audit", "verify", data, "--checkpoints", copyPath, "--witness-key", wkeyFile)
	if code != 0 || strings.Contains(out, "not witnessed") || strings.Contains(out, "fork") {
		t.Fatalf("latch audit verify --witness-key = exit %d\n%s\nwant ok, every record witnessed", code, out)
	}

	// Restarted, the receipts are co-signed again (the client learns the
	// witness's size from its answer) and the old one still verifies.
	dev = startDev(t, data, args...)
	_, again := call("after-restart")
	for _, p := range []string{valid, again} {
		if out, code := runCLI(t, "receipt", "verify", p, "--key", key, "--witness-key", wkeyFile); code != 0 {
			t.Errorf("latch receipt verify --witness-key %s after a restart = exit %d\n%s", filepath.Base(p), code, out)
		}
	}
	stopDev(t, dev)
}

func stopDev(t *testing.T, dev *proc) {
	t.Helper()
	dev.cmd.Process.Signal(syscall.SIGINT)
	if err := dev.cmd.Wait(); err != nil {
		t.Fatalf("latch dev exited with %v after Ctrl-C", err)
	}
}

// flipB64 changes a base64 tail to another valid one.
func flipB64(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

// jsVerifyWitness runs receipt.mjs's verifyReceipt with the witness key
// on each receipt file: "ok" or the kind it refused it with.
func jsVerifyWitness(t *testing.T, keyFile, witnessKey string, files ...string) []string {
	t.Helper()
	mod, _ := filepath.Abs("../../receipt/receipt.mjs")
	script := fmt.Sprintf(`import { readFileSync } from 'node:fs';
import { verifyReceipt } from %q;
const key = readFileSync(process.argv[1], 'utf8').trim();
for (const f of process.argv.slice(3)) {
  const r = await verifyReceipt(JSON.parse(readFileSync(f, 'utf8')), key, { witnessKeys: [process.argv[2]] });
  console.log(r.ok ? 'ok' : r.kind);
}`, "file://"+mod)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, nodeBin(t), append([]string{"--input-type=module", "-e", script, keyFile, witnessKey}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}
