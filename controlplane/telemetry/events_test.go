package telemetry_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/telemetry"
	"github.com/latchhq/latch/internal/opshttp"
	"github.com/latchhq/latch/tools"
)

func TestEventMetrics(t *testing.T) {
	reg := opshttp.NewRegistry()
	cat, err := tools.Parse("c.yaml", []byte(fmt.Sprintf(stackCatalog, "http://127.0.0.1:1")))
	if err != nil {
		t.Fatal(err)
	}
	tel, err := telemetry.New(telemetry.Config{Registry: reg, Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	m := tel.Events()
	if tel.Events() != m {
		t.Fatal("Events() registered its collectors twice")
	}
	m.Delivered("ops", 3*time.Millisecond)
	m.Failed("ops")
	m.Failed("ops")
	m.DeadLettered("chat")
	fams := scrape(t, reg)
	for _, c := range []struct {
		name, sink string
		want       float64
	}{
		{"latch_events_delivered_total", "ops", 1},
		{"latch_events_failed_total", "ops", 2},
		{"latch_events_dead_lettered_total", "chat", 1},
	} {
		if got := value(fams, c.name, map[string]string{"sink": c.sink}); got != c.want {
			t.Errorf("%s{sink=%q} = %v, want %v", c.name, c.sink, got, c.want)
		}
	}
	if fams["latch_events_delivery_duration_seconds"] == nil {
		t.Error("latch_events_delivery_duration_seconds is not exported")
	}
}
