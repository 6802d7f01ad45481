package failover

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/internal/testing/testbin"
	"github.com/latchhq/latch/mcpfront"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// startFronts runs n latch-mcp fronts, front i serving actor i mod
// len(actors), each given every replica's socket as --control-plane.
func (c *cluster) startFronts(t *testing.T, n int) {
	t.Helper()
	var cps []string
	for _, r := range c.replicas {
		cps = append(cps, "unix://"+r.socket())
	}
	for i := range n {
		logPath := filepath.Join(c.dir, fmt.Sprintf("front%d.log", i))
		args := []string{"--control-plane", strings.Join(cps, ","), "--listen", "127.0.0.1:0", "--actor", actors[i%len(actors)]}
		p, err := testbin.StartProc(mcpBin, args, logPath)
		if err != nil {
			t.Fatal(err)
		}
		c.fronts = append(c.fronts, p)
		m, err := p.WaitLog(testbin.FrontURL, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		url := m[1]
		c.urls = append(c.urls, url)
	}
}

// mcpCaller calls through the fronts over MCP (a new stateless session
// per call, as the go-sdk client opens by default): the agent of actor
// actors[i] uses front i mod len(fronts).
func (c *cluster) mcpCaller() caller {
	return func(ctx context.Context, actor, tool, intent string) (ack, bool, error) {
		url := ""
		for i, a := range actors {
			if a == actor {
				url = c.urls[i%len(c.urls)]
			}
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "failover-agent", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{}, DisableStandaloneSSE: true}, nil)
		if err != nil {
			return ack{}, false, fmt.Errorf("connect to %s: %w", url, err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"intent": intent}})
		if err != nil {
			return ack{}, false, err
		}
		var cr mcpfront.CallResult
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &cr); err != nil || cr.ExecutionID == "" {
			text := ""
			for _, ct := range res.Content {
				if tc, ok := ct.(*mcp.TextContent); ok {
					text += tc.Text
				}
			}
			return ack{}, false, fmt.Errorf("no execution in the answer (isError %v): %s %s", res.IsError, raw, text)
		}
		st := recordv1.State(recordv1.State_value["STATE_"+strings.ToUpper(cr.State)])
		return ack{ID: cr.ExecutionID, Intent: intent, State: st, At: time.Now()}, true, nil
	}
}
