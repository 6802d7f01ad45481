package hostchannel

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/tools"
)

// TestIdentity pins the host channel's part of the canonical intent record:
// it enters every fingerprint, so it must not change for an unchanged
// catalog entry (these strings are what the engine built before the
// channel supplied them).
func TestIdentity(t *testing.T) {
	c := &Channel{}
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
	tool := &tools.Tool{CommandAction: tools.CommandAction{Command: []string{"/usr/bin/make", "{{app}}"}, Cwd: "/srv/{{app}}"}}
	for _, tt := range []struct {
		name   string
		target *tools.Target
		want   engine.Identity
	}{
		{"ssh with pinned key", &tools.Target{Name: "web-01", HostTarget: tools.HostTarget{User: "deploy", HostKey: key}},
			engine.Identity{Target: "web-01:deploy@SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU", Command: tool.Command, Cwd: tool.Cwd}},
		{"unparsable key hashed as text", &tools.Target{Name: "web-02", HostTarget: tools.HostTarget{User: "deploy", HostKey: "not a key"}},
			engine.Identity{Target: "web-02:deploy@SHA256:7fwIlxnAoGG+wIr6096tRICt1jqWd8E821u6F3kWDQ8", Command: tool.Command, Cwd: tool.Cwd}},
		{"local", &tools.Target{Name: "here"},
			engine.Identity{Target: "here:@", Command: tool.Command, Cwd: tool.Cwd}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, c.Identity(tool, tt.target)); diff != "" {
				t.Errorf("Identity() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
