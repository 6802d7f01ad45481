package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	"github.com/latchhq/latch/tools"
)

// catalogStatusJSON is `latch catalog status --json` (docs/reference/cli-json.md).
type catalogStatusJSON struct {
	Version string `json:"version"`
	Source  string `json:"source"`
	// LoadedAt is RFC 3339 ("" when the control plane did not say).
	LoadedAt string            `json:"loaded_at"`
	Trigger  string            `json:"trigger"`
	Tools    []catalogToolJSON `json:"tools"`
	Held     []heldToolJSON    `json:"held"`
}

type catalogToolJSON struct {
	Name    string `json:"name"`
	Target  string `json:"target"`
	Channel string `json:"channel"`
	Replay  string `json:"replay"`
	Mode    string `json:"mode"`
}

type heldToolJSON struct {
	Tool   string `json:"tool"`
	Reason string `json:"reason"`
}

func catalogStatusView(resp *controlplanev1.CatalogStatusResponse) catalogStatusJSON {
	v := catalogStatusJSON{Version: resp.GetVersion(), Source: resp.GetSource(), Trigger: resp.GetTrigger(), Tools: []catalogToolJSON{}, Held: []heldToolJSON{}}
	if resp.GetLoadedAt() != nil {
		v.LoadedAt = resp.GetLoadedAt().AsTime().UTC().Format(time.RFC3339)
	}
	for _, t := range resp.GetTools() {
		v.Tools = append(v.Tools, catalogToolJSON{Name: t.GetName(), Target: t.GetTarget(), Channel: t.GetChannel(), Replay: t.GetReplay(), Mode: t.GetMode()})
	}
	for _, h := range resp.GetHeld() {
		v.Held = append(v.Held, heldToolJSON{Tool: h.GetTool(), Reason: h.GetReason()})
	}
	return v
}

// runCatalogStatus prints the catalog in force, as the running control
// plane holds it: version, source, when it came into force, its tools and
// every held tool with why. It exits 0 with held tools (status reports;
// `catalog reload` is what refuses them).
func runCatalogStatus(ctx context.Context, env *Env, t *target, asJSON bool) error {
	c, closeFn, err := adminClient(ctx, t)
	if err != nil {
		return err
	}
	defer closeFn()
	resp, err := c.CatalogStatus(ctx, &controlplanev1.CatalogStatusRequest{})
	if err != nil {
		return rpcError(err)
	}
	v := catalogStatusView(resp)
	if asJSON {
		return writeJSON(env.Stdout, v)
	}
	printCatalogStatus(env.Stdout, v)
	return nil
}

func printCatalogStatus(w io.Writer, v catalogStatusJSON) {
	fmt.Fprintf(w, "catalog %s\nsource  %s\n", v.Version, v.Source)
	if v.LoadedAt != "" {
		fmt.Fprintf(w, "in force since %s (%s)\n", v.LoadedAt, or(v.Trigger, "unknown trigger"))
	}
	fmt.Fprintf(w, "%d tool(s) in force:\n", len(v.Tools))
	for _, t := range v.Tools {
		line := fmt.Sprintf("  %s  target %s (%s), replay %s", t.Name, t.Target, t.Channel, or(t.Replay, "not decided"))
		if t.Mode == string(tools.ModeObserve) {
			line += ", observe mode (latch observe report)"
		}
		fmt.Fprintln(w, line)
	}
	if len(v.Held) == 0 {
		fmt.Fprintln(w, "no tool is held")
		return
	}
	fmt.Fprintf(w, "%d tool(s) held: in the file, not exposed to agents until fixed (then latch catalog reload):\n", len(v.Held))
	for _, h := range v.Held {
		fmt.Fprintf(w, "  %s: %s\n", h.Tool, h.Reason)
	}
}
