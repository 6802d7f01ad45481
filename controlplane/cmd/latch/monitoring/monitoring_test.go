package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/latchhq/latch/controlplane/devstack"
	"github.com/latchhq/latch/controlplane/server"
	"github.com/latchhq/latch/controlplane/telemetry"
	"github.com/latchhq/latch/hostagent/agent"
	"github.com/latchhq/latch/internal/opshttp"
	"github.com/latchhq/latch/mcpfront"
)

// TestRulesPromtool validates alerts.yml and runs its unit tests with
// promtool (Debian package prometheus), when it is installed.
func TestRulesPromtool(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (apt-get install prometheus); the metric names are still checked by TestMonitoringUsesRegisteredMetrics")
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// registered is every metric name the three binaries register (the
// control plane, with the front's and the host agent's metrics, as
// `latch dev` serves them on one registry).
func registered(t *testing.T) map[string]bool {
	t.Helper()
	reg := opshttp.NewRegistry()
	src := devstack.Catalog("", "http://127.0.0.1:1", filepath.Join(t.TempDir(), "agent.sock"))
	cat, _, _, err := src.Load()
	if err != nil {
		t.Fatal(err)
	}
	tel, err := telemetry.New(telemetry.Config{Registry: reg, Catalog: cat, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tel.Close)
	srv, err := server.New(server.Config{DataDir: t.TempDir(), CatalogSource: src, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Store.Close() })
	tel.ObserveVault(func() bool { return false })
	mcpfront.NewMetrics(reg)
	agent.NewMetrics(reg)

	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range ch {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	return names
}

var metricName = regexp.MustCompile(`\blatch_[a-z0-9_]+`)

// used is every latch_ metric name in alerts.yml and dashboard.json.
func used(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	add := func(where, expr string) {
		for _, n := range metricName.FindAllString(expr, -1) {
			out[n] = append(out[n], where)
		}
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	b, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			add("alerts.yml "+r.Alert, r.Expr)
		}
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	b, err = os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard.json: panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			add("dashboard.json panel "+p.Title, q.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			add("dashboard.json variable "+v.Name, q)
		}
	}
	return out
}

func TestMonitoringUsesRegisteredMetrics(t *testing.T) {
	names := registered(t)
	uses := used(t)
	if len(uses) < 10 {
		t.Fatalf("found only %d metric names in alerts.yml and dashboard.json: the parser misses them", len(uses))
	}
	for n, where := range uses {
		base := n
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if !names[base] {
				base = strings.TrimSuffix(base, suffix)
			}
		}
		if !names[base] {
			t.Errorf("%s uses %s, which no Latch binary registers", strings.Join(slices.Compact(where), ", "), n)
		}
	}
}

// TestReadmeNamesEveryMetric keeps docs/reference/observability.md's metrics table complete.
func TestReadmeNamesEveryMetric(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "reference", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for n := range registered(t) {
		if strings.HasPrefix(n, "latch_") && !strings.Contains(readme, "`"+n+"`") {
			t.Errorf("docs/reference/observability.md does not document %s (add it to the metrics table)", n)
		}
	}
}
