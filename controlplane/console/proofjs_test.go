package console

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/latchhq/latch/controlplane/journal"
)

// memTree is an in-memory tlog tree for building proofs.
type memTree struct {
	hashes []tlog.Hash
	leaves [][]byte
}

func (m *memTree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = m.hashes[x]
	}
	return out, nil
}

func (m *memTree) add(data []byte) {
	hs, err := tlog.StoredHashes(int64(len(m.leaves)), data, m)
	if err != nil {
		panic(err)
	}
	m.hashes = append(m.hashes, hs...)
	m.leaves = append(m.leaves, data)
}

func b64s(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	return out
}

// proofPage serves the console's script on a page with the console's CSP,
// on loopback (a secure context, so WebCrypto is there).
func proofPage(t *testing.T) string {
	static, _ := fs.Sub(assets, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /ui/static/receipt.mjs", serveReceiptJS)
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; connect-src 'self'")
		fmt.Fprint(w, `<!doctype html><title>proof</title><script type="module" src="/ui/static/console.js"></script><p id="ok">ready</p>`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestBrowserProofsMatchTlog checks the console's in-browser checks against
// the Go code the journal uses: leaf and node hashes equal
// journal.LeafHash and tlog.NodeHash; every inclusion proof tlog makes, for
// every index of trees of 1 to 33 leaves, verifies in the browser, and the
// same proof with one bit flipped, at the wrong index or against the wrong
// size does not; a checkpoint signed by journal.Signer verifies with
// WebCrypto Ed25519, and a tampered one does not.
func TestBrowserProofsMatchTlog(t *testing.T) {
	ctx := browser(t)
	run(t, ctx, "open the proof page", chromedp.Navigate(proofPage(t)), chromedp.WaitVisible("#ok"))

	data := []byte("a journal leaf \x00\x01\xff")
	gotLeaf := eval[string](t, ctx, fmt.Sprintf(`latchProof.leafHash(latchProof.b64(%q)).then(latchProof.hex)`, base64.StdEncoding.EncodeToString(data)))
	if want := journal.LeafHash(data); gotLeaf != fmt.Sprintf("%x", want[:]) {
		t.Errorf("browser leafHash = %s, want journal.LeafHash %x", gotLeaf, want[:])
	}
	l, r := sha256.Sum256([]byte("l")), sha256.Sum256([]byte("r"))
	gotNode := eval[string](t, ctx, fmt.Sprintf(`latchProof.nodeHash(latchProof.b64(%q), latchProof.b64(%q)).then(latchProof.hex)`,
		base64.StdEncoding.EncodeToString(l[:]), base64.StdEncoding.EncodeToString(r[:])))
	if want := tlog.NodeHash(l, r); gotNode != fmt.Sprintf("%x", want[:]) {
		t.Errorf("browser nodeHash = %s, want tlog.NodeHash %x", gotNode, want[:])
	}

	type tc struct {
		Leaf  string   `json:"leaf"`
		Index int64    `json:"index"`
		Size  int64    `json:"size"`
		Proof []string `json:"proof"`
		Root  string   `json:"root"`
		Want  bool     `json:"want"`
		Name  string   `json:"name"`
	}
	var cases []tc
	tree := &memTree{}
	for size := int64(1); size <= 33; size++ {
		tree.add(fmt.Appendf(nil, "record %d", size-1))
		root, err := tlog.TreeHash(size, tree)
		if err != nil {
			t.Fatal(err)
		}
		rootB64 := base64.StdEncoding.EncodeToString(root[:])
		for i := int64(0); i < size; i++ {
			p, err := tlog.ProveRecord(size, i, tree)
			if err != nil {
				t.Fatal(err)
			}
			if err := tlog.CheckRecord(p, size, root, i, tlog.RecordHash(tree.leaves[i])); err != nil {
				t.Fatalf("tlog itself rejects its proof: %v", err)
			}
			leaf := base64.StdEncoding.EncodeToString(tree.leaves[i])
			name := fmt.Sprintf("size %d index %d", size, i)
			cases = append(cases, tc{leaf, i, size, b64s(p), rootB64, true, name})
			if len(p) > 0 {
				bad := append(tlog.RecordProof(nil), p...)
				bad[len(bad)/2][7] ^= 1
				cases = append(cases, tc{leaf, i, size, b64s(bad), rootB64, false, name + " flipped bit"})
			}
			if size > 1 {
				cases = append(cases, tc{leaf, (i + 1) % size, size, b64s(p), rootB64, false, name + " wrong index"})
			}
			other := base64.StdEncoding.EncodeToString(append([]byte("x"), tree.leaves[i]...))
			cases = append(cases, tc{other, i, size, b64s(p), rootB64, false, name + " other leaf"})
		}
	}
	js, _ := json.Marshal(cases)
	got := eval[[]bool](t, ctx, `(async () => {
		const out = [];
		for (const c of `+string(js)+`) {
			out.push(await latchProof.verifyInclusion(latchProof.b64(c.leaf), c.index, c.size, c.proof.map(latchProof.b64), latchProof.b64(c.root)));
		}
		return out;
	})()`)
	if len(got) != len(cases) {
		t.Fatalf("browser answered %d cases of %d", len(got), len(cases))
	}
	bad := 0
	for i, c := range cases {
		if got[i] != c.Want {
			bad++
			if bad <= 10 {
				t.Errorf("browser verifyInclusion(%s) = %v, want %v", c.Name, got[i], c.Want)
			}
		}
	}
	t.Logf("%d proofs checked in the browser against tlog", len(cases))

	// A verifier key whose base64 part holds a '+' (the separator of its
	// fields) is the case a naive split gets wrong: pick one.
	var skey, vkey string
	for range 500 {
		var err error
		if skey, vkey, err = journal.GenerateKey("latch/activity"); err != nil {
			t.Fatal(err)
		}
		if strings.Count(vkey, "+") > 2 {
			break
		}
	}
	signer, err := journal.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := tlog.TreeHash(33, tree)
	note, err := signer.Sign(33, root, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, _ := journal.GenerateKey("latch/activity")
	tampered := strings.Replace(string(note), "\n33\n", "\n34\n", 1)
	for _, c := range []struct {
		name, note, key, want string
	}{
		{"signed note", string(note), vkey, "verified"},
		{"size changed after signing", tampered, vkey, "bad"},
		{"another key", string(note), otherKey, "bad"},
		{"garbage", "not a note", vkey, "bad"},
	} {
		got := eval[string](t, ctx, fmt.Sprintf(`latchProof.verifyNote(%q, %q)`, c.note, c.key))
		if got != c.want {
			t.Errorf("browser verifyNote(%s) = %q, want %q", c.name, got, c.want)
		}
	}
	parsed := eval[map[string]any](t, ctx, fmt.Sprintf(`(() => { const n = latchProof.parseNote(%q); return {size: n.size, root: latchProof.hex(n.root), origin: n.origin}; })()`, string(note)))
	if parsed["size"] != float64(33) || parsed["root"] != fmt.Sprintf("%x", root[:]) || parsed["origin"] != "latch/activity" {
		t.Errorf("browser parseNote = %v, want size 33, root %x, origin latch/activity", parsed, root[:])
	}
}
