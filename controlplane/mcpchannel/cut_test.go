package mcpchannel

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/engine"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestHTTPUpstreamCutAfterCallIsUnknown: an HTTP upstream that read the
// whole tools/call and then dropped the connection without answering may
// have run the tool. The go-sdk reports such an exchange as a JSON-RPC
// error of its own transport (-32005, "rejected by transport"), which is
// not the upstream's answer: the attempt is Unknown, never an observed
// failure at the target.
func TestHTTPUpstreamCutAfterCallIsUnknown(t *testing.T) {
	var calls atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "refund"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if bytes.Contains(b, []byte(`"tools/call"`)) {
				calls.Add(1)
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close() // the request was read; no answer comes
				}
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	c := redirectChannel(t) // closed before the server: it holds its streams
	bound, held := c.Bind(t.Context(), redirectCatalog(t, ts.URL+"/mcp"))
	if len(held) != 0 {
		t.Fatalf("Bind held %+v, want nothing held", held)
	}
	c.setCatalog(bound)
	a := c.Dispatch(t.Context(), engine.Call{
		Execution: &recordv1.Execution{Id: "exe_cut"},
		Tool:      bound.Tools["pay.refund"],
		Target:    bound.Targets["pay"],
	})
	if calls.Load() == 0 {
		t.Fatalf("the upstream never received tools/call")
	}
	if a.Class != engine.Unknown || a.Result != nil {
		t.Errorf("Dispatch after a cut that followed the whole request = %+v; want Unknown with no result (the tool may have run)", a)
	}
}
