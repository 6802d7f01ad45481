package httpchannel

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/tools"
)

// TestIdentity pins the HTTP channel's part of the canonical intent record:
// it enters every fingerprint, so it must not change for an unchanged
// catalog entry (these strings are what the engine built before the
// channel supplied them).
func TestIdentity(t *testing.T) {
	c := &Channel{}
	post := &tools.Tool{HTTPAction: tools.HTTPAction{Request: &tools.Request{Method: "POST", Path: "/v1/releases/{{service}}"}}}
	for _, tt := range []struct {
		name   string
		tool   *tools.Tool
		target *tools.Target
		want   engine.Identity
	}{
		{"base path trailing slash dropped", post, &tools.Target{HTTPTarget: tools.HTTPTarget{BaseURL: "https://deploy.internal/api/"}},
			engine.Identity{Method: "POST", Target: "https://deploy.internal/api/v1/releases/{{service}}"}},
		{"port kept", post, &tools.Target{HTTPTarget: tools.HTTPTarget{BaseURL: "http://127.0.0.1:8080"}},
			engine.Identity{Method: "POST", Target: "http://127.0.0.1:8080/v1/releases/{{service}}"}},
		{"no request template", &tools.Tool{}, &tools.Target{HTTPTarget: tools.HTTPTarget{BaseURL: "https://deploy.internal"}}, engine.Identity{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, c.Identity(tt.tool, tt.target)); diff != "" {
				t.Errorf("Identity() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
