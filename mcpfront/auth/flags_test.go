package auth_test

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/latchhq/latch/mcpfront/auth"
)

// TestFlagsActorPrefix: JWT actors stay out of the static-token actors'
// namespace: without --oauth-actor-prefix the prefix is oauth:, an empty
// one is refused naming the flag, and an actor map needs none.
func TestFlagsActorPrefix(t *testing.T) {
	const iss = "https://idp.example.com"
	tests := []struct {
		name       string
		args       []string
		wantPrefix string
		wantErr    string
	}{
		{"default", []string{"--oauth-issuer", iss}, auth.DefaultActorPrefix, ""},
		{"given", []string{"--oauth-issuer", iss, "--oauth-actor-prefix", "idp:"}, "idp:", ""},
		{"empty", []string{"--oauth-issuer", iss, "--oauth-actor-prefix", ""}, "", "--oauth-actor-prefix"},
		{"map", []string{"--oauth-issuer", iss, "--oauth-actor-map", "00u1=alice"}, "", ""},
		{"map and empty prefix", []string{"--oauth-issuer", iss, "--oauth-actor-prefix", "", "--oauth-actor-map", "00u1=alice"}, "", ""},
		{"prefix without issuer", []string{"--oauth-actor-prefix", "idp:"}, "", "need --oauth-issuer"},
		{"empty prefix without issuer", []string{"--oauth-actor-prefix", ""}, "", "need --oauth-issuer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f auth.Flags
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.Register(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := f.Config(resource)
			if tt.wantErr != "" {
				if !errors.Is(err, auth.ErrBadJWTConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Config(%q) = %v, want ErrBadJWTConfig naming %s", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil || cfg.ActorPrefix != tt.wantPrefix {
				t.Errorf("Config(%q) = prefix %q, %v; want %q", tt.args, cfg.ActorPrefix, err, tt.wantPrefix)
			}
		})
	}
}
