package mcpfront

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/engine"
)

// A run authorized on one MCP session: with the control plane's BindRuns, a
// second MCP session with the same token naming the same run is not
// authorized (its new call waits for latch session authorize); without it,
// the second session joins the authorization.
func TestBindRunsSecondMCPSessionNotAuthorized(t *testing.T) {
	for _, tt := range []struct {
		name     string
		bind     bool
		wantWait bool
	}{
		{"bound", true, true},
		{"unbound", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := newTestStack(t, stackOptions{PersonWait: 200 * time.Millisecond, Sessions: engine.SessionConfig{Required: true, BindRuns: tt.bind}})
			run := http.Header{HeaderRun: {"run-7"}}
			first := st.connect(t, "alice", clientOptions{Era: eraSession, Header: run})
			_, cr := call(t, first, "deploy_release", map[string]any{"service": "api", "version": "1"})
			if cr.State != "awaiting_approval" {
				t.Fatalf("first call of run-7: %s, want awaiting_approval (session authorization)", cr.State)
			}
			sid := st.get(t, cr.ExecutionID).GetSessionId()
			if _, err := st.engine.AuthorizeSession(context.Background(), sid, "ops"); err != nil {
				t.Fatal(err)
			}
			if _, cr := call(t, first, "deploy_release", map[string]any{"service": "api", "version": "2"}); cr.State == "awaiting_approval" {
				t.Fatalf("new call on the authorized MCP session waits for authorization")
			}
			second := st.connect(t, "alice", clientOptions{Era: eraSession, Header: run})
			_, cr = call(t, second, "deploy_release", map[string]any{"service": "api", "version": "3"})
			if waits := cr.State == "awaiting_approval"; waits != tt.wantWait {
				t.Errorf("new call of run-7 on a second MCP session with the same token (BindRuns %v): %s, want waiting for authorization = %v", tt.bind, cr.State, tt.wantWait)
			}
		})
	}
}
