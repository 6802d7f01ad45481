package egress

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/latchhq/latch/internal/testing/srctree"
)

// outboundHTTP matches code that builds an outbound HTTP transport or
// client, or uses net/http's shared ones, outside this package.
var outboundHTTP = regexp.MustCompile(`http\.(Transport|Client)\{|http\.Default(Client|Transport)\b|http\.(Get|Post|PostForm|Head)\(`)

// notEgress are the production files allowed to: the latch CLI's demo
// command and the bench harness, which talk to the local dev stack they started (its MCP
// front and demo target on loopback), not to anything a catalog, a vault or
// an issuer names.
var notEgress = []string{
	"controlplane/bench/bench.go",
	"controlplane/cli/demo.go",
}

// TestOnlyEgressBuildsClients enforces the package's rule: production code
// builds its outbound HTTP transports and clients here, so every one of
// them has the address policy and the redirect rule.
func TestOnlyEgressBuildsClients(t *testing.T) {
	for _, f := range srctree.Production(t, "../..", "internal/egress") {
		if slices.Contains(notEgress, f.Rel) {
			continue
		}
		b, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "//") {
				continue
			}
			if outboundHTTP.MatchString(line) {
				t.Errorf("%s:%d builds an outbound HTTP client outside internal/egress: %s", f.Rel, i+1, strings.TrimSpace(line))
			}
		}
	}
}
