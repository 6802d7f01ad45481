package telemetry

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// KV wraps the store's backend so each group commit's duration (the sync)
// and what it wrote are measured. Pass the result as store.Config.KV.
func (t *Telemetry) KV(kv store.KV) store.KV { return timedKV{KV: kv, t: t} }

type timedKV struct {
	store.KV
	t *Telemetry
}

func (k timedKV) Commit(writes []store.Write) error {
	start := time.Now()
	err := k.KV.Commit(writes)
	k.t.commitSeconds.Observe(time.Since(start).Seconds())
	if err == nil {
		n := 0
		for _, w := range writes {
			n += len(w.Key) + len(w.Value)
		}
		k.t.writtenKeys.Add(float64(len(writes)))
		k.t.writtenBytes.Add(float64(n))
	}
	return err
}

// unresolved are the states of latch_oldest_unresolved_seconds.
var unresolved = []recordv1.State{recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.State_STATE_NEEDS_REVIEW}

// maxSessionScan bounds the sessions read per scrape for
// latch_sessions_pending.
const maxSessionScan = 100000

// ObserveStore follows st: it counts the executions per state from the
// state index, then keeps the counts (and the transition counters) from
// every commit through st.OnGroup, and serves the store's gauges at scrape
// time. Call it before the first Update (before the engine starts).
func (t *Telemetry) ObserveStore(st *store.Store) error {
	counts, err := st.CountByState()
	if err != nil {
		return fmt.Errorf("telemetry: count executions by state: %w", err)
	}
	for s, n := range counts {
		t.add(s, n)
	}
	st.OnGroup(t.group)
	f := promauto.With(t.reg)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "journal_records",
		Help: "Records in the activity journal (committed).",
	}, func() float64 { return float64(st.JournalSize()) })
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "sessions_pending",
		Help: "Agent sessions waiting for an operator's authorization.",
	}, func() float64 {
		ss, err := st.Sessions(maxSessionScan)
		if err != nil {
			return 0
		}
		n := 0
		for _, s := range ss {
			if s.GetState() == recordv1.SessionState_SESSION_STATE_PENDING && s.GetEndedAt() == nil {
				n++
			}
		}
		return float64(n)
	})
	return t.reg.Register(oldestCollector{t: t, st: st})
}

var oldestDesc = prometheus.NewDesc(Namespace+"_oldest_unresolved_seconds",
	"Age of the oldest execution in outcome_unknown or needs_review, since its first dispatch (0 when there is none).", []string{"state"}, nil)

// oldestCollector reads the oldest unresolved executions at scrape time: one
// index seek and one read per state.
type oldestCollector struct {
	t  *Telemetry
	st *store.Store
}

func (c oldestCollector) Describe(ch chan<- *prometheus.Desc) { ch <- oldestDesc }

func (c oldestCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.t.cfg.Clock()
	for _, s := range unresolved {
		age := 0.0
		x, err := c.st.Oldest(s)
		switch {
		case err == nil:
			since := x.GetDispatchedAt()
			if since == nil {
				since = x.GetAcceptedAt()
			}
			age = max(0, now.Sub(since.AsTime()).Seconds())
		case !errors.Is(err, store.ErrNotFound):
			c.t.log.Debug("oldest unresolved execution not read", "state", lifecycle.Name(s), "error", err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age, lifecycle.Name(s))
	}
}

// group is the store's OnGroup hook, on the writer goroutine: atomic
// counts, counter increments and a non-blocking enqueue, nothing else.
func (t *Telemetry) group(g store.Group) {
	t.groupSize.Observe(float64(g.Updates))
	for _, tr := range g.Transitions {
		t.transitions.WithLabelValues(t.tool(tr.Tool), lifecycle.Name(tr.From), lifecycle.Name(tr.To)).Inc()
		t.add(tr.From, -1) // from unspecified (a new execution): ignored
		t.add(tr.To, 1)
		if tr.From == recordv1.State_STATE_AWAITING_APPROVAL {
			t.approvals.end(tr.ExecutionID, tr.To)
		}
		if settles(tr) {
			select {
			case t.settled <- settledLine(tr):
			default:
				t.logLine(settledLine(tr)) // the logger is behind: log here rather than lose the line
			}
		}
	}
}

// settles reports whether a transition settles its execution: the outcome is
// known (completed), or it ended without one (rejected, cancelled), or a
// person must decide (needs_review), or recovery or an operator proved that
// nothing happened. A not_executed from a dispatch attempt is not final:
// the engine may dispatch again, and logs when it gives up.
func settles(tr store.Transition) bool {
	switch tr.To {
	case recordv1.State_STATE_COMPLETED, recordv1.State_STATE_REJECTED, recordv1.State_STATE_CANCELLED, recordv1.State_STATE_NEEDS_REVIEW:
		return true
	case recordv1.State_STATE_NOT_EXECUTED:
		return tr.Kind != recordv1.EntryKind_ENTRY_KIND_TRANSITION
	}
	return false
}

type settledLine store.Transition

func (t *Telemetry) logSettled() {
	defer close(t.done)
	for {
		select {
		case l := <-t.settled:
			t.logLine(l)
		case <-t.stop:
			for {
				select {
				case l := <-t.settled:
					t.logLine(l)
				default:
					return
				}
			}
		}
	}
}

// logLine is the one info line per settled execution.
func (t *Telemetry) logLine(l settledLine) {
	disposition := "new"
	switch {
	case l.To == recordv1.State_STATE_REJECTED:
		disposition = "rejected"
	case l.Kind == recordv1.EntryKind_ENTRY_KIND_RECOVERY:
		disposition = "recovered"
	}
	outcome := "none"
	switch l.Outcome {
	case recordv1.Outcome_OUTCOME_SUCCEEDED:
		outcome = "succeeded"
	case recordv1.Outcome_OUTCOME_FAILED_AT_TARGET:
		outcome = "failed_at_target"
	}
	t.log.Info("execution settled", "execution_id", l.ExecutionID, "tool", l.Tool, "actor", l.Actor,
		"disposition", disposition, "state", lifecycle.Name(l.To), "outcome", outcome,
		"via", lifecycle.EntryKindName(l.Kind), "duration", l.At.Sub(l.AcceptedAt).Round(time.Millisecond).String())
}

// ObserveVault serves latch_vault_locked from locked, read at scrape time.
func (t *Telemetry) ObserveVault(locked func() bool) {
	promauto.With(t.reg).NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "vault_locked",
		Help: "1 while the vault is locked (every action is denied), else 0.",
	}, func() float64 {
		if locked() {
			return 1
		}
		return 0
	})
}

// ObserveHeld serves latch_catalog_held_tools from held, read at scrape
// time: the tools of the catalog file left out of the catalog in force (an
// upstream tool not offered, or whose offer changed; `latch catalog reload`
// and `latch catalog upstream-tools` name them).
func (t *Telemetry) ObserveHeld(held func() int) {
	promauto.With(t.reg).NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "catalog_held_tools",
		Help: "Tools of the catalog file held out of the catalog in force (latch catalog reload lists them).",
	}, func() float64 { return float64(held()) })
}
