package mcpfront

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/mcpwire"
	"github.com/latchhq/latch/internal/tracing"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// MetaTraceparent is the `_meta` key of a call's W3C trace context; the HTTP
// traceparent header is used when it is absent.
const MetaTraceparent = "traceparent"

// Metrics are the front's Prometheus collectors. Build them with
// NewMetrics and pass them in Config.Metrics (nil: no metrics).
type Metrics struct {
	requests *prometheus.CounterVec
	calls    *prometheus.CounterVec
	inflight prometheus.Gauge
	wait     prometheus.Histogram
	// refusals, sessions and streams follow the caps (limits.go).
	refusals *prometheus.CounterVec
	sessions prometheus.Gauge
	streams  prometheus.Gauge
	// deliveriesQueued and deliveriesDropped follow the delivery reports
	// the control plane has not taken yet (delivery.go).
	deliveriesQueued  prometheus.Gauge
	deliveriesDropped prometheus.Counter
	// lateWatches, latePushed and lateUnpushed follow the late results
	// pushed to sessions (late.go).
	lateWatches  prometheus.Gauge
	latePushed   *prometheus.CounterVec
	lateUnpushed *prometheus.CounterVec
}

// NewMetrics registers the front's collectors in reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: "latch", Subsystem: "mcp", Name: "requests_total",
			Help: "MCP requests and notifications received, by method and negotiated protocol version.",
		}, []string{"method", "protocol"}),
		calls: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: "latch", Subsystem: "mcp", Name: "tool_calls_total",
			Help: "Catalog tool calls by tool and disposition (new, attached, recovered, rejected; error when the submit failed).",
		}, []string{"tool", "disposition"}),
		inflight: f.NewGauge(prometheus.GaugeOpts{
			Namespace: "latch", Subsystem: "mcp", Name: "inflight",
			Help: "Catalog tool calls in progress.",
		}),
		wait: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: "latch", Subsystem: "mcp", Name: "wait_seconds",
			Help:    "How long a catalog tool call took to answer (submit plus the wait for the execution to rest).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		refusals: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: "latch", Subsystem: "mcp", Name: "limit_refusals_total",
			Help: "HTTP requests refused over a cap, by limit (sessions, streams) and reason (actor: the per-actor cap; total: the front's).",
		}, []string{"limit", "reason"}),
		sessions: f.NewGauge(prometheus.GaugeOpts{
			Namespace: "latch", Subsystem: "mcp", Name: "sessions_open",
			Help: "MCP sessions (Mcp-Session-Id) open on HTTP, counted against --max-sessions.",
		}),
		streams: f.NewGauge(prometheus.GaugeOpts{
			Namespace: "latch", Subsystem: "mcp", Name: "streams_open",
			Help: "MCP HTTP exchanges in progress (SSE GET streams, open POST responses), counted against --max-streams.",
		}),
		deliveriesQueued: f.NewGauge(prometheus.GaugeOpts{
			Namespace: "latch", Subsystem: "mcp", Name: "delivery_reports_queued",
			Help: "Delivery reports (delivered, caller left) the control plane has not taken yet: kept, on disk with --state-dir, and sent again.",
		}),
		deliveriesDropped: f.NewCounter(prometheus.CounterOpts{
			Namespace: "latch", Subsystem: "mcp", Name: "delivery_reports_dropped_total",
			Help: "Delivery reports dropped, oldest first, because the queue was full while the control plane was away; those executions read as delivery not recorded.",
		}),
		lateWatches: f.NewGauge(prometheus.GaugeOpts{
			Namespace: "latch", Subsystem: "mcp", Name: "late_watches",
			Help: "Unresolved executions the front follows for open sessions, to push their outcome when they resolve.",
		}),
		latePushed: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: "latch", Subsystem: "mcp", Name: "late_results_pushed_total",
			Help: "Late results pushed to sessions, by notification (message: notifications/message; task_status: notifications/tasks/status) and result (sent, failed).",
		}, []string{"notification", "result"}),
		lateUnpushed: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: "latch", Subsystem: "mcp", Name: "late_results_unpushed_total",
			Help: "Unresolved answers whose outcome was not pushed, by reason (session_closed, expired, front_closing, refused, session_full, front_full, below_level).",
		}, []string{"reason"}),
	}
}

// knownMethods bounds the method label; anything else is "other".
var knownMethods = []string{
	"initialize", "ping", "server/discover", "tools/list", "tools/call",
	"resources/list", "resources/read", "resources/templates/list", "resources/subscribe", "resources/unsubscribe",
	"prompts/list", "prompts/get", "completion/complete", "logging/setLevel",
	mcpwire.MethodTasksGet, mcpwire.MethodTasksList, mcpwire.MethodTasksCancel, mcpwire.MethodTasksResult,
	"notifications/initialized", "notifications/cancelled", "notifications/progress", "notifications/roots/list_changed",
}

func methodLabel(m string) string {
	if slices.Contains(knownMethods, m) {
		return m
	}
	return "other"
}

func protocolLabel(v string) string {
	switch {
	case v == "":
		return "none"
	case slices.Contains(mcp.SupportedProtocolVersions(), v):
		return v
	}
	return "other"
}

// countRequests is the receiving middleware behind latch_mcp_requests_total.
func (m *Metrics) countRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		var proto string
		if pv, ok := req.(interface{ ProtocolVersion() string }); ok {
			proto = pv.ProtocolVersion()
		}
		if ip, ok := req.GetParams().(*mcp.InitializeParams); ok && proto == "" {
			proto = ip.ProtocolVersion // the version the client asks for
		}
		if proto == "" && req.GetExtra() != nil && req.GetExtra().Header != nil {
			proto = req.GetExtra().Header.Get(mcpwire.HeaderProtocolVersion)
		}
		m.requests.WithLabelValues(methodLabel(method), protocolLabel(proto)).Inc()
		return next(ctx, method, req)
	}
}

// observeCall starts the span of one catalog tool call (a child of the
// caller's trace context: `_meta.traceparent`, else the HTTP traceparent
// header) and its metrics. done is called with the submit's answer (nil when
// it failed) when the handler returns.
func (f *Front) observeCall(ctx context.Context, req *mcp.CallToolRequest, tool string) (context.Context, func(disposition recordv1.Disposition, exec *recordv1.Execution, err error)) {
	if tp, ts := callerTrace(req); tp != "" && !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = tracing.WithTraceparent(ctx, tp, ts)
	}
	ctx, span := f.tracer.Start(ctx, "mcp tools/call", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.AttrTool.String(tool)))
	m := f.cfg.Metrics
	start := time.Now()
	if m != nil {
		m.inflight.Inc()
	}
	return ctx, func(d recordv1.Disposition, exec *recordv1.Execution, err error) {
		disp := "error"
		if err == nil && exec != nil {
			disp = dispositionName(d)
			span.SetAttributes(tracing.AttrExecutionID.String(exec.GetId()), tracing.AttrDisposition.String(disp),
				tracing.AttrState.String(lifecycle.Name(exec.GetState())))
		} else if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		if m != nil {
			m.inflight.Dec()
			m.calls.WithLabelValues(tool, disp).Inc()
			m.wait.Observe(time.Since(start).Seconds())
		}
	}
}

// callerTrace is the caller's W3C trace context, from `_meta` or the HTTP
// request.
func callerTrace(req *mcp.CallToolRequest) (traceparent, tracestate string) {
	if req.Params != nil && req.Params.Meta != nil {
		if tp, ok := req.Params.Meta[MetaTraceparent].(string); ok && tp != "" {
			ts, _ := req.Params.Meta[tracing.HeaderTracestate].(string)
			return tp, ts
		}
	}
	if req.Extra != nil && req.Extra.Header != nil {
		h := http.Header(req.Extra.Header)
		return h.Get(tracing.HeaderTraceparent), h.Get(tracing.HeaderTracestate)
	}
	return "", ""
}
