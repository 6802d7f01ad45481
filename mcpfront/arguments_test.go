package mcpfront

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHostileArgumentsThroughTheFront: arguments travel raw from the MCP
// request to the control plane, which refuses duplicate keys and lone
// surrogates naming the argument; nothing is stored and nothing is sent.
func TestHostileArgumentsThroughTheFront(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	for _, era := range []string{eraSession, eraStateless} {
		cs := st.connect(t, "alice", clientOptions{Era: era})
		for _, raw := range []string{
			`{"service":"api","version":"1","version":"2"}`,
			`{"service":"api","version":"\ud800"}`,
		} {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy_release", Arguments: json.RawMessage(raw)})
			msg := fmt.Sprint(err)
			if res != nil {
				b, _ := json.Marshal(res)
				msg += string(b)
			}
			if (err == nil && (res == nil || !res.IsError)) || !strings.Contains(msg, "argument version") {
				t.Errorf("era %q: CallTool(%s) = %s; want refused naming argument version", era, raw, msg)
			}
		}
	}
	if xs := st.executions(t, "alice"); len(xs) != 0 {
		t.Errorf("%d executions stored for refused arguments, want none", len(xs))
	}
	if n := st.effect.count("/v1/releases"); n != 0 {
		t.Errorf("target saw %d releases, want none", n)
	}
}
