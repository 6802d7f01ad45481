package deptest_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/internal/testing/deptest"
)

// TestCheckNamesTheChain: a forbidden dependency is reported with the
// shortest import chain to it, a direct rule sees only the package's own
// imports, and an allowed package is not reported.
func TestCheckNamesTheChain(t *testing.T) {
	g, err := deptest.Load("", mod+"/controlplane/cli")
	if err != nil {
		t.Fatal(err)
	}
	cli, stack, server := mod+"/controlplane/cli", mod+"/controlplane/stack", mod+"/controlplane/server"
	if p := g.Package(stack); p == nil || !slices.Contains(p.Imports, server) {
		t.Fatalf("the graph does not hold stack importing server: %+v", p)
	}
	for _, tc := range []struct {
		name string
		rule deptest.Rule
		want []deptest.Violation
	}{
		{"transitive", deptest.Rule{Name: "r", From: []string{cli}, Forbid: []string{server}},
			[]deptest.Violation{{Rule: "r", Chain: []string{cli, stack, server}}}},
		{"direct", deptest.Rule{Name: "r", From: []string{cli}, Forbid: []string{server}, Direct: true}, nil},
		{"direct import", deptest.Rule{Name: "r", From: []string{cli}, Forbid: []string{stack}, Direct: true},
			[]deptest.Violation{{Rule: "r", Chain: []string{cli, stack}}}},
		{"allowed", deptest.Rule{Name: "r", From: []string{cli}, Forbid: []string{stack}, Allow: []string{stack}}, nil},
		{"skipped", deptest.Rule{Name: "r", From: []string{cli}, Skip: []string{cli}, Forbid: []string{server}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, g.Check(tc.rule)); diff != "" {
				t.Errorf("Check(%+v) (-want +got):\n%s", tc.rule, diff)
			}
		})
	}
}
