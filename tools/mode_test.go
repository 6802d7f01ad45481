package tools

import "testing"

// TestModeInheritance pins where a tool's mode comes from: its own mode
// key, else its target's or upstream's, else enforce; and that only an
// observed tool may leave replay undecided.
func TestModeInheritance(t *testing.T) {
	const catalog = `
targets:
  api: {channel: http, base_url: "http://api.internal.test:7412", mode: observe}
  billing: {channel: http, base_url: "http://billing.internal.test:7412"}
upstreams:
  tracker: {transport: stdio, command: [/usr/local/bin/tracker-mcp], mode: observe}
tools:
  inherits:
    target: api
    request: {method: POST, path: /a}
  own_enforce:
    target: api
    mode: enforce
    replay: review
    request: {method: POST, path: /b}
  own_observe:
    target: billing
    mode: observe
    replay: review
    request: {method: POST, path: /c}
  default_enforce:
    target: billing
    replay: read_only
    request: {method: GET, path: /d}
  tracker.create:
    upstream: tracker
    tool: create
`
	cat, err := Parse("mode.yaml", []byte(catalog))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	for _, tc := range []struct {
		tool     string
		mode     Mode
		complete bool
	}{
		{"inherits", ModeObserve, false},
		{"own_enforce", ModeEnforce, true},
		{"own_observe", ModeObserve, true},
		{"default_enforce", ModeEnforce, true},
		{"tracker.create", ModeObserve, false},
	} {
		tool := cat.Tools[tc.tool]
		if tool == nil {
			t.Fatalf("tool %s not loaded", tc.tool)
		}
		if tool.Mode != tc.mode || tool.Observed() != (tc.mode == ModeObserve) {
			t.Errorf("tool %s: Mode = %q, want %q", tc.tool, tool.Mode, tc.mode)
		}
		if tool.ContractComplete() != tc.complete {
			t.Errorf("tool %s: ContractComplete() = %v, want %v", tc.tool, tool.ContractComplete(), tc.complete)
		}
	}
	if !cat.Tools["inherits"].SideEffecting() {
		t.Errorf("an observed tool without replay must count as side-effecting")
	}
	if got := cat.Targets["billing"].Mode; got != "" {
		t.Errorf("target billing: Mode = %q, want unset", got)
	}
}
