package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/httpchannel"
	"github.com/latchhq/latch/controlplane/httpdispatch"
	"github.com/latchhq/latch/controlplane/server"
	"github.com/latchhq/latch/controlplane/telemetry"
	"github.com/latchhq/latch/internal/opshttp"
	"github.com/latchhq/latch/internal/tracing"
	"github.com/latchhq/latch/mcpfront"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	"github.com/latchhq/latch/tools"
)

const stackCatalog = `
targets:
  api: {channel: http, base_url: "%s", allow_private: true, idempotency_header: Idempotency-Key}
tools:
  deploy_release:
    description: Deploy.
    input_schema: {type: object, required: [service, version], properties: {service: {type: string}, version: {type: string}}}
    target: api
    request: {method: POST, path: /v1/releases, body: {service: "{{service}}", version: "{{version}}"}}
    replay: idempotency_key
    attach_window: 1h
  rotate_credential:
    description: Rotate.
    input_schema: {type: object, required: [service], properties: {service: {type: string}}}
    target: api
    request: {method: POST, path: /v1/credentials/rotate, body: {service: "{{service}}"}}
    replay: review
    approval: every_call
`

// receiver is an in-process OTLP/HTTP trace receiver.
type receiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	// discard, when set, reads and drops every export (benchmarks: the
	// collector's cost is not Latch's).
	discard atomic.Bool
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want POST /v1/traces with protobuf", http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(req.Body)
		if r.discard.Load() {
			w.Header().Set("Content-Type", "application/x-protobuf")
			return
		}
		var ex coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &ex); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				r.spans = append(r.spans, ss.GetSpans()...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) named(name string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if s.GetName() == name {
			out = append(out, s)
		}
	}
	return out
}

// target is an HTTP target that records the traceparent of each request.
type target struct {
	srv *httptest.Server
	mu  sync.Mutex
	tps []string
}

func newTarget(t testing.TB) *target {
	tg := &target{}
	tg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		tg.mu.Lock()
		tg.tps = append(tg.tps, r.Header.Get("traceparent"))
		tg.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"status":"deployed"}`)
	}))
	t.Cleanup(tg.srv.Close)
	return tg
}

// obsStack is the whole path with telemetry: MCP client → HTTP → front →
// gRPC on the control plane's unix socket → control plane → HTTP target.
type obsStack struct {
	URL    string
	reg    *prometheus.Registry
	tracer *tracing.Provider
	target *target
	cp     controlplanev1.ControlPlaneClient
}

// newObsStack builds the stack; observed turns metrics and tracing on
// (tracing exports to OTEL_EXPORTER_OTLP_ENDPOINT, which the caller sets).
func newObsStack(t testing.TB, observed bool) *obsStack {
	t.Helper()
	st := &obsStack{target: newTarget(t)}
	catYAML := []byte(fmt.Sprintf(stackCatalog, st.target.srv.URL))
	cat, err := tools.Parse("stack.yaml", catYAML)
	if err != nil {
		t.Fatal(err)
	}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: io.Discard})
	var tel *telemetry.Telemetry
	var tp *tracing.Provider
	if observed {
		if tp, err = tracing.FromEnv(context.Background(), "latch-test", "test", nil); err != nil {
			t.Fatal(err)
		}
		st.tracer = tp
		st.reg = opshttp.NewRegistry()
		if tel, err = telemetry.New(telemetry.Config{Registry: st.reg, Tracer: tp, Catalog: cat, Logger: log}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := httpdispatch.New(httpdispatch.Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	hc, err := httpchannel.New(httpchannel.Config{Logger: log, Dispatcher: d})
	if err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "lt")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{
		Logger: log, DataDir: t.TempDir(), Socket: filepath.Join(sockDir, "cp.sock"), CatalogSource: catalog.Bytes("stack.yaml", catYAML),
		Channels: map[tools.Channel]engine.Channel{tools.ChannelHTTP: hc}, Telemetry: tel,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	conn, err := grpc.NewClient("passthrough:///cp", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(sockDir, "cp.sock"))
		}),
		grpc.WithChainUnaryInterceptor(tracing.UnaryClient()), grpc.WithChainStreamInterceptor(tracing.StreamClient()))
	if err != nil {
		t.Fatal(err)
	}
	st.cp = controlplanev1.NewControlPlaneClient(conn)
	fcfg := mcpfront.Config{Logger: log, ControlPlane: st.cp}
	if observed {
		fcfg.Metrics, fcfg.Tracer = mcpfront.NewMetrics(st.reg), tp
	}
	front, err := mcpfront.New(fcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := front.Sync(t.Context()); err != nil { // tools come from the control plane
		t.Fatal(err)
	}
	hs := httptest.NewServer(front.HTTPHandler())
	st.URL = hs.URL + "/mcp"
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		front.Close()
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("control plane Run: %v", err)
		}
		d.Close()
		os.RemoveAll(sockDir)
		if tel != nil {
			tel.Close()
		}
		tp.Shutdown(context.Background())
	})
	return st
}

func (st *obsStack) connect(t testing.TB, era string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "obs-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: st.URL, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// scrape reads the registry through the ops listener's /metrics, as
// Prometheus does.
func scrape(t testing.TB, reg prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	ops, err := opshttp.New(opshttp.Config{Addr: "127.0.0.1:0", Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	ops.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d: %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// value is the sample of family name whose labels include want (counter,
// gauge, or a histogram's count), or 0 when there is none.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	var sum float64
	for _, m := range f.GetMetric() {
		ok := true
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}
