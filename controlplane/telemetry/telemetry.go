// Package telemetry is the control plane's Prometheus metrics and
// OpenTelemetry spans. It is wired in through small hooks: the store's
// OnGroup (transitions, group sizes), a KV wrapper (commit durations), the
// engine's Observer (dispatch attempts, recovery queries), the API's submit
// hook, and gauge functions read at scrape time (vault, checkpoint, oldest
// unresolved execution). Every label value is bounded: tool names come from
// the catalog (anything else is "other"), states and dispositions from the
// proto enums.
//
// Imported by controlplane/server and controlplane/cli only.
package telemetry

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/tracing"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Namespace prefixes every metric name.
const Namespace = "latch"

// OtherTool is the tool label of a tool the catalog does not name.
const OtherTool = "other"

// Config names the dependencies of the control plane's telemetry.
type Config struct {
	// Registry receives every collector (required; never the global one).
	Registry prometheus.Registerer
	// Tracer makes the spans (nil: no spans).
	Tracer trace.TracerProvider
	Logger hclog.Logger
	// Catalog bounds the tool label, and with the built-in channel kinds
	// the channel label (required).
	Catalog *tools.Catalog
	// Clock defaults to time.Now.
	Clock func() time.Time
}

// Telemetry holds the control plane's collectors and its tracer.
type Telemetry struct {
	cfg    Config
	log    hclog.Logger
	tracer trace.Tracer
	reg    prometheus.Registerer
	tools  map[string]bool
	// channels bounds the channel label: the built-in kinds and the
	// channels of the catalog's targets at start.
	channels map[string]bool

	transitions *prometheus.CounterVec
	// counts is latch_executions, indexed by state number.
	counts        []atomic.Int64
	submits       *prometheus.CounterVec
	dispatch      *prometheus.HistogramVec
	recovery      *prometheus.CounterVec
	commitSeconds prometheus.Histogram
	groupSize     prometheus.Histogram
	writtenKeys   prometheus.Counter
	writtenBytes  prometheus.Counter
	// observe are the latch_observe_* collectors (observe.go).
	observe observeMetrics

	approvals approvalSpans
	// events are the latch_events_* collectors (events.go).
	eventsOnce sync.Once
	events     *EventMetrics
	// settled queues the settled-execution log lines for logSettled; it is
	// never closed (the store hook may still send), stop ends the logger.
	settled   chan settledLine
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// New builds the collectors and registers them.
func New(cfg Config) (*Telemetry, error) {
	switch {
	case cfg.Registry == nil:
		return nil, errors.New("telemetry: Config.Registry is required")
	case cfg.Catalog == nil:
		return nil, errors.New("telemetry: Config.Catalog is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	f := promauto.With(cfg.Registry)
	t := &Telemetry{
		cfg: cfg, log: cfg.Logger.Named("telemetry"), reg: cfg.Registry,
		tracer:   tracing.OrNoop(cfg.Tracer).Tracer("github.com/latchhq/latch/controlplane"),
		tools:    map[string]bool{},
		channels: map[string]bool{},
		transitions: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "transitions_total",
			Help: "Journaled state transitions of executions, by tool and from/to state.",
		}, []string{"tool", "from", "to"}),
		submits: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "submit_total",
			Help: "Submitted requests by tool and disposition (new, attached, recovered, rejected; error when the submit failed).",
		}, []string{"tool", "disposition"}),
		dispatch: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "dispatch_duration_seconds",
			Help:    "Duration of dispatch attempts (the channel call), by channel and tool.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"channel", "tool"}),
		recovery: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "recovery_attempts_total",
			Help: "Recovery attempts (status queries and same-key replays) by tool and what they proved: observed, absent, not_sent, unknown, unsupported.",
		}, []string{"tool", "result"}),
		commitSeconds: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "store_commit_duration_seconds",
			Help:    "Duration of the store's durable group commits (one sync each).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		groupSize: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "store_group_size",
			Help:    "Number of updates that shared one group commit.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
		}),
		writtenKeys: f.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "store_written_keys_total",
			Help: "Keys the store's committed group commits wrote (set or deleted).",
		}),
		writtenBytes: f.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "store_written_bytes_total",
			Help: "Bytes of keys and values the store's committed group commits wrote, before the backend's own framing.",
		}),
		observe: newObserveMetrics(f),
		counts:  make([]atomic.Int64, len(recordv1.State_name)),
		settled: make(chan settledLine, 4096),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	for name := range cfg.Catalog.Tools {
		t.tools[name] = true
	}
	for _, tg := range cfg.Catalog.Targets {
		t.channels[string(tg.Channel)] = true
	}
	if err := cfg.Registry.Register(stateCollector{t}); err != nil {
		return nil, fmt.Errorf("telemetry: register latch_executions: %w", err)
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "recovery_queue_depth",
		Help: "Executions in outcome_unknown, waiting for recovery to establish their outcome.",
	}, func() float64 { return float64(t.count(recordv1.State_STATE_OUTCOME_UNKNOWN)) })
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "approvals_pending",
		Help: "Executions awaiting an operator's approval.",
	}, func() float64 { return float64(t.count(recordv1.State_STATE_AWAITING_APPROVAL)) })
	go t.logSettled()
	return t, nil
}

// Close stops the settled-execution logger after the lines queued so far.
// Call it after the store is closed (a line settled later is logged at
// once by the store hook, once the queue is full).
func (t *Telemetry) Close() {
	t.closeOnce.Do(func() { close(t.stop) })
	<-t.done
}

// tool is the bounded tool label.
func (t *Telemetry) tool(name string) string {
	if t.tools[name] {
		return name
	}
	return OtherTool
}

// Registerer is the registry the collectors are in (for gauges added by
// their owners: vault, checkpoints).
func (t *Telemetry) Registerer() prometheus.Registerer { return t.reg }

// Tracer is the control plane's tracer.
func (t *Telemetry) Tracer() trace.Tracer { return t.tracer }

// count is the number of executions in st.
func (t *Telemetry) count(st recordv1.State) int64 {
	if int(st) <= 0 || int(st) >= len(t.counts) {
		return 0
	}
	return t.counts[st].Load()
}

// add moves the count of st by d; states of a newer schema are ignored.
func (t *Telemetry) add(st recordv1.State, d int64) {
	if int(st) > 0 && int(st) < len(t.counts) {
		t.counts[st].Add(d)
	}
}

var executionsDesc = prometheus.NewDesc(Namespace+"_executions",
	"Executions per lifecycle state (counted from the store at start, then kept by every commit).", []string{"state"}, nil)

// stateCollector serves latch_executions from the atomic counts.
type stateCollector struct{ t *Telemetry }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- executionsDesc }

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	for i := 1; i < len(c.t.counts); i++ {
		ch <- prometheus.MustNewConstMetric(executionsDesc, prometheus.GaugeValue, float64(c.t.counts[i].Load()), lifecycle.Name(recordv1.State(i)))
	}
}
