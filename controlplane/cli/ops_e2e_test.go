package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

const opsCatalog = `
targets:
  releases:
    channel: http
    base_url: %s
    allow_private: true
    idempotency_header: Idempotency-Key
    status: {method: GET, path: "/v1/releases/by-key/{execution_id}"}
    timeout: 500ms
tools:
  deploy_release:
    description: Deploy.
    input_schema: {type: object, required: [service, version], properties: {service: {type: string}, version: {type: string}}}
    target: releases
    request: {method: POST, path: /v1/releases, body: {service: "{{service}}", version: "{{version}}", region: "eu"}}
    replay: status_query
    attach_window: 1h
`

// gatedTarget answers POST /v1/releases at once, or, while held, only once
// released; its status endpoint says 409 (in progress) for a held request.
type gatedTarget struct {
	mu      sync.Mutex
	held    chan struct{} // nil: not holding
	effects map[string]bool
	pending map[string]bool
}

func newGatedTarget(t *testing.T) (*gatedTarget, string) {
	g := &gatedTarget{effects: map[string]bool{}, pending: map[string]bool{}}
	srv := httptest.NewServer(g)
	t.Cleanup(func() { g.release(); srv.Close() })
	return g, srv.URL
}

func (g *gatedTarget) hold() { g.mu.Lock(); g.held = make(chan struct{}); g.mu.Unlock() }

func (g *gatedTarget) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
}

func (g *gatedTarget) count() int { g.mu.Lock(); defer g.mu.Unlock(); return len(g.effects) }

func (g *gatedTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	g.mu.Lock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/releases":
		key, held := r.Header.Get("Idempotency-Key"), g.held
		g.effects[key], g.pending[key] = true, held != nil
		g.mu.Unlock()
		if held != nil {
			<-held
			g.mu.Lock()
			g.pending[key] = false
			g.mu.Unlock()
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"status":"deployed"}`)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/releases/by-key/"):
		key := strings.TrimPrefix(r.URL.Path, "/v1/releases/by-key/")
		done, pending := g.effects[key], g.pending[key]
		g.mu.Unlock()
		switch {
		case pending:
			w.WriteHeader(http.StatusConflict)
		case done:
			fmt.Fprint(w, `{"status":"deployed"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	default:
		g.mu.Unlock()
		http.NotFound(w, r)
	}
}

// startServeOps runs `latch serve` with its ops listener on a free port and
// JSON logs, and returns the listener's URL (from the "ops listener ready"
// line) and the process's stderr.
func startServeOps(t *testing.T, data, catalog string) (string, *testbin.Buffer) {
	t.Helper()
	cmd := exec.Command(latchBin, "serve", "--data", data, "--catalog", catalog, "--vault-key-file", filepath.Join(data, "vault.key"),
		"--trusted-actor", "alice", "--http-listen", "127.0.0.1:0", "--log-format", "json")
	stderr := &testbin.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("latch serve log:\n%s", stderr.String())
		}
	})
	for range 1000 {
		for _, l := range jsonLines(t, stderr.String()) {
			if l["@message"] == "ops listener ready" {
				url, _ := l["url"].(string)
				for range 200 { // the API socket opens right after
					if c, err := net.Dial("unix", datadir.Socket(data)); err == nil {
						c.Close()
						return url, stderr
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("latch serve did not log its ops listener:\n%s", stderr.String())
	return "", nil
}

// jsonLines decodes every complete log line; a line that is not JSON fails
// the test (--log-format json promises one object per line).
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	if i := strings.LastIndex(out, "\n"); i >= 0 {
		out = out[:i] // the last line may still be being written
	} else {
		return nil
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("--log-format json wrote a line that is not JSON: %q", sc.Text())
		}
		lines = append(lines, m)
	}
	return lines
}

func scrapeURL(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// sample is the value of the series of family name with exactly these
// labels (a histogram's count), 0 when absent.
func sample(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	for _, m := range fams[name].GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := len(got) == len(labels)/2
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && got[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// metric is one series of sample and the value it must have.
type metric struct {
	want   float64
	name   string
	labels []string
}

// waitMetrics scrapes url's /metrics until every series has its value, and
// fails naming those that do not within the bound (30s). A single scrape
// right after a state is seen can be early: the transition counters,
// latch_executions and latch_recovery_queue_depth move in the store's
// OnGroup hook, which runs after the commit that a concurrent Get may
// already see.
func waitMetrics(t *testing.T, url, when string, ms ...metric) {
	t.Helper()
	var off []string
	for range 1500 {
		fams := scrapeURL(t, url)
		off = off[:0]
		for _, m := range ms {
			if got := sample(fams, m.name, m.labels...); got != m.want {
				off = append(off, fmt.Sprintf("%s%v = %v, want %v", m.name, m.labels, got, m.want))
			}
		}
		if len(off) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("%s, still after 30s: %s", when, strings.Join(off, "; "))
}

func getStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOpsListenerFollowsExecutions runs `latch serve --http-listen` as a
// real process: /metrics moves by one per new, attached and recovered
// submit and per recovery; every log line is JSON and each settled execution
// has its info line; /readyz fails once the vault is locked.
func TestOpsListenerFollowsExecutions(t *testing.T) {
	tg, target := newGatedTarget(t)
	catalog := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(catalog, []byte(fmt.Sprintf(opsCatalog, target)), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	ops, stderr := startServeOps(t, data, catalog)
	if code, body := getStatus(t, ops+"/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz = %d %s, want 200", code, body)
	}
	if code, body := getStatus(t, ops+"/readyz"); code != http.StatusOK {
		t.Errorf("GET /readyz = %d %s, want 200", code, body)
	}
	conn, err := dialSocket(datadir.Socket(data))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if h, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("grpc.health.v1 Check on the API socket = %v, %v; want SERVING", h, err)
	}
	c := client(t, data)
	submit := func(version string) *controlplanev1.SubmitResponse {
		t.Helper()
		r, err := c.Submit(context.Background(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy_release", Arguments: []byte(`{"service":"api","version":"` + version + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// A new execution, then its retry.
	first := submit("1.0")
	waitFor(t, c, first.GetExecution().GetId(), recordv1.State_STATE_COMPLETED)
	waitMetrics(t, ops, "after one call",
		metric{1, "latch_submit_total", []string{"tool", "deploy_release", "disposition", "new"}},
		metric{1, "latch_transitions_total", []string{"tool", "deploy_release", "from", "dispatched", "to", "completed"}},
		metric{1, "latch_executions", []string{"state", "completed"}},
		metric{1, "latch_dispatch_duration_seconds", []string{"channel", "http", "tool", "deploy_release"}},
	)
	if again := submit("1.0"); again.GetDisposition() != recordv1.Disposition_DISPOSITION_ATTACHED {
		t.Fatalf("retry disposition %v, want attached", again.GetDisposition())
	}
	waitMetrics(t, ops, "after the retry",
		metric{1, "latch_submit_total", []string{"tool", "deploy_release", "disposition", "attached"}},
		metric{1, "latch_submit_total", []string{"tool", "deploy_release", "disposition", "new"}},
	)

	// An unknown outcome (the target holds the request past the 500ms
	// dispatch timeout and its status endpoint says "in progress"), a retry
	// that is told it is being recovered, and the recovery that settles it
	// from the status endpoint once the target answers.
	tg.hold()
	slow := submit("2.0")
	id := slow.GetExecution().GetId()
	waitFor(t, c, id, recordv1.State_STATE_OUTCOME_UNKNOWN)
	if again := submit("2.0"); again.GetDisposition() != recordv1.Disposition_DISPOSITION_RECOVERED {
		t.Errorf("retry of the unknown outcome: disposition %v, want recovered", again.GetDisposition())
	}
	waitMetrics(t, ops, "while unknown",
		metric{1, "latch_submit_total", []string{"tool", "deploy_release", "disposition", "recovered"}},
		metric{1, "latch_transitions_total", []string{"tool", "deploy_release", "from", "dispatched", "to", "outcome_unknown"}},
		metric{1, "latch_recovery_queue_depth", nil},
	)
	tg.release()
	waitFor(t, c, id, recordv1.State_STATE_COMPLETED)
	waitMetrics(t, ops, "after recovery",
		metric{1, "latch_transitions_total", []string{"tool", "deploy_release", "from", "outcome_unknown", "to", "completed"}},
		metric{1, "latch_recovery_attempts_total", []string{"tool", "deploy_release", "result", "observed"}},
		metric{0, "latch_executions", []string{"state", "outcome_unknown"}},
		metric{0, "latch_recovery_queue_depth", nil},
		metric{2, "latch_executions", []string{"state", "completed"}},
	)
	if got := tg.count(); got != 2 {
		t.Errorf("target effects = %d, want 2 (one per intent)", got)
	}

	// One info line per settled execution, with its fields.
	// The lines are written by the telemetry's logger goroutine, after
	// the commit a Get sees.
	testbin.Eventually(t, "the two settled lines in the log", func() bool {
		n := 0
		for _, l := range jsonLines(t, stderr.String()) { // complete lines only
			if l["@message"] == "execution settled" {
				n++
			}
		}
		return n >= 2
	})
	settled := map[string]map[string]any{}
	for _, l := range jsonLines(t, stderr.String()) {
		if l["@message"] == "execution settled" {
			settled[l["execution_id"].(string)] = l
		}
	}
	for xid, disp := range map[string]string{first.GetExecution().GetId(): "new", id: "recovered"} {
		l := settled[xid]
		for k, want := range map[string]string{"@level": "info", "tool": "deploy_release", "actor": "alice", "disposition": disp, "state": "completed", "outcome": "succeeded"} {
			if l[k] != want {
				t.Errorf("settled line of %s: %s = %v, want %q (line %v)", xid, k, l[k], want, l)
			}
		}
		if _, err := time.ParseDuration(fmt.Sprint(l["duration"])); err != nil {
			t.Errorf("settled line of %s: duration %v does not parse", xid, l["duration"])
		}
	}

	// A locked vault makes the control plane unready.
	if out, code := runCLI(t, "vault", "lock", "--data", data); code != 0 {
		t.Fatalf("vault lock: %s", out)
	}
	code, body := getStatus(t, ops+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"name":"vault","ready":false`) || !strings.Contains(body, "latch vault unlock") {
		t.Errorf("GET /readyz with the vault locked = %d %s, want 503 naming the vault and what to do", code, body)
	}
	waitMetrics(t, ops, "vault locked", metric{1, "latch_vault_locked", nil})
}

// TestServeRefusesPublicOpsWithoutTLS: a non-loopback --http-listen needs
// the TLS flags (exit 2, with the fix in the message).
func TestServeRefusesPublicOpsWithoutTLS(t *testing.T) {
	_, url := newTarget(t)
	catalog := writeCatalog(t, url)
	out, code := runCLI(t, "serve", "--data", t.TempDir(), "--catalog", catalog, "--http-listen", "0.0.0.0:0")
	if code != 2 || !strings.Contains(out, "--ops-tls-cert-file") {
		t.Errorf("serve --http-listen 0.0.0.0:0 = exit %d %q, want 2 naming --ops-tls-cert-file", code, out)
	}
}
