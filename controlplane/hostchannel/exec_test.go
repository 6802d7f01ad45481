package hostchannel

import (
	"slices"
	"testing"
	"time"
)

func TestWrapPlain(t *testing.T) {
	argv := []string{"/usr/bin/deploy", "--v=1"}
	tests := []struct {
		name    string
		cwd     string
		env     map[string]string
		timeout time.Duration
		want    []string
	}{
		{name: "bare", want: argv},
		{name: "timeout rounds up to seconds", timeout: 1500 * time.Millisecond,
			want: []string{"timeout", "-k", "10s", "2s", "/usr/bin/deploy", "--v=1"}},
		{name: "all", cwd: "/srv", env: map[string]string{"B": "2", "A": "1"}, timeout: time.Minute,
			want: []string{"timeout", "-k", "10s", "60s", "env", "A=1", "B=2", "/bin/sh", "-c", `cd -- "$0" && exec "$@"`, "/srv", "/usr/bin/deploy", "--v=1"}},
	}
	for _, tt := range tests {
		if got := wrapPlain(argv, tt.cwd, tt.env, tt.timeout); !slices.Equal(got, tt.want) {
			t.Errorf("%s: wrapPlain = %q, want %q", tt.name, got, tt.want)
		}
	}
}
