package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// observeMetrics are the latch_observe_* collectors: what enforcement
// would have done with the calls of tools in observe mode, counted as
// they come (latch observe report reads the same from the journal's
// records, over any period).
type observeMetrics struct {
	calls, attach, concurrent, approval, uncertain *prometheus.CounterVec
	gap                                            *prometheus.HistogramVec
}

func newObserveMetrics(f promauto.Factory) observeMetrics {
	counter := func(name, help string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "observe_" + name, Help: help}, []string{"tool"})
	}
	return observeMetrics{
		calls:      counter("calls_total", "Calls of tools in observe mode, forwarded as they came, by tool."),
		attach:     counter("would_attach_total", "Observed calls enforcement would have attached to an earlier execution of the same intent (a duplicate that was sent), by tool."),
		concurrent: counter("concurrent_duplicates_total", "Would-attach calls that came while the earlier execution was still in flight, by tool."),
		approval:   counter("would_need_approval_total", "Observed calls enforcement would have made wait for an approval or a session authorization, by tool."),
		uncertain:  counter("would_hold_uncertain_total", "Observed dispatches that ended without proof of the outcome (enforcement would have held them as outcome_unknown), by tool."),
		gap: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "observe_duplicate_gap_seconds",
			Help:    "Time between an observed duplicate and the earlier execution it would have attached to, by tool.",
			Buckets: []float64{.001, .01, .1, .5, 1, 5, 10, 30, 60, 300, 1800, 3600},
		}, []string{"tool"}),
	}
}

// observed counts a submitted execution of a tool in observe mode.
func (t *Telemetry) observed(tool string, x *recordv1.Execution) {
	o := x.GetObservation()
	if o == nil {
		return
	}
	m := t.observe
	m.calls.WithLabelValues(tool).Inc()
	if o.GetWouldNeedApproval() {
		m.approval.WithLabelValues(tool).Inc()
	}
	if o.GetPriorExecutionId() == "" {
		return
	}
	m.attach.WithLabelValues(tool).Inc()
	if lifecycle.Moving(o.GetPriorState()) {
		m.concurrent.WithLabelValues(tool).Inc()
	}
	if at := o.GetPriorAcceptedAt(); at != nil {
		m.gap.WithLabelValues(tool).Observe(max(0, x.GetAcceptedAt().AsTime().Sub(at.AsTime()).Seconds()))
	}
}
