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
		{"no control plane", []string{"--catalog", "c.yaml"}, "--control-plane is required"},
		{"no catalog", []string{"--control-plane", "unix:///tmp/x.sock"}, "--catalog is required"},
		{"stdio without actor", []string{"--control-plane", "unix:///tmp/x.sock", "--catalog", "c.yaml", "--stdio"}, "--stdio needs --actor"},
		{"public listen without tokens", []string{"--control-plane", "unix:///tmp/x.sock", "--catalog", "c.yaml", "--listen", "0.0.0.0:7411"}, "refusing to serve without --tokens"},
		{"cert without key", []string{"--control-plane", "10.0.0.1:9000", "--catalog", "c.yaml", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{"bad log level", []string{"--control-plane", "unix:///tmp/x.sock", "--catalog", "c.yaml", "--log-level", "loud"}, "--log-level"},
		{"unknown flag", []string{"--nope"}, "flag provided but not defined"},
		{"bad log format", []string{"--control-plane", "unix:///tmp/x.sock", "--catalog", "c.yaml", "--log-format", "xml"}, "--log-format"},
		{"public metrics listener", []string{"--control-plane", "unix:///tmp/x.sock", "--catalog", "c.yaml", "--metrics-listen", "0.0.0.0:7413"}, "--metrics-listen 0.0.0.0:7413 is not a loopback address"},
		{"missing catalog file", []string{"--control-plane", "unix:///tmp/x.sock", "--catalog", "/nonexistent/catalog.yaml"}, "--catalog"},
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
