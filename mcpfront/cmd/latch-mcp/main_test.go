package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
		{"cert without key", []string{"--control-plane", "10.0.0.1:9000", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{"bad log level", []string{"--control-plane", "unix:///tmp/x.sock", "--log-level", "loud"}, "--log-level"},
		{"unknown flag", []string{"--nope"}, "flag provided but not defined"},
		{"allowed origin with userinfo", []string{"--control-plane", "unix:///tmp/x.sock", "--allow-origin", "http://127.0.0.1@evil.example"}, "--allow-origin"},
		{"allowed origin with a path", []string{"--control-plane", "unix:///tmp/x.sock", "--allow-origin", "https://console.example.com/"}, "scheme://host[:port]"},
		{"plaintext to a remote control plane", []string{"--control-plane", "10.0.0.1:9000"}, "give --tls-ca"},
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
