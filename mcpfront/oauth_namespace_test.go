package mcpfront

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/internal/testing/oauthtest"
	"github.com/latchhq/latch/mcpfront/auth"
)

// TestOAuthActorsApartFromStaticActors: with the --oauth-* flags as
// latch-mcp and latch dev take them (an issuer, nothing else), a JWT with
// sub=dev is not the static-token actor dev: it sees none of dev's
// executions or tasks, and its identical call does not attach to dev's.
func TestOAuthActorsApartFromStaticActors(t *testing.T) {
	is := oauthtest.NewIssuer(t)
	st := newTestStack(t, stackOptions{Actors: []string{"dev"}, OAuth: func(t testing.TB, resource string) *auth.JWTVerifier {
		var f auth.Flags
		fs := flag.NewFlagSet("latch-mcp", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.Register(fs)
		if err := fs.Parse([]string{"--oauth-issuer", is.URL}); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.Config(resource)
		if err != nil {
			t.Fatalf("Config: %v", err)
		}
		cfg.Logger = testLogger(t)
		v, err := auth.NewJWTVerifier(cfg)
		if err != nil {
			t.Fatalf("NewJWTVerifier: %v", err)
		}
		return v
	}})
	t.Cleanup(st.effect.release)
	args := map[string]any{"service": "api", "version": "9.9.9"}
	_, own := call(t, st.connect(t, "dev", clientOptions{Era: eraSession}), "deploy_release", args)
	task := st.rpc(t, "dev", eraSession).callTask("slow_job", map[string]any{"job": "dev's"})
	taskID := task["taskId"].(string)

	st.tokens["jwt-dev"] = is.Token(t, is.Claims("dev", st.URL))
	jwt := st.connect(t, "jwt-dev", clientOptions{Era: eraSession})
	res, err := jwt.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolExecutions, Arguments: map[string]any{"limit": 50}})
	if err != nil || res.IsError {
		t.Fatalf("latch_executions with the JWT = %v, %v", res, err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; strings.Contains(text, own.ExecutionID) {
		t.Errorf("the JWT with sub=dev lists the static actor dev's execution %s: %s", own.ExecutionID, text)
	}
	rc := st.rpc(t, "jwt-dev", eraSession)
	if l := rc.must("tasks/list", nil); len(l["tasks"].([]any)) != 0 {
		t.Errorf("the JWT's tasks/list = %v, want none of dev's", l)
	}
	if _, rerr := rc.do("tasks/get", map[string]any{"taskId": taskID}, ""); rerr == nil {
		t.Errorf("the JWT's tasks/get of dev's task = no error, want it unknown")
	}
	_, again := call(t, jwt, "deploy_release", args)
	if again.ExecutionID == own.ExecutionID || again.Disposition != "new" {
		t.Errorf("the JWT's identical call = %s (%s), want a new execution, not dev's %s", again.ExecutionID, again.Disposition, own.ExecutionID)
	}
	if got := st.get(t, again.ExecutionID).GetActor(); got != auth.DefaultActorPrefix+"dev" {
		t.Errorf("the JWT's actor = %q, want %q", got, auth.DefaultActorPrefix+"dev")
	}
}
