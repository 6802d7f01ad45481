package receipt_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchhq/latch/receipt"
)

// JSResult is one line of testdata/run-vectors.mjs.
type JSResult struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Kind   string `json:"kind"`
	Error  string `json:"error"`
	Digest string `json:"digest"`
}

// Node finds a Node.js with WebCrypto Ed25519 (20 and later): the Node 22
// the MCP conformance suite installs (.ci/run), else the one on PATH. It
// skips, or fails under CI, when there is none.
func Node(t testing.TB) string {
	t.Helper()
	root, _ := filepath.Abs("..")
	for _, p := range []string{filepath.Join(root, "mcpfront", "testdata", "conformance", "node_modules", ".bin", "node")} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("node"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("node is not installed: .ci/run installs it (apt nodejs, or the conformance suite's Node 22)")
	}
	t.Skip("node is not installed")
	return ""
}

// RunJS runs receipt.mjs over the vectors and the receipt files given (each
// with its verifier key in FILE.key), bounded to a minute.
func RunJS(t testing.TB, files ...string) map[string]JSResult {
	t.Helper()
	node := Node(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	script, _ := filepath.Abs("testdata/run-vectors.mjs")
	cmd := exec.CommandContext(ctx, node, append([]string{script}, files...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
	}
	res := map[string]JSResult{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r JSResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("node printed %q: %v", sc.Text(), err)
		}
		res[r.Name] = r
	}
	return res
}

// TestJSVectors runs the JavaScript module over the same vectors as
// TestVectors: it accepts the valid receipts (with the Go digest), refuses
// them under another key, and refuses each tampered copy with the Go
// verifier's error class.
func TestJSVectors(t *testing.T) {
	v := readVectors(t)
	res := RunJS(t)
	for i, raw := range v.Valid {
		r, err := receipt.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		name := "valid/" + itoa(i)
		if got := res[name]; !got.OK || got.Digest != r.Digest() {
			t.Errorf("JS %s = %+v, want ok with digest %s", name, got, r.Digest())
		}
		if got := res["other-key/"+itoa(i)]; got.OK || got.Kind != "signature" {
			t.Errorf("JS other-key/%d = %+v, want a signature error", i, got)
		}
	}
	for _, tc := range v.Tampered {
		got, ok := res["tampered/"+tc.Name]
		if !ok || got.OK || got.Kind != tc.Kind {
			t.Errorf("JS tampered/%s = %+v, want refused as %s", tc.Name, got, tc.Kind)
		}
	}
	if t.Failed() {
		var names []string
		for n := range res {
			names = append(names, n)
		}
		t.Logf("JS results: %s", strings.Join(names, ", "))
	}
}

func itoa(i int) string { return string(rune('0' + i)) }
