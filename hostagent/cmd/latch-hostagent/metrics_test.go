package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/latchhq/latch/internal/tracing"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// metricsURL is the URL the agent logged for its metrics listener.
func metricsURL(t *testing.T, a *agentProc) string {
	t.Helper()
	for range 500 {
		for _, line := range strings.Split(a.Log.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["@message"] == "metrics listener ready" {
				return m["url"].(string)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the agent did not log its metrics listener:\n%s", a.Log.String())
	return ""
}

func sampleOf(t *testing.T, url, name, label, value string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	var m *dto.Metric
	for _, x := range fams[name].GetMetric() {
		for _, l := range x.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				m = x
			}
		}
	}
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// TestMetricsAndTraceparent: with --metrics-listen the agent counts runs
// (started, then existing for the same execution ID) and markers by state;
// a Run carrying W3C trace context gives the command TRACEPARENT.
func TestMetricsAndTraceparent(t *testing.T) {
	a := startAgent(t, agentOpts{flags: []string{"--metrics-listen", "127.0.0.1:0", "--log-format", "json"}})
	url := metricsURL(t, a) // …/metrics
	const id, tp = "act_01HZZZTRACEPARENT", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := tracing.WithTraceparent(ctxT(t), tp, "")
	req := &hostagentv1.RunRequest{ExecutionId: id, Argv: []string{"/bin/sh", "-c", `printf '%s' "$TRACEPARENT"`}}
	if _, err := a.Client.Run(ctx, req); err != nil {
		t.Fatal(err)
	}
	a.wait(id)
	out, err := a.Client.Output(ctxT(t), &hostagentv1.OutputRequest{ExecutionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out.GetData()); got != tp {
		t.Errorf("the command saw TRACEPARENT=%q, want %q", got, tp)
	}
	if again := a.run(req); again.GetStarted() {
		t.Fatal("second Run started the command again")
	}
	for _, c := range []struct {
		name, label, value string
		want               float64
	}{
		{"latch_hostagent_runs_total", "result", "started", 1},
		{"latch_hostagent_runs_total", "result", "existing", 1},
		{"latch_hostagent_markers", "state", "exited", 1},
		{"latch_hostagent_markers", "state", "running", 0},
	} {
		if got := sampleOf(t, url, c.name, c.label, c.value); got != c.want {
			t.Errorf("%s{%s=%q} = %v, want %v", c.name, c.label, c.value, got, c.want)
		}
	}
	if _, err := http.Get(strings.TrimSuffix(url, "/metrics") + "/healthz"); err != nil {
		t.Errorf("GET /healthz: %v", err)
	}
}

// TestReconcileIsCounted: an agent killed while its command runs, then
// restarted with --metrics-listen, counts the re-attached marker, and the
// marker gauge follows it to exited.
func TestReconcileIsCounted(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	a := startAgent(t, agentOpts{data: data})
	gate := filepath.Join(t.TempDir(), "go-on")
	script := `i=0; while [ ! -e "` + gate + `" ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; exit 0`
	const id = "act_01HZZZRECONCILED"
	if resp := a.run(&hostagentv1.RunRequest{ExecutionId: id, Argv: []string{"/bin/sh", "-c", script}}); !resp.GetStarted() {
		t.Fatal("Run started = false")
	}
	a.Kill()
	b := startAgent(t, agentOpts{data: data, flags: []string{"--metrics-listen", "127.0.0.1:0", "--log-format", "json"}})
	url := metricsURL(t, b)
	if got := sampleOf(t, url, "latch_hostagent_reconciled_total", "outcome", "reattached"); got != 1 {
		t.Errorf("latch_hostagent_reconciled_total{outcome=reattached} = %v, want 1", got)
	}
	if got := sampleOf(t, url, "latch_hostagent_markers", "state", "running"); got != 1 {
		t.Errorf("latch_hostagent_markers{state=running} = %v, want 1 while the command runs", got)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b.wait(id)
	if got := sampleOf(t, url, "latch_hostagent_markers", "state", "exited"); got != 1 {
		t.Errorf("latch_hostagent_markers{state=exited} = %v, want 1 after the command exited", got)
	}
}
