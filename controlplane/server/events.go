package server

import (
	"sync/atomic"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/events"
	"github.com/latchhq/latch/controlplane/store"
)

// eventSource makes st write the event outbox with the journal when sinks
// are configured. The per-tool completed opt-in is read from the engine's
// catalog in force once the engine exists (the returned pointer; the
// catalog's first record comes before it and causes no event).
func (s *Server) eventSource(st *store.Store) *atomic.Pointer[engine.Engine] {
	var eng atomic.Pointer[engine.Engine]
	if s.cfg.Events == nil || len(s.cfg.Events.Sinks) == 0 {
		return &eng
	}
	st.SetEventSource(events.Source(func(tool string) bool {
		e := eng.Load()
		if e == nil {
			return false
		}
		t, ok := e.Catalog().Tools[tool]
		return ok && t.NotifyCompleted
	}, s.cfg.Events.Sinks))
	return &eng
}

// buildOutbox builds the outbox's drainer: it runs on the active replica
// only (serveActive) and sends nothing once the lease may have lapsed.
func (s *Server) buildOutbox(st *store.Store) error {
	if s.cfg.Events == nil || len(s.cfg.Events.Sinks) == 0 {
		return nil
	}
	cfg := *s.cfg.Events
	cfg.Store, cfg.Logger = st, s.cfg.Logger
	if s.lease != nil {
		cfg.Holds = s.lease.Holds
	}
	if s.cfg.Telemetry != nil {
		cfg.Metrics = s.cfg.Telemetry.Events()
	}
	o, err := events.New(cfg)
	if err != nil {
		return err
	}
	s.outbox = o
	return nil
}

// Outbox is the event outbox's drainer (nil without sinks).
func (s *Server) Outbox() *events.Outbox { return s.outbox }
