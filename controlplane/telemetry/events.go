package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// EventMetrics are the latch_events_* collectors (controlplane/events'
// Metrics). The sink label is bounded: sinks are the operator's
// configuration.
type EventMetrics struct {
	delivered *prometheus.CounterVec
	failed    *prometheus.CounterVec
	dead      *prometheus.CounterVec
	latency   *prometheus.HistogramVec
}

// Events returns the event delivery metrics, registered on first use.
func (t *Telemetry) Events() *EventMetrics {
	t.eventsOnce.Do(func() {
		f := promauto.With(t.reg)
		t.events = &EventMetrics{
			delivered: f.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "events_delivered_total",
				Help: "Events a sink accepted (2xx), by sink."}, []string{"sink"}),
			failed: f.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "events_failed_total",
				Help: "Event delivery attempts that failed (no answer or not 2xx), by sink; each is retried with backoff."}, []string{"sink"}),
			dead: f.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "events_dead_lettered_total",
				Help: "Event deliveries given up after the attempt bound (latch events replay sends them again), by sink."}, []string{"sink"}),
			latency: f.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "events_delivery_duration_seconds",
				Help:    "Duration of one successful delivery exchange with a sink.",
				Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"sink"}),
		}
	})
	return t.events
}

// Delivered counts an accepted delivery.
func (m *EventMetrics) Delivered(sink string, d time.Duration) {
	m.delivered.WithLabelValues(sink).Inc()
	m.latency.WithLabelValues(sink).Observe(d.Seconds())
}

// Failed counts a failed attempt.
func (m *EventMetrics) Failed(sink string) { m.failed.WithLabelValues(sink).Inc() }

// DeadLettered counts a delivery given up.
func (m *EventMetrics) DeadLettered(sink string) { m.dead.WithLabelValues(sink).Inc() }
