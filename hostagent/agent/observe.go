package agent

import (
	"context"
	"maps"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/hostagent"
	"github.com/latchhq/latch/hostagent/markers"
	"github.com/latchhq/latch/internal/tracing"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// Metrics are the host agent's Prometheus collectors. Build them with
// NewMetrics and pass them in Config.Metrics (nil: none).
type Metrics struct {
	runs       *prometheus.CounterVec
	reconciled *prometheus.CounterVec
	// store is the open marker store latch_hostagent_markers counts (nil
	// before Serve opened it).
	store atomic.Pointer[markers.Store]
}

// NewMetrics registers the agent's collectors in reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		runs: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: "latch", Subsystem: "hostagent", Name: "runs_total",
			Help: "Run requests by result: started (the command ran), existing (the execution ID had a marker: nothing re-run), not_started (the gate never opened), refused (invalid or failed request).",
		}, []string{"result"}),
		reconciled: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: "latch", Subsystem: "hostagent", Name: "reconciled_total",
			Help: "Open markers reconciled at start by outcome: exited (a recorded exit status), not_started, lost, reattached (still running).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(markerCollector{m})
	return m
}

func (m *Metrics) run(resp *hostagentv1.RunResponse, created bool, err error) {
	if m == nil {
		return
	}
	result := "refused"
	switch {
	case err != nil:
	case !created:
		result = "existing"
	case resp.GetStarted():
		result = "started"
	default:
		result = "not_started"
	}
	m.runs.WithLabelValues(result).Inc()
}

func (m *Metrics) reconcile(outcome string) {
	if m != nil {
		m.reconciled.WithLabelValues(outcome).Inc()
	}
}

// observeMarkers registers latch_hostagent_markers, counted from the
// marker store at scrape time.
func (m *Metrics) observeMarkers(st *markers.Store) {
	if m != nil {
		m.store.Store(st)
	}
}

var markersDesc = prometheus.NewDesc("latch_hostagent_markers", "Run markers per state.", []string{"state"}, nil)

type markerCollector struct{ m *Metrics }

func (c markerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- markersDesc }

func (c markerCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.m.store.Load()
	if st == nil {
		return
	}
	ms, err := st.List(markers.Runs, 0)
	if err != nil {
		return // the store is closed: the agent stopped
	}
	counts := map[hostagentv1.MarkerState]int{}
	for _, m := range ms {
		counts[m.GetState()]++
	}
	for v := range hostagentv1.MarkerState_name {
		s := hostagentv1.MarkerState(v)
		if s == hostagentv1.MarkerState_MARKER_STATE_UNSPECIFIED {
			continue
		}
		ch <- prometheus.MustNewConstMetric(markersDesc, prometheus.GaugeValue, float64(counts[s]), hostagent.MarkerName(s))
	}
}

// withTraceparent gives the command the caller's W3C trace context (the
// control plane's dispatch span, from the gRPC metadata) as TRACEPARENT. The
// request is copied, never changed.
func withTraceparent(ctx context.Context, req *hostagentv1.RunRequest) *hostagentv1.RunRequest {
	md, _ := metadata.FromIncomingContext(ctx)
	tp := md.Get(tracing.HeaderTraceparent)
	if len(tp) == 0 || tp[0] == "" {
		return req
	}
	env := maps.Clone(req.GetEnv())
	if env == nil {
		env = map[string]string{}
	}
	env[tracing.EnvTraceparent] = tp[0]
	out := proto.Clone(req).(*hostagentv1.RunRequest)
	out.Env = env
	return out
}
