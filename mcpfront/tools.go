package mcpfront

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"

	"github.com/latchhq/latch/internal/backoff"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// The catalog the front serves is the control plane's: fetched with
// ListTools (Sync) and followed with a long poll on the catalog version
// (Follow). A version change is installed in every MCP server the front
// runs: tools that left the catalog are removed, new and changed ones are
// (re)added, and the SDK tells connected clients
// (notifications/tools/list_changed), so tools/list shows the new catalog
// without a restart of the front or of the client's session.

// Follow bounds.
const (
	// followWait is how long one ListTools long poll waits for a change.
	followWait = 25 * time.Second
	// followMinBackoff and followMaxBackoff bound the retry delay after a
	// failed poll (control plane restarting, network).
	followMinBackoff = time.Second
	followMaxBackoff = 10 * time.Second
)

// Sync fetches the catalog from the control plane and installs it. It waits
// for the control plane to be reachable (until ctx ends).
func (f *Front) Sync(ctx context.Context) error {
	resp, err := f.cfg.ControlPlane.ListTools(ctx, &controlplanev1.ListToolsRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("mcpfront: fetching the tool catalog from the control plane: %w", err)
	}
	f.install(resp)
	return nil
}

var followBackoff = backoff.Policy{Min: followMinBackoff, Max: followMaxBackoff}

// Follow keeps the served catalog at the control plane's version until ctx
// ends; it returns nil then. Call it after Sync.
func (f *Front) Follow(ctx context.Context) error {
	failures := 0
	for ctx.Err() == nil {
		resp, err := f.cfg.ControlPlane.ListTools(ctx, &controlplanev1.ListToolsRequest{
			KnownVersion: f.CatalogVersion(), WaitMs: followWait.Milliseconds(),
		}, grpc.WaitForReady(true))
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			failures++
			f.log.Debug("catalog poll failed; the tools served stay as they are", "error", err, "failures", failures)
			followBackoff.Wait(ctx, failures, nil)
			continue
		}
		failures = 0
		f.opArgs.Store(resp.GetOperatorCommandArgs())
		if !resp.GetUnchanged() {
			f.install(resp)
		}
	}
	return nil
}

// CatalogVersion is the version of the catalog the front serves ("" before
// the first Sync).
func (f *Front) CatalogVersion() string {
	f.toolsMu.Lock()
	defer f.toolsMu.Unlock()
	return f.version
}

// install makes resp the served catalog in every server.
func (f *Front) install(resp *controlplanev1.ListToolsResponse) {
	next := make(map[string]*controlplanev1.Tool, len(resp.GetTools()))
	for _, t := range resp.GetTools() {
		if _, err := mcpTool(t); err != nil {
			f.log.Error("tool not served: its schema is not an object schema", "tool", t.GetName(), "error", err)
			continue
		}
		if isBuiltin(t.GetName()) {
			f.log.Error("tool not served: its name is a built-in's", "tool", t.GetName())
			continue
		}
		next[t.GetName()] = t
	}
	f.toolsMu.Lock()
	defer f.toolsMu.Unlock()
	var gone []string
	for name := range f.tools {
		if _, ok := next[name]; !ok {
			gone = append(gone, name)
		}
	}
	prev := f.version
	for srv, actor := range f.servers {
		if len(gone) > 0 {
			srv.RemoveTools(gone...)
		}
		for _, name := range sortedNames(next) {
			if old, ok := f.tools[name]; ok && sameTool(old, next[name]) {
				continue
			}
			f.addTool(srv, next[name], actor)
		}
	}
	f.tools, f.version = next, resp.GetCatalogVersion()
	f.opArgs.Store(resp.GetOperatorCommandArgs())
	f.log.Info("serving catalog", "version", f.version, "previous", prev, "tools", len(next), "removed", len(gone))
}

func sameTool(a, b *controlplanev1.Tool) bool {
	return a.GetDescription() == b.GetDescription() && string(a.GetInputSchema()) == string(b.GetInputSchema()) &&
		a.GetReplay() == b.GetReplay() && a.GetSideEffecting() == b.GetSideEffecting() &&
		a.GetTaskSupport() == b.GetTaskSupport() && a.GetObserved() == b.GetObserved()
}

// addTool adds (or replaces) one catalog tool; install checked its schema.
func (f *Front) addTool(srv *mcp.Server, t *controlplanev1.Tool, fixedActor string) {
	mt, err := mcpTool(t)
	if err != nil {
		return
	}
	srv.AddTool(mt, f.callHandler(t.GetName(), fixedActor))
}

func isBuiltin(name string) bool {
	return name == ToolExecutionStatus || name == ToolExecutions || name == ToolCancelExecution || name == ToolReceipt
}

// operatorArgs is what an operator adds to a latch command to reach the
// control plane ("--data DIR"; "" for the default), as its last ListTools
// answer said: the front appends it to the operator commands it shows.
func (f *Front) operatorArgs() string {
	if a, ok := f.opArgs.Load().(string); ok {
		return a
	}
	return ""
}
