package engine

import (
	"encoding/json"
	"testing"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// With BindRuns, a run authorized on one MCP session is not authorized on
// another MCP session of the same actor (same token) naming the same run
// id; the re-sent call still attaches to the run's execution. Without it,
// the second MCP session joins the authorization (the documented default).
func TestBindRunsAuthorizationPerMCPSession(t *testing.T) {
	for _, tt := range []struct {
		name     string
		bind     bool
		wantWait bool // the second MCP session's new call waits for authorization
	}{
		{"bound", true, true},
		{"unbound", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWith(t, "", nil, func(c *Config) {
				c.Sessions = SessionConfig{Required: true, BindRuns: tt.bind}
			})
			submit := func(args, mcpSession string) *SubmitResult {
				t.Helper()
				r, err := h.e.Submit(t.Context(), SubmitInput{Actor: "alice", Scope: "run-7", Tool: "deploy", Arguments: json.RawMessage(args),
					Evidence: &recordv1.Evidence{McpSessionId: mcpSession, TokenId: "tok_alice"}})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			first := submit(`{"service":"a","version":"1"}`, "mcp-1")
			if first.Execution.GetState() != recordv1.State_STATE_AWAITING_APPROVAL {
				t.Fatalf("first call of run-7: %v, want awaiting session authorization", first.Execution.GetState())
			}
			if _, err := h.e.AuthorizeSession(t.Context(), first.Execution.GetSessionId(), "ops"); err != nil {
				t.Fatal(err)
			}
			h.waitState(t, first.Execution.GetId(), recordv1.State_STATE_COMPLETED)

			// The same call from another MCP session attaches (the run id is
			// the intent scope either way).
			if again := submit(`{"service":"a","version":"1"}`, "mcp-2"); again.Execution.GetId() != first.Execution.GetId() {
				t.Errorf("same call of run-7 on mcp-2: execution %s, want attached to %s", again.Execution.GetId(), first.Execution.GetId())
			}
			second := submit(`{"service":"a","version":"2"}`, "mcp-2")
			waits := second.Execution.GetState() == recordv1.State_STATE_AWAITING_APPROVAL
			if waits != tt.wantWait {
				t.Errorf("new call of run-7 on mcp-2 (BindRuns %v): %v %q, want waiting for authorization = %v",
					tt.bind, second.Execution.GetState(), second.Execution.GetReason(), tt.wantWait)
			}
			if same := second.Execution.GetSessionId() == first.Execution.GetSessionId(); same == tt.bind {
				t.Errorf("BindRuns %v: mcp-2's session %s, mcp-1's %s", tt.bind, second.Execution.GetSessionId(), first.Execution.GetSessionId())
			}
			// The authorized MCP session goes on without a new authorization.
			if third := submit(`{"service":"a","version":"3"}`, "mcp-1"); third.Execution.GetState() == recordv1.State_STATE_AWAITING_APPROVAL {
				t.Errorf("new call of run-7 on the authorized mcp-1: waits for authorization")
			}
		})
	}
}
