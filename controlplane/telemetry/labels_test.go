package telemetry

import (
	"testing"

	"github.com/latchhq/latch/internal/opshttp"
	"github.com/latchhq/latch/tools"
)

// TestChannelLabel: the channel label is a built-in kind, or the kind of a
// target of the catalog at start (a kind registered beside the built-ins),
// and "other" for anything else: the label set stays bounded.
func TestChannelLabel(t *testing.T) {
	cat := &tools.Catalog{Targets: map[string]*tools.Target{"jobs": {Name: "jobs", Channel: "queue"}}}
	tel, err := New(Config{Registry: opshttp.NewRegistry(), Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	for ch, want := range map[string]string{"http": "http", "ssh": "ssh", "local": "local", "mcp": "mcp", "queue": "queue", "smtp": "other", "": "other"} {
		if got := tel.channelLabel(ch); got != want {
			t.Errorf("channelLabel(%q) = %q, want %q", ch, got, want)
		}
	}
}
