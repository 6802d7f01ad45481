package loopback

import "testing"

func TestHostPort(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"127.0.0.1:7411", true},
		{"[::1]:7411", true},
		{"localhost:7411", true},
		{"0.0.0.0:7411", false},
		{":7411", false},
		{"10.1.2.3:7411", false},
		{"example.com:443", false},
		{"127.0.0.1", false}, // no port: not a host:port
	}
	for _, tt := range tests {
		if got := HostPort(tt.in); got != tt.want {
			t.Errorf("HostPort(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
