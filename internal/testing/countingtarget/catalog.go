package countingtarget

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/latchhq/latch/tools"
)

// CatalogConfig shapes the catalog of a counting target.
type CatalogConfig struct {
	// Addr is the host:port the control plane reaches the target at (the
	// target's own, or a proxy's in front of it).
	Addr string
	// Prefix names the tools: PREFIX_idem, PREFIX_status, PREFIX_review.
	Prefix string
	// Timeout is each target's dispatch timeout.
	Timeout time.Duration
	// Settle is each target's settle; 0 leaves the field out.
	Settle time.Duration
	// Mode is every target's mode ("" leaves the field out: enforce).
	Mode tools.Mode
	// ExtraTargets and ExtraTools are more catalog entries (YAML indented
	// by two spaces, as the entries under targets: and tools:).
	ExtraTargets, ExtraTools string
}

// Tool returns the name of the catalog's tool of class.
func (c CatalogConfig) Tool(class string) string { return c.Prefix + "_" + class }

// Catalog returns the catalog text: one HTTP target per replay class at
// Addr, and one tool per class that counts one effect of {intent}.
func Catalog(c CatalogConfig) string {
	var b strings.Builder
	b.WriteString("targets:\n")
	for _, class := range []string{ClassIdem, ClassStatus, ClassReview} {
		fmt.Fprintf(&b, "  %s:\n    channel: http\n    base_url: http://%s\n    allow_private: true\n    idempotency_header: Idempotency-Key\n", class, c.Addr)
		if class == ClassStatus {
			b.WriteString(`    status: {method: GET, path: "/status/by-key/{execution_id}"}` + "\n")
		}
		fmt.Fprintf(&b, "    timeout: %s\n", c.Timeout)
		if c.Mode != "" {
			fmt.Fprintf(&b, "    mode: %s\n", c.Mode)
		}
		if c.Settle > 0 {
			fmt.Fprintf(&b, "    settle: %s\n", c.Settle)
		}
	}
	b.WriteString(c.ExtraTargets)
	b.WriteString("tools:\n")
	for _, t := range []struct{ class, replay, what string }{
		{ClassIdem, "idempotency_key", "the target honours Idempotency-Key"},
		{ClassStatus, "status_query", "the target answers a status query by key"},
		{ClassReview, "review", "irreversible; an operator decides an unknown outcome"},
	} {
		fmt.Fprintf(&b, `  %s:
    description: Count one effect (%s).
    input_schema: {type: object, required: [intent], properties: {intent: {type: string}}}
    target: %s
    request: {method: POST, path: /%s/effect, body: {intent: "{{intent}}"}}
    replay: %s
    attach_window: 1h
`, c.Tool(t.class), t.what, t.class, t.class, t.replay)
	}
	b.WriteString(c.ExtraTools)
	return b.String()
}

// WriteCatalog writes Catalog(c) to path after the catalog loader accepted
// it; the loader's error is returned as it is.
func WriteCatalog(path string, c CatalogConfig) error {
	text := Catalog(c)
	if _, err := tools.Parse(path, []byte(text)); err != nil {
		return fmt.Errorf("catalog refused: %w", err)
	}
	return os.WriteFile(path, []byte(text), 0o600)
}
