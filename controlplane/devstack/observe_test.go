package devstack

import (
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/tools"
)

func TestUpstreamName(t *testing.T) {
	for _, tc := range []struct{ argv0, want string }{
		{"/usr/local/bin/server-everything", "server-everything"},
		{"/opt/My MCP.Server", "my-mcp-server"},
		{"/usr/bin/7z", "upstream"},
		{"/usr/bin/___", "upstream"},
		{"/x/" + strings.Repeat("a", 80), strings.Repeat("a", 64)},
	} {
		if got := UpstreamName(tc.argv0); got != tc.want {
			t.Errorf("UpstreamName(%q) = %q, want %q", tc.argv0, got, tc.want)
		}
	}
}

// TestObservedCatalogText: the generated catalog loads, every tool is
// observed with its replay undecided, odd names and argv are quoted, and
// a tool name MCP does not allow is skipped with a comment.
func TestObservedCatalogText(t *testing.T) {
	no := false
	listed := []*mcp.Tool{
		{Name: "write", Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true}},
		{Name: "read.one", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		{Name: "bad name"},
	}
	text, err := observedCatalogText("srv", []string{"/opt/srv", "--quote=\"x\"", "a: b"}, listed)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := tools.Parse("gen.yaml", text)
	if err != nil {
		t.Fatalf("generated catalog does not load: %v\n%s", err, text)
	}
	if got := cat.Upstreams["srv"].Command; len(got) != 3 || got[1] != `--quote="x"` || got[2] != "a: b" {
		t.Errorf("command = %q, want the argv as given", got)
	}
	if len(cat.Tools) != 2 {
		t.Errorf("tools = %v, want srv.write and srv.read.one", cat.Tools)
	}
	for name, tool := range cat.Tools {
		if !tool.Observed() || tool.ContractComplete() {
			t.Errorf("tool %s: mode %s, replay %q; want observed with replay undecided", name, tool.Mode, tool.Replay)
		}
	}
	for _, want := range []string{`# skipped "bad name"`, "readOnlyHint", "idempotentHint, destructiveHint=false"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("generated catalog lacks %q:\n%s", want, text)
		}
	}
	if _, err := observedCatalogText("srv", []string{"/opt/srv"}, []*mcp.Tool{{Name: "bad name"}}); !errors.Is(err, ErrObserveUpstream) {
		t.Errorf("a server with no usable tool: error %v, want ErrObserveUpstream", err)
	}
}
