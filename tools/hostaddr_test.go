package tools

import (
	"strings"
	"testing"
)

// TestHostAddresses: an HTTP target's base_url and an HTTP upstream's url
// are held to the same address rule (checkHostAddr): link-local,
// unspecified and multicast literals never, loopback and private ones only
// with allow_private, host names always (the dispatcher checks what they
// resolve to).
func TestHostAddresses(t *testing.T) {
	tests := []struct {
		name         string
		host         string
		allowPrivate bool
		want         string // substring of both refusals; "" accepted
	}{
		{"cloud metadata", "169.254.169.254", true, "is a link-local, unspecified or multicast address"},
		{"IPv6 link-local", "[fe80::1]", true, "is a link-local, unspecified or multicast address"},
		{"unspecified", "0.0.0.0", true, "is a link-local, unspecified or multicast address"},
		{"multicast", "224.0.0.1", true, "is a link-local, unspecified or multicast address"},
		{"IPv4-mapped link-local", "[::ffff:169.254.1.1]", true, "is a link-local, unspecified or multicast address"},
		{"loopback", "127.0.0.1", false, "is a loopback or private address; set allow_private: true"},
		{"localhost", "localhost", false, "is a loopback or private address; set allow_private: true"},
		{"private", "10.1.2.3", false, "is a loopback or private address; set allow_private: true"},
		{"loopback allowed", "127.0.0.1", true, ""},
		{"private allowed", "192.168.1.1", true, ""},
		{"public", "203.0.113.7", false, ""},
		{"host name", "api.example.test", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allow := ""
			if tt.allowPrivate {
				allow = "\n    allow_private: true"
			}
			for _, c := range []struct{ field, verb, text string }{
				{"base_url", "sends", "targets:\n  api:\n    channel: http\n    base_url: http://" + tt.host + ":8080" + allow + "\n"},
				{"url", "connects", "upstreams:\n  up:\n    transport: http\n    url: http://" + tt.host + ":8080/mcp" + allow + "\n"},
			} {
				_, err := Parse("hosts.yaml", []byte(c.text))
				switch {
				case tt.want == "" && err != nil && strings.Contains(err.Error(), "host "):
					t.Errorf("%s %s: Parse = %v, want the host accepted", c.field, tt.host, err)
				case tt.want != "" && (err == nil || !strings.Contains(err.Error(), c.field+" host") || !strings.Contains(err.Error(), tt.want)):
					t.Errorf("%s %s: Parse = %v, want %q", c.field, tt.host, err, c.field+" host ... "+tt.want)
				case strings.Contains(tt.want, "link-local") && !strings.Contains(err.Error(), "Latch never "+c.verb+" there"):
					t.Errorf("%s %s: Parse = %v, want it to say Latch never %s there", c.field, tt.host, err, c.verb)
				}
			}
		})
	}
}
