package deptest_test

import (
	"path"
	"strings"
	"testing"

	"github.com/latchhq/latch/internal/testing/deptest"
	"github.com/latchhq/latch/internal/testing/testbin"
)

const mod = "github.com/latchhq/latch"

// testSupport is every package that exists only for tests: the tree
// internal/testing and the fault suites (testbin.TestSupport, which the
// binaries' deps tests forbid too), and every other package of this module
// named *test, so that one made outside the tree by mistake is still kept
// out of production code (TestTestSupportIsOneTree then names it).
func testSupport(g *deptest.Graph) []string {
	out := append([]string(nil), testbin.TestSupport...)
	for _, p := range g.Roots {
		if strings.HasSuffix(path.Base(p), "test") {
			out = append(out, p)
		}
	}
	return out
}

// TestTestSupportIsOneTree keeps test support in internal/testing: a
// package named *test anywhere else fails here with where to move it.
func TestTestSupportIsOneTree(t *testing.T) {
	g, err := deptest.Load("", mod+"/...")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range g.Roots {
		if strings.HasSuffix(path.Base(p), "test") && !strings.HasPrefix(p, mod+"/internal/testing/") {
			t.Errorf("%s is test support outside internal/testing: move it to %s/internal/testing/%s", p, mod, path.Base(p))
		}
	}
}

// TestImportRules enforces the import rules of
// docs/contributing/package-map.md over every package of the module
// (without their tests): each failure names the rule and the import chain
// that breaks it, first package to last.
func TestImportRules(t *testing.T) {
	g, err := deptest.Load("", mod+"/...")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Roots) < 50 {
		t.Fatalf("go list matched %d packages of the module, want all of them", len(g.Roots))
	}
	support := testSupport(g)
	rules := []deptest.Rule{
		{
			Name: "controlplane/cli holds commands only: the wiring of channels, dispatch, policy, admin, server, telemetry and the ops listener is controlplane/stack's (import stack)",
			From: []string{mod + "/controlplane/cli"},
			Forbid: []string{
				mod + "/controlplane/server",
				mod + "/controlplane/httpchannel",
				mod + "/controlplane/hostchannel",
				mod + "/controlplane/mcpchannel",
				mod + "/controlplane/httpdispatch",
				mod + "/controlplane/sshdial",
				mod + "/controlplane/policy",
				mod + "/controlplane/admin",
				mod + "/controlplane/telemetry",
				mod + "/internal/opshttp",
			},
			Direct: true,
		},
		{
			Name:   "controlplane/audit reads a data dir or store without the server (paths: controlplane/datadir)",
			From:   []string{mod + "/controlplane/audit"},
			Forbid: []string{mod + "/controlplane/server", mod + "/controlplane/stack"},
		},
		{
			Name:   "hostagent links nothing of the control plane, the MCP front or the MCP SDK",
			From:   []string{mod + "/hostagent"},
			Skip:   support,
			Forbid: []string{mod + "/controlplane", mod + "/mcpfront", "github.com/modelcontextprotocol/go-sdk"},
		},
		{
			Name: "mcpfront reaches the control plane over gRPC only (proto/), never its packages, the host agent or Badger",
			From: []string{mod + "/mcpfront"},
			Skip: support,
			// The state vocabulary both sides share is internal/lifecycle.
			Forbid: []string{mod + "/controlplane", mod + "/hostagent", "github.com/dgraph-io/badger"},
		},
		{
			Name:   "controlplane/lease knows the store only as backend.Leaser: it links nothing else of the control plane (no server, no store)",
			From:   []string{mod + "/controlplane/lease"},
			Forbid: []string{mod + "/controlplane"},
			Allow:  []string{mod + "/controlplane/store/backend"},
		},
		{
			Name: "receipt is a standalone verifier an agent imports: nothing of Latch but the receipt message",
			From: []string{mod + "/receipt"},
			Forbid: []string{mod + "/controlplane", mod + "/mcpfront", mod + "/hostagent", mod + "/internal", mod + "/tools",
				mod + "/proto/latch/record", mod + "/proto/latch/controlplane", mod + "/proto/latch/hostagent"},
		},
		{
			Name: "a store backend is chosen through controlplane/store/backends (Open, OpenReader) and used through backend's capability interfaces; only the PostgreSQL schema commands (latch store) and the bench's disk floor name a backend package",
			From: []string{mod},
			Skip: append([]string{
				mod + "/controlplane/store/backends",
				mod + "/controlplane/store/badgerkv",
				mod + "/controlplane/store/pgkv",
				mod + "/controlplane/cli",
				mod + "/controlplane/bench",
			}, support...),
			Forbid: []string{mod + "/controlplane/store/badgerkv", mod + "/controlplane/store/pgkv"},
			Direct: true,
		},
		{
			Name:   "no production package links test support",
			From:   []string{mod},
			Skip:   support,
			Forbid: support,
		},
	}
	for _, r := range rules {
		for _, v := range g.Check(r) {
			t.Error(v)
		}
	}
}
