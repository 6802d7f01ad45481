package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/latchhq/latch/controlplane/api"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/telemetry"
	"github.com/latchhq/latch/internal/opshttp"
)

// opsState is what the server keeps for its operators: when the journal
// was last checkpointed, and the tasks (the ops listener) that run with it.
type opsState struct {
	mu     sync.Mutex
	ckptAt time.Time // zero: no checkpoint yet
	start  time.Time
	tasks  []func(context.Context) error
}

func (o *opsState) checkpointed(at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if at.After(o.ckptAt) {
		o.ckptAt = at
	}
}

// Go adds a task that runs with the server (under Run's errgroup: the first
// failure stops the server). Call it before Run.
func (s *Server) Go(task func(context.Context) error) { s.ops.tasks = append(s.ops.tasks, task) }

// CheckpointAge is how long journal records have waited for a signed
// checkpoint: 0 when the newest checkpoint covers the whole journal, else
// the time since that checkpoint (or since start when there is none).
func (s *Server) CheckpointAge(now time.Time) time.Duration {
	if !s.Active() {
		return 0 // a standby signs nothing: the active's metric counts
	}
	s.ckptMu.Lock()
	covered := s.ckptSize >= s.Store.JournalSize()
	s.ckptMu.Unlock()
	if covered {
		return 0
	}
	s.ops.mu.Lock()
	since := s.ops.ckptAt
	if since.IsZero() {
		since = s.ops.start
	}
	s.ops.mu.Unlock()
	return max(0, now.Sub(since))
}

// observe registers the server's own gauges with its telemetry.
func (s *Server) observe() error {
	s.ops.start = time.Now()
	t := s.cfg.Telemetry
	if t == nil {
		return nil
	}
	promauto.With(t.Registerer()).NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: telemetry.Namespace, Name: "checkpoint_age_seconds",
		Help: "Seconds journal records have waited for a signed checkpoint (0 when the newest checkpoint covers the whole journal).",
	}, func() float64 { return s.CheckpointAge(time.Now()).Seconds() })
	promauto.With(t.Registerer()).NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: telemetry.Namespace, Name: "replica_active",
		Help: "1 while this control plane replica serves the API (the active one, or the only one on Badger), 0 while it is a standby or taking over.",
	}, func() float64 {
		if s.Active() {
			return 1
		}
		return 0
	})
	s.witnessed = promauto.With(t.Registerer()).NewCounterVec(prometheus.CounterOpts{
		Namespace: telemetry.Namespace, Name: "witness_cosignatures_total",
		Help: "Answers of the witness (--witness-url) to the checkpoints sent to it, by result: cosigned, stale (it already co-signed a newer one), refused, unavailable, fork (it co-signed a checkpoint this journal does not extend).",
	}, []string{"result"})
	if s.pg != nil {
		promauto.With(t.Registerer()).NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: telemetry.Namespace, Name: "lease_epoch",
			Help: "Epoch of the PostgreSQL store's lease as this replica last saw it (its own while active).",
		}, func() float64 { return float64(s.Role().Epoch) })
	}
	return nil
}

// ReadyChecks are the control plane's readiness conditions for /readyz:
// this replica serves the API (role: a standby is not ready, it only
// answers NotActive naming the active one), the store is open and the
// journal takes a write. Callers add theirs (the vault).
//
// A standby's store check asks the database (it must be reachable for
// a takeover); its journal check passes: it writes nothing until active.
func (s *Server) ReadyChecks() []opshttp.Check {
	return []opshttp.Check{
		{Name: "role", Ready: func(context.Context) error { return roleReady(s.Role()) }},
		{Name: "store", Ready: func(ctx context.Context) error {
			if !s.Loaded() {
				if _, err := s.pg.ReadLease(ctx); err != nil {
					return fmt.Errorf("the database does not answer: %w (this standby could not take over; check --store and the database)", err)
				}
				return nil
			}
			if s.Store.Closed() {
				return errors.New("the store is closed (the control plane is stopping or failed; see its log)")
			}
			return nil
		}},
		{Name: "journal", Ready: func(ctx context.Context) error {
			if !s.Loaded() {
				return nil
			}
			return s.journalWritable(ctx)
		}},
	}
}

// roleReady is nil for a replica that serves the API.
func roleReady(r Role) error {
	switch r.Role {
	case RoleActive, RoleSingle:
		return nil
	case RoleTakingOver:
		return fmt.Errorf("taking over: this replica holds the store lease (epoch %d) and is loading the state and recovering what was in flight", r.Epoch)
	}
	if r.Holder == "" {
		// A standby's Holder is empty until its first read of the lease
		// answers (a lease nobody holds is taken, not reported).
		return errors.New("standby: has not read the store lease yet (it just started, or the database does not answer: see the store check); it takes the lease if nobody holds it")
	}
	at := r.Active
	if at == "" {
		at = "an address it does not advertise, or its lease is expiring"
	}
	return fmt.Errorf("standby: %s is the active replica (epoch %d) at %s; this replica answers every API call with that address and takes over when that lease expires", r.Holder, r.Epoch, at)
}

// Status is the role as /healthz reports it (opshttp.Config.Status).
func (s *Server) Status() map[string]string { return s.Role().Fields() }

// journalWritable passes an empty update through the store's single writer:
// it answers only when the writer is alive and the group before it
// committed.
func (s *Server) journalWritable(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.Store.Update(ctx, func(*store.Tx) error { return nil }) }()
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("the journal does not take writes: %w (see the control plane's log for the failed commit; check the data dir's disk)", err)
		}
		return nil
	case <-ctx.Done():
		return errors.New("the journal did not take a write in time: the store's writer is stuck (check the data dir's disk)")
	}
}

func observedKV(t *telemetry.Telemetry, kv store.KV) store.KV {
	if t == nil {
		return kv
	}
	return t.KV(kv)
}

func observeStore(t *telemetry.Telemetry, st *store.Store) error {
	if t == nil {
		return nil
	}
	return t.ObserveStore(st)
}

func engineObserver(t *telemetry.Telemetry) engine.Observer {
	if t == nil {
		return nil
	}
	return t
}

func submitObserver(t *telemetry.Telemetry) api.SubmitObserver {
	if t == nil {
		return nil
	}
	return t
}

// countWitness counts one answer of the witness.
func (s *Server) countWitness(result string) {
	if s.witnessed != nil {
		s.witnessed.WithLabelValues(result).Inc()
	}
}
