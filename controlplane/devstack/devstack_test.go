package devstack

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/store"
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
	st, err := store.New(store.Config{KV: store.NewMemKV()})
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
