package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/mcpfront/auth"
)

func TestRunBadArguments(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no control plane", []string{"--stdio", "--actor", "a"}, "--control-plane is required"},
		{"catalog flag removed", []string{"--control-plane", "unix:///tmp/x.sock", "--catalog", "c.yaml"}, "--catalog was removed: the control plane serves the catalog"},
		{"tokens flag removed", []string{"--control-plane", "unix:///tmp/x.sock", "--tokens", "tokens.json"}, "--tokens was removed: tokens live in the control plane"},
		{"stdio without actor", []string{"--control-plane", "unix:///tmp/x.sock", "--stdio"}, "--stdio needs --actor"},
		{"public listen for callers without a token", []string{"--control-plane", "unix:///tmp/x.sock", "--actor", "alice", "--listen", "0.0.0.0:7411"}, "refusing to serve callers without a token"},
		{"cert without key", []string{"--control-plane", "10.0.0.1:9000", "--tls-cert", "c.pem"}, "--tls-cert-file and --tls-key-file (tls.cert_file, tls.key_file) go together"},
		{"bad log level", []string{"--control-plane", "unix:///tmp/x.sock", "--log-level", "loud"}, "--log-level"},
		{"unknown flag", []string{"--nope"}, "flag provided but not defined"},
		{"bad log format", []string{"--control-plane", "unix:///tmp/x.sock", "--log-format", "xml"}, "--log-format"},
		{"public metrics listener", []string{"--control-plane", "unix:///tmp/x.sock", "--metrics-listen", "0.0.0.0:7413"}, "--ops-listen 0.0.0.0:7413 is not a loopback address"},
		{"allowed origin with userinfo", []string{"--control-plane", "unix:///tmp/x.sock", "--allow-origin", "http://127.0.0.1@evil.example"}, "--allow-origin"},
		{"allowed origin with a path", []string{"--control-plane", "unix:///tmp/x.sock", "--allow-origin", "https://console.example.com/"}, "scheme://host[:port]"},
		{"plaintext to a remote control plane", []string{"--control-plane", "10.0.0.1:9000"}, "give --tls-ca"},
		{"oauth resource needed off loopback", []string{"--control-plane", "unix:///tmp/x.sock", "--listen", "0.0.0.0:7411", "--oauth-issuer", "https://idp.example.com"}, "--oauth-resource URL is required"},
		{"oauth plain http issuer", []string{"--control-plane", "unix:///tmp/x.sock", "--oauth-issuer", "http://idp.example.com"}, "loopback"},
		{"oauth flags without issuer", []string{"--control-plane", "unix:///tmp/x.sock", "--oauth-resource", "https://mcp.example.com/mcp"}, "need --oauth-issuer"},
		{"oauth bad actor map", []string{"--control-plane", "unix:///tmp/x.sock", "--oauth-issuer", "https://idp.example.com", "--oauth-actor-map", "00u1"}, "CLAIMVALUE=ACTOR"},
		{"oauth mapped actor with a space", []string{"--control-plane", "unix:///tmp/x.sock", "--oauth-issuer", "https://idp.example.com", "--oauth-actor-map", "00u1=a b"}, "actor map"},
		{"oauth jwks of an unknown issuer", []string{"--control-plane", "unix:///tmp/x.sock", "--oauth-issuer", "https://idp.example.com", "--oauth-jwks-url", "https://other.example.com=https://other.example.com/jwks"}, "not an --oauth-issuer"},
		{"oauth jwks ambiguous", []string{"--control-plane", "unix:///tmp/x.sock", "--oauth-issuer", "https://a.example.com", "--oauth-issuer", "https://b.example.com", "--oauth-jwks-url", "https://a.example.com/jwks"}, "ISSUER=URL"},
		{"negative session cap", []string{"--control-plane", "unix:///tmp/x.sock", "--max-sessions-per-actor", "-1"}, "--max-sessions-per-actor is -1"},
		{"oauth with stdio", []string{"--control-plane", "unix:///tmp/x.sock", "--stdio", "--actor", "a", "--oauth-issuer", "https://idp.example.com"}, "--oauth-issuer is for HTTP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(context.Background(), tt.args, &stderr); code != 2 {
				t.Errorf("run(%q) = %d, want 2 (stderr: %s)", tt.args, code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("run(%q) stderr = %q, want it to mention %q", tt.args, stderr.String(), tt.want)
			}
		})
	}
}

func TestOAuthFlags(t *testing.T) {
	o, err := parseFlags([]string{
		"--control-plane", "unix:///tmp/x.sock", "--listen", "127.0.0.1:7411",
		"--oauth-issuer", "https://a.example.com", "--oauth-issuer", "https://b.example.com/tenant",
		"--oauth-jwks-url", "https://b.example.com/tenant=https://b.example.com/keys?v=2",
		"--oauth-actor-claim", "email", "--oauth-actor-map", "alice@example.com=alice", "--oauth-actor-map", "bot@example.com=ci-bot",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := auth.JWTConfig{
		Issuers: []auth.Issuer{
			{URL: "https://a.example.com"},
			{URL: "https://b.example.com/tenant", JWKSURL: "https://b.example.com/keys?v=2"},
		},
		Resource:   "http://127.0.0.1:7411/mcp",
		ActorClaim: "email",
		ActorMap:   map[string]string{"alice@example.com": "alice", "bot@example.com": "ci-bot"},
	}
	if diff := cmp.Diff(want, o.oauthCfg); diff != "" {
		t.Errorf("OAuth config (-want +got):\n%s", diff)
	}
}

// TestDefaultStateDir: systemd's StateDirectory= first, then the user's XDG
// state dir; no home, no default (the reports stay in memory).
func TestDefaultStateDir(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"systemd", map[string]string{"STATE_DIRECTORY": "/var/lib/latch-mcp:/var/lib/other", "HOME": "/home/a"}, "/var/lib/latch-mcp"},
		{"xdg", map[string]string{"XDG_STATE_HOME": "/home/a/state", "HOME": "/home/a"}, "/home/a/state/latch-mcp"},
		{"relative xdg is ignored", map[string]string{"XDG_STATE_HOME": "state", "HOME": "/home/a"}, "/home/a/.local/state/latch-mcp"},
		{"home", map[string]string{"HOME": "/home/a"}, "/home/a/.local/state/latch-mcp"},
		{"nothing", map[string]string{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := defaultStateDir(func(k string) string { return tt.env[k] }); got != tt.want {
				t.Errorf("defaultStateDir(%v) = %q, want %q", tt.env, got, tt.want)
			}
		})
	}
}
