package mcpfront

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestClientGoneIsNotAWarning: a submit cut because the client went away
// is logged at debug; a control plane that cannot be reached is a warning.
func TestClientGoneIsNotAWarning(t *testing.T) {
	f := &Front{}
	tool := "deploy_release"
	for _, c := range []struct {
		name string
		err  error
		warn bool
	}{
		{"client went away", status.Error(codes.Canceled, "context canceled"), false},
		{"control plane down", status.Error(codes.Unavailable, "connection refused"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			log := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &out})
			res, err := f.submitError(log, tool, c.err)
			if err != nil || !res.IsError {
				t.Fatalf("submitError = %v, %v; want a tool error", res, err)
			}
			if got := strings.Contains(out.String(), "[WARN]"); got != c.warn {
				t.Errorf("submitError(%v) logged %q at info level; want a warning: %v", c.err, out.String(), c.warn)
			}
		})
	}
}

func TestMetricLabelsAreBounded(t *testing.T) {
	for in, want := range map[string]string{"tools/call": "tools/call", "initialize": "initialize", "x/evil-" + strings.Repeat("a", 50): "other"} {
		if got := methodLabel(in); got != want {
			t.Errorf("methodLabel(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"": "none", "2025-11-25": "2025-11-25", "1999-01-01": "other", "2026-07-28": "2026-07-28"} {
		if got := protocolLabel(in); got != want {
			t.Errorf("protocolLabel(%q) = %q, want %q", in, got, want)
		}
	}
}
