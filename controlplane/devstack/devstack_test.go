package devstack

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/controlplane/tokens"
	"github.com/latchhq/latch/tools"
)

// TestCatalog: the embedded example catalog is pointed at the running demo
// target and the dev host agent; a --catalog file is loaded as it is.
func TestCatalog(t *testing.T) {
	const demo, sock = "http://127.0.0.1:55555", "/tmp/dev/hostagent.sock"
	cat, data, _, err := Catalog("", demo, sock).Load()
	if err != nil {
		t.Fatalf("Catalog(embedded) = %v", err)
	}
	var https, locals int
	for name, tg := range cat.Targets {
		switch tg.Channel {
		case tools.ChannelHTTP:
			https++
			if tg.BaseURL != demo {
				t.Errorf("target %s base_url = %q, want the demo target %q", name, tg.BaseURL, demo)
			}
		case tools.ChannelLocal:
			locals++
			if tg.HostagentSocket != sock {
				t.Errorf("target %s hostagent_socket = %q, want %q", name, tg.HostagentSocket, sock)
			}
		case tools.ChannelSSH:
			if tg.HostagentSocket != "" {
				t.Errorf("target %s is still an ssh target with a host agent; want it local to the dev host agent", name)
			}
		}
	}
	if https == 0 || locals == 0 {
		t.Errorf("embedded catalog has %d http and %d local targets; want both rewritten", https, locals)
	}

	path := filepath.Join(t.TempDir(), "c.yaml")
	const own = "targets:\n  api: {channel: http, allow_private: true, base_url: \"" + ExampleDemoURL + "\"}\ntools:\n  look:\n    input_schema: {type: object}\n    target: api\n    replay: read_only\n    request: {method: GET, path: /look}\n"
	if err := os.WriteFile(path, []byte(own), 0o600); err != nil {
		t.Fatal(err)
	}
	_, other, _, err := Catalog("", "http://127.0.0.1:55556", sock).Load()
	if err != nil {
		t.Fatal(err)
	}
	if catalog.Version(data) == catalog.Version(other) {
		t.Error("the embedded catalog pointed at two demo targets has one version; want the rewrite in the version")
	}
	mine, _, _, err := Catalog(path, demo, sock).Load()
	if err != nil {
		t.Fatalf("Catalog(%s) = %v", path, err)
	}
	if got := mine.Targets["api"].BaseURL; got != ExampleDemoURL {
		t.Errorf("a --catalog file was rewritten: base_url %q, want %q as written", got, ExampleDemoURL)
	}
	if _, _, _, err := Catalog(filepath.Join(t.TempDir(), "missing.yaml"), demo, sock).Load(); err == nil {
		t.Error("Catalog(missing file) = nil error")
	}
}

// TestDevToken: the control plane knows the dev token as the dev actor,
// without storing or journaling it; other tokens are the store's to judge.
func TestDevToken(t *testing.T) {
	st, err := store.New(store.Config{KV: memkv.New()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dev := NewToken()
	ts, err := tokens.New(tokens.Config{Store: st, Static: []tokens.Static{StaticToken(dev)}})
	if err != nil {
		t.Fatal(err)
	}
	alice, _, err := ts.Create(t.Context(), "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	size := st.JournalSize()
	type got struct{ Actor, ID string }
	tests := []struct {
		tok     string
		want    got
		wantErr bool
	}{
		{dev, got{Actor, "dev"}, false},
		{alice, got{"alice", ""}, false},
		{dev + "x", got{}, true},
		{"", got{}, true},
	}
	for _, tt := range tests {
		tk, err := ts.Authenticate(t.Context(), tt.tok)
		if (err != nil) != tt.wantErr {
			t.Errorf("Authenticate(%q) error = %v, want error %v", tt.tok, err, tt.wantErr)
		}
		g := got{tk.GetActor(), tk.GetId()}
		if tt.want.Actor == "alice" {
			g.ID = "" // derived from the random token
		}
		if diff := cmp.Diff(tt.want, g); diff != "" {
			t.Errorf("Authenticate(%q) (-want +got):\n%s", tt.tok, diff)
		}
	}
	if n := st.JournalSize(); n != size {
		t.Errorf("authenticating wrote %d journal entries, want none", n-size)
	}
	if a, b := NewToken(), NewToken(); a == b || len(a) < 30 {
		t.Errorf("NewToken() = %q, %q: want distinct random tokens", a, b)
	}
}

func TestRunRefusesIncompleteConfig(t *testing.T) {
	if err := Run(t.Context(), Config{DataDir: t.TempDir()}); err == nil {
		t.Fatal("Run(incomplete Config) = nil, want an error naming the required fields")
	}
}

// TestLoadToken: the dev token survives restarts in a 0600 file; a chosen
// token replaces it and is kept; a token unfit for a header is refused.
func TestLoadToken(t *testing.T) {
	data := filepath.Join(t.TempDir(), "dev")
	first, created, err := LoadToken(data, "")
	if err != nil || !created || len(first) < 16 {
		t.Fatalf("LoadToken(new dir) = %q, %v, %v; want a new token", first, created, err)
	}
	fi, err := os.Stat(datadir.DevToken(data))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	again, created, err := LoadToken(data, "")
	if err != nil || created || again != first {
		t.Errorf("LoadToken(restart) = %q, %v, %v; want the kept %q", again, created, err, first)
	}
	const chosen = "my-dev-token-0123456789"
	if got, _, err := LoadToken(data, chosen); err != nil || got != chosen {
		t.Fatalf("LoadToken(chosen) = %q, %v; want %q", got, err, chosen)
	}
	if got, _, err := LoadToken(data, ""); err != nil || got != chosen {
		t.Errorf("LoadToken after choosing = %q, %v; want the chosen token kept", got, err)
	}
	if err := os.Chmod(datadir.DevToken(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadToken(data, ""); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(datadir.DevToken(data)); fi.Mode().Perm() != 0o600 {
		t.Errorf("a 0644 token file stays %v; want it tightened to 0600", fi.Mode().Perm())
	}
	for _, bad := range []string{"short", "has a space in it 0123", "line\nbreak-0123456789"} {
		if _, _, err := LoadToken(data, bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("LoadToken(%q) = %v, want ErrBadToken", bad, err)
		}
	}
}

// TestBannerOffersDemoOnlyWithItsCatalog: the banner suggests `latch demo`
// (with the --data that reaches this instance) only when the example catalog
// runs; with --catalog it says why the demo is not offered.
func TestBannerOffersDemoOnlyWithItsCatalog(t *testing.T) {
	var example, other strings.Builder
	printBanner(&example, banner{url: "http://127.0.0.1:7411/mcp", data: "/tmp/x", catalog: CatalogExample})
	printBanner(&other, banner{url: "http://127.0.0.1:7411/mcp", data: "/tmp/x", catalog: "team.yaml"})
	if !strings.Contains(example.String(), "Try the story:  latch demo --data /tmp/x") {
		t.Errorf("banner with the example catalog does not offer latch demo --data /tmp/x:\n%s", example.String())
	}
	if strings.Contains(other.String(), "Try the story") || !strings.Contains(other.String(), "needs the example catalog") {
		t.Errorf("banner with --catalog offers latch demo, which would refuse:\n%s", other.String())
	}
}
