package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strings"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// idempotencyNames are argument names that often are an idempotency key;
// the stub points them out (the operator decides: the upstream's docs say
// whether it honours one).
var idempotencyNames = []string{"idempotency_key", "idempotencyKey", "request_id", "requestId", "client_token", "clientToken", "dedupe_key"}

// runUpstreamTools lists what an upstream offers, asking the running control
// plane (which holds its process or connection and its credential).
func runUpstreamTools(ctx context.Context, env *Env, t *target, pos []string, asJSON bool) error {
	if len(pos) != 1 {
		return usagef("catalog upstream-tools takes one upstream name (an entry under upstreams: in the catalog)")
	}
	c, closeFn, err := adminClient(ctx, t)
	if err != nil {
		return err
	}
	defer closeFn()
	resp, err := c.ListUpstreamTools(ctx, &controlplanev1.ListUpstreamToolsRequest{Upstream: pos[0]})
	if err != nil {
		return rpcError(err)
	}
	if asJSON {
		return writeJSON(env.Stdout, recordOf(resp)) // upstreamToolsJSON
	}
	printUpstreamTools(env.Stdout, resp)
	return nil
}

// runAcceptUpstreamTool accepts what the upstream offers now for a catalog
// tool (its schema, description, annotations), releasing a held change.
func runAcceptUpstreamTool(ctx context.Context, env *Env, t *target, pos []string, hash string) error {
	if len(pos) != 1 {
		return usagef("catalog upstream-tools accept takes one catalog tool name (<upstream>.<tool>)")
	}
	c, closeFn, err := adminClient(ctx, t)
	if err != nil {
		return err
	}
	defer closeFn()
	actor := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		actor = u.Username
	}
	resp, err := c.AcceptUpstreamTool(ctx, &controlplanev1.AcceptUpstreamToolRequest{Tool: pos[0], Actor: actor, Hash: hash})
	if err != nil {
		return rpcError(err)
	}
	if !resp.GetChanged() {
		fmt.Fprintf(env.Stdout, "%s: the upstream's offer is the one accepted (%s); nothing changed\n", resp.GetTool(), resp.GetHash())
		return nil
	}
	fmt.Fprintf(env.Stdout, "%s: accepted %s (was %s)\n%s", resp.GetTool(), resp.GetHash(), or(resp.GetPrevious(), "none"), resp.GetDiff())
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printUpstreamTools(w io.Writer, resp *controlplanev1.ListUpstreamToolsResponse) {
	fmt.Fprintf(w, "upstream %s (%s): %d tools\n", resp.GetUpstream(), resp.GetTransport(), len(resp.GetTools()))
	var stubs []*controlplanev1.UpstreamTool
	for _, tl := range resp.GetTools() {
		fmt.Fprintf(w, "\n%s\n", tl.GetName())
		switch {
		case tl.GetContract() == "":
			fmt.Fprintf(w, "  not exposed: no contract in the catalog (a stub is below)\n")
			stubs = append(stubs, tl)
		case tl.GetHeld() != "":
			fmt.Fprintf(w, "  HELD as %s: %s\n", tl.GetContract(), tl.GetHeld())
		default:
			fmt.Fprintf(w, "  exposed as %s\n", tl.GetContract())
		}
		if d := strings.TrimSpace(tl.GetDescription()); d != "" {
			fmt.Fprintf(w, "  description: %s\n", oneLine(d, 200))
		}
		if h := tl.GetHash(); h != "" {
			fmt.Fprintf(w, "  offered: %s", h)
			if p := tl.GetPinnedHash(); p != "" && p != h {
				fmt.Fprintf(w, " (accepted: %s; latch catalog upstream-tools accept %s --hash %s)", p, tl.GetContract(), h)
			}
			fmt.Fprintln(w)
		}
		if d := tl.GetDiff(); d != "" {
			fmt.Fprintf(w, "  changed since accepted:\n%s", indent(d, "    "))
		}
		switch c := tl.GetCalls(); {
		case c == "task":
			fmt.Fprintf(w, "  called task-augmented: when the upstream answers with a task, its task ID is recorded before Latch waits for the end\n")
		case c != "":
			fmt.Fprintf(w, "  called without a task: %s\n", strings.TrimPrefix(c, "plain: "))
		}
		if a := hints(tl.GetAnnotations()); a != "" {
			fmt.Fprintf(w, "  annotations (the upstream's hints, not trusted): %s\n", a)
		}
		if s := compactJSON(tl.GetInputSchema()); s != "" {
			fmt.Fprintf(w, "  input schema: %s\n", s)
		}
	}
	if len(stubs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n# Contract stubs: edit, add under tools: in the catalog, then latch catalog reload.\n")
	fmt.Fprintf(w, "# replay: read_only (no effect), idempotency_key (needs idempotency_argument: an argument the\n")
	fmt.Fprintf(w, "# upstream honours as an idempotency key; Latch sets it to the execution ID) or review (an\n")
	fmt.Fprintf(w, "# interrupted call goes to an operator). The annotations above are hints: decide from the\n")
	fmt.Fprintf(w, "# upstream's documentation.\ntools:\n")
	for _, tl := range stubs {
		fmt.Fprint(w, contractStub(resp.GetUpstream(), tl))
	}
}

// contractStub is a ready-to-edit contract: review and approval every_call
// unless the operator decides otherwise (nothing is taken from the hints).
func contractStub(upstream string, tl *controlplanev1.UpstreamTool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s.%s:\n", upstream, tl.GetName())
	fmt.Fprintf(&b, "    upstream: %s\n", upstream)
	fmt.Fprintf(&b, "    tool: %s\n", tl.GetName())
	if key := idempotencyCandidate(tl.GetInputSchema()); key != "" {
		fmt.Fprintf(&b, "    # %s may be an idempotency key: if the upstream honours it, uncomment and use replay: idempotency_key\n", key)
		fmt.Fprintf(&b, "    # idempotency_argument: %s\n", key)
	}
	fmt.Fprintf(&b, "    replay: review\n")
	fmt.Fprintf(&b, "    attach_window: 1h\n")
	fmt.Fprintf(&b, "    approval: every_call\n")
	fmt.Fprintf(&b, "    fingerprint: {ignore: [], secret: []}\n")
	return b.String()
}

func idempotencyCandidate(schema []byte) string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return ""
	}
	for _, n := range idempotencyNames {
		if _, ok := s.Properties[n]; ok {
			return n
		}
	}
	return ""
}

func hints(raw []byte) string {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return ""
	}
	var parts []string
	for _, k := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint", "title"} {
		if v, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	for k, v := range m {
		if !slices.Contains([]string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint", "title"}, k) {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	return strings.Join(parts, " ")
}

func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if len(raw) == 0 || json.Compact(&b, raw) != nil {
		return ""
	}
	return oneLine(b.String(), 2000)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}
