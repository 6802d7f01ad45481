package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/store"
)

// ErrStateMismatch is returned by New (and by Run, from the background pass)
// when the store disagrees with its journal: the control plane does not
// serve from it.
var ErrStateMismatch = errors.New("server: the store disagrees with its journal")

// checkState is the start-up check of "state is a function of the journal"
// (store/doc.go): every execution record, result and fingerprint index
// entry of a small store, or the unsettled executions of a large one (the
// rest is then checked by checkAllState while serving, and attach checks
// each prior execution it answers from). It returns the scope it checked.
func checkState(log hclog.Logger, dataDir string, st *store.Store, fullUpTo int64) (store.CheckScope, error) {
	scope := st.StartupScope(fullUpTo)
	start := time.Now()
	rep, err := st.CheckState(context.Background(), scope)
	if err != nil {
		return 0, fmt.Errorf("server: check the store against its journal: %w", err)
	}
	if !rep.OK() {
		return 0, refuse(dataDir, rep)
	}
	log.Named("server").Info("store agrees with its journal", "checked", scopeName(scope),
		"executions", rep.Executions, "results", rep.Results, "index_entries", rep.Index, "duration", time.Since(start))
	return scope, nil
}

// checkAllState is the background pass after a partial start-up check. A
// mismatch stops the control plane (Run returns the error).
func (s *Server) checkAllState(ctx context.Context) error {
	start := time.Now()
	rep, err := s.Store.CheckState(ctx, store.CheckAllLive)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("server: background check of the store against its journal: %w", err)
	}
	if !rep.OK() {
		err := refuse(s.cfg.DataDir, rep)
		s.log.Error("store disagrees with its journal; stopping", "mismatches", len(rep.Mismatches), "error", err)
		return err
	}
	s.log.Info("background check: store agrees with its journal", "executions", rep.Executions,
		"results", rep.Results, "index_entries", rep.Index, "duration", time.Since(start))
	return nil
}

func refuse(dataDir string, rep *store.StateReport) error {
	first := rep.Mismatches[0].String()
	return fmt.Errorf("%w: %d mismatch(es), first: %s; refusing to serve from %s (nothing was changed); run `latch audit verify %s` to see every mismatch by execution ID and journal record",
		ErrStateMismatch, len(rep.Mismatches), first, dataDir, dataDir)
}

func scopeName(s store.CheckScope) string {
	if s == store.CheckUnsettled {
		return "unsettled executions (a background pass checks the rest)"
	}
	return "all state"
}
