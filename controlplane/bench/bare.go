package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The bare path's server: a go-sdk MCP server with the bench's tool, whose
// handler makes the direct call. It runs in the bench process, or, to
// measure a server's CPU as Latch's is measured, in a process of its own
// (ServeBare, Config.StartBare).

// postRelease is the direct call: one POST of version v to the demo target
// at demoURL, with an Idempotency-Key of its own.
func postRelease(ctx context.Context, hc *http.Client, demoURL, v string) error {
	body := fmt.Sprintf(`{"service":"bench","version":%q,"region":"us-east-1","reason":""}`, v)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, demoURL+"/v1/releases", bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "bench-"+v)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("demo target answered %s", resp.Status)
	}
	return nil
}

// bareHandler is the bare MCP server on one path: no identity, no journal,
// no dedupe; the tool POSTs its version to demoURL. Like the front, it
// speaks both protocol eras: the stateless handler for 2026-07-28 and
// later, the stateful one otherwise.
func bareHandler(demoURL string, conc int) http.Handler {
	hc := benchClient(conc)
	srv := mcp.NewServer(&mcp.Implementation{Name: "latch-bench-bare", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: benchTool, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args map[string]any
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			v, _ := args["version"].(string)
			if err := postRelease(ctx, hc, demoURL, v); err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deployed " + v}}}, nil
		})
	get := func(*http.Request) *mcp.Server { return srv }
	stateful := mcp.NewStreamableHTTPHandler(get, nil)
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v >= "2026-07-28" {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
}

// bareMCPServer serves the bare MCP server in this process on a loopback
// port: its URL and how to stop it.
func bareMCPServer(demoURL string, conc int) (string, func(), error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("bench: bare MCP server: %w", err)
	}
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: bareHandler(demoURL, conc)}
	go hs.Serve(lis) //nolint:errcheck // ends with Close
	return bareURL(lis), func() { _ = hs.Close() }, nil
}

func bareURL(lis net.Listener) string { return "http://" + lis.Addr().String() + "/mcp" }

// ServeBare serves the bare MCP server for the demo target at demoURL on
// lis until ctx ends, after writing its URL and a newline to out (the
// process that started it reads that line): `latch bench --serve-bare`,
// which latch bench runs itself to measure the bare server's CPU apart.
// The target must be on loopback, like every target latch bench calls.
func ServeBare(ctx context.Context, demoURL string, lis net.Listener, out io.Writer) error {
	if err := loopbackURL("demo target", demoURL); err != nil {
		return err
	}
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: bareHandler(demoURL, MaxConcurrency)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(lis) }()
	if _, err := fmt.Fprintln(out, bareURL(lis)); err != nil {
		_ = hs.Close()
		return fmt.Errorf("bench: --serve-bare: %w", err)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("bench: --serve-bare: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("bench: --serve-bare: %w", err)
	}
	return nil
}
