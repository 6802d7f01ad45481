package devstack

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/tools"
)

// TestCatalog: the embedded example catalog is pointed at the running demo
// target and the dev host agent; a --catalog file is loaded as it is.
func TestCatalog(t *testing.T) {
	const demo, sock = "http://127.0.0.1:55555", "/tmp/dev/hostagent.sock"
	cat, err := Catalog("", demo, sock)
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
	mine, err := Catalog(path, demo, sock)
	if err != nil {
		t.Fatalf("Catalog(%s) = %v", path, err)
	}
	if got := mine.Targets["api"].BaseURL; got != ExampleDemoURL {
		t.Errorf("a --catalog file was rewritten: base_url %q, want %q as written", got, ExampleDemoURL)
	}
	if _, err := Catalog(filepath.Join(t.TempDir(), "missing.yaml"), demo, sock); err == nil {
		t.Error("Catalog(missing file) = nil error")
	}
}

type verifier map[string]string

func (v verifier) Verify(_ context.Context, tok string) (string, string, error) {
	if a, ok := v[tok]; ok {
		return a, "tok_" + a, nil
	}
	return "", "", errors.New("unknown token")
}

// TestDevTokens: the dev token is the dev actor; every other token is the
// token store's to judge.
func TestDevTokens(t *testing.T) {
	d := &devTokens{token: NewToken(), store: verifier{"latch_x": "alice"}}
	type got struct{ Actor, ID string }
	tests := []struct {
		tok     string
		want    got
		wantErr bool
	}{
		{d.token, got{Actor, "dev"}, false},
		{"latch_x", got{"alice", "tok_alice"}, false},
		{d.token + "x", got{}, true},
		{"", got{}, true},
	}
	for _, tt := range tests {
		a, id, err := d.Verify(t.Context(), tt.tok)
		if (err != nil) != tt.wantErr {
			t.Errorf("Verify(%q) error = %v, want error %v", tt.tok, err, tt.wantErr)
		}
		if diff := cmp.Diff(tt.want, got{a, id}); diff != "" {
			t.Errorf("Verify(%q) (-want +got):\n%s", tt.tok, diff)
		}
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
