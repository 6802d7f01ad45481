package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
)

// ErrStateMismatch is returned by New (and by Run, from the background pass)
// when the store disagrees with its journal: the control plane does not
// serve from it.
var ErrStateMismatch = errors.New("server: the store disagrees with its journal")

// checkState is the start-up check of "state is a function of the journal"
// (store/doc.go). A small store has every execution record, result and
// fingerprint index entry checked before New returns. A large one gets a
// start-up gate instead (store.StartupGate): the control plane serves at
// once while Run checks the unsettled executions, and nothing acts on an
// unsettled execution before it is checked (the update or read that would
// act on it checks it first); then Run checks the rest (checkAllState).
// Attach checks each prior execution it answers from either way.
func checkState(log hclog.Logger, dataDir string, st *store.Store, fullUpTo int64) (store.CheckScope, *store.StartupGate, error) {
	scope := st.StartupScope(fullUpTo)
	if scope == store.CheckUnsettled {
		log.Named("server").Info("large store: serving while the unsettled executions are checked against the journal (each is checked before anything acts on it)",
			"journal_size", st.JournalSize())
		return scope, st.OpenStartupGate(), nil
	}
	start := time.Now()
	rep, err := st.CheckState(context.Background(), scope)
	if err != nil {
		return 0, nil, fmt.Errorf("server: check the store against its journal: %w", err)
	}
	if !rep.OK() {
		return 0, nil, refuse(dataDir, rep)
	}
	log.Named("server").Info("store agrees with its journal", "checked", scopeName(scope),
		"executions", rep.Executions, "results", rep.Results, "index_entries", rep.Index, "duration", time.Since(start))
	return scope, nil, nil
}

// prepareTokenIndex makes sure the token journal index is right before
// anything reads it (store.IndexTokens: a few reads per token, and a read
// of the journal records written since the last start when a latch
// without the index journaled tokens meanwhile), so that every stored
// token is checked against its journal record at its first use
// (watchTokens) without reading the journal. A store written before the
// index has the whole journal to read (seconds on a large store): that is
// done while serving (buildTokenIndex); a stored token's first use waits
// for it.
func (s *Server) prepareTokenIndex(ctx context.Context, log hclog.Logger, st *store.Store) error {
	built, err := st.TokenIndexBuilt()
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if !built {
		s.tokenIndexReady = make(chan struct{})
		return nil
	}
	return indexTokens(ctx, log, st)
}

// buildTokenIndex builds the token journal index of a store written before
// it, while serving, and then lets stored tokens be checked.
func (s *Server) buildTokenIndex(ctx context.Context) error {
	s.log.Info("building the token journal index (once, for a store written before it); stored tokens authenticate once it is built",
		"journal_size", s.Store.JournalSize())
	if err := indexTokens(ctx, s.cfg.Logger, s.Store); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	close(s.tokenIndexReady)
	return nil
}

func indexTokens(ctx context.Context, log hclog.Logger, st *store.Store) error {
	start := time.Now()
	reason, n, err := st.IndexTokens(ctx)
	if errors.Is(err, store.ErrStateMismatch) {
		return fmt.Errorf("%w: %v (a stored token no journal record vouches for: not serving from this store)", ErrStateMismatch, err)
	}
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if reason != "" {
		log.Named("server").Info("indexed the tokens' journal records", "reason", reason,
			"tokens", n, "journal_size", st.JournalSize(), "duration", time.Since(start))
	}
	return nil
}

// indexSessions builds the session journal index of a store written before
// it (store.IndexSessions: one read of the journal, decoding only the
// session records; nothing on a store that has the index), so that the
// session rule can hold an authorized session against its journal record
// before a call proceeds on it.
func indexSessions(ctx context.Context, log hclog.Logger, st *store.Store) error {
	start := time.Now()
	n, err := st.IndexSessions(ctx)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if n > 0 {
		log.Named("server").Info("indexed the agent sessions' journal records (once, for a store written before the index)",
			"sessions", n, "journal_size", st.JournalSize(), "duration", time.Since(start))
	}
	return nil
}

// ErrCheckpointCopy is returned by New when the checkpoint copy
// (--checkpoint-copy) and the journal disagree: its newest checkpoint does
// not verify with the journal's key, or covers more of the journal than the
// store holds. The control plane does not serve from a journal its copy
// does not vouch for (a key swapped in the data dir, a truncated journal);
// an operator who restored the data dir from a backup moves the copy aside.
var ErrCheckpointCopy = errors.New("server: the journal disagrees with its checkpoint copy")

// copyAnchor is the newest checkpoint of the checkpoint copy (path, kept
// outside the data dir), for the first-use token check to prove records
// against when the store's own checkpoints cover less (they were deleted).
// nil when there is no copy or it holds no checkpoint yet. It is read from
// its last 64 KiB; a torn last line (a crash mid-append) is skipped. It
// fails closed: a copy that cannot be read, holds no checkpoint there, does
// not verify with the journal's key, or covers more than the journal holds
// is ErrCheckpointCopy (or the read error), and the control plane does not
// start: ignoring it would let exactly what it is kept for (keys swapped
// in the data dir, a journal truncated and re-grown) pass.
func copyAnchor(path, verifier string, size int64) (*journal.Checkpoint, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("server: read the checkpoint copy: %w (fix its permissions, or start without --checkpoint-copy)", err)
	}
	defer f.Close()
	const tail = 64 << 10
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("server: read the checkpoint copy: %w", err)
	}
	buf := make([]byte, min(st.Size(), tail))
	if _, err := f.ReadAt(buf, st.Size()-int64(len(buf))); err != nil {
		return nil, fmt.Errorf("server: read the checkpoint copy: %w", err)
	}
	if len(bytes.TrimSpace(buf)) == 0 {
		return nil, nil // no checkpoint copied yet
	}
	lines := bytes.Split(bytes.TrimRight(buf, "\n"), []byte("\n"))
	var note string
	for k := len(lines) - 1; k >= 0 && k >= len(lines)-2; k-- { // the last line, or the one before a torn last line
		var line struct {
			Type string `json:"type"`
			Note string `json:"note"`
		}
		if json.Unmarshal(lines[k], &line) == nil && line.Type == "checkpoint" {
			note = line.Note
			break
		}
	}
	if note == "" {
		return nil, fmt.Errorf("%w: %s: its last lines are not checkpoints; check the file (`latch audit verify DATA_DIR --checkpoints %s`), or move it aside", ErrCheckpointCopy, path, path)
	}
	c, err := journal.OpenCheckpoint([]byte(note), verifier)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %s: its newest checkpoint does not verify with the journal's key (%v): the key in the data dir is not the one that signed it; run `latch audit verify DATA_DIR --checkpoints %s`; if the data dir was recreated on purpose, move the copy aside", ErrCheckpointCopy, path, err, path)
	case c.Size > size:
		return nil, fmt.Errorf("%w: %s: its newest checkpoint covers %d journal records, the store holds %d (truncated, or restored from an older backup); run `latch audit verify DATA_DIR --checkpoints %s`; after restoring a backup on purpose, move the copy aside", ErrCheckpointCopy, path, c.Size, size, path)
	}
	return c, nil
}

// watchTokens stops the control plane when a stored token disagreed with
// its journal record at its first use (tokens.Service checks each before
// it authenticates anybody; the token was refused).
func (s *Server) watchTokens(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-s.Tokens.Failed():
	}
	ms := s.Tokens.Mismatches()
	err := fmt.Errorf("%w: %d mismatch(es), first: %s; stopped serving from %s (the token was refused: it authenticated nobody); run `latch audit verify %s` to see every mismatch",
		ErrStateMismatch, len(ms), ms[0].String(), s.cfg.DataDir, s.cfg.DataDir)
	s.log.Error("a stored token disagrees with its journal record; it authenticated nobody; stopping", "mismatches", len(ms), "error", err)
	return err
}

// watchSessions stops the control plane when a session stored as
// authorized disagreed with its journal record when the session rule read
// it (the call waited for an operator instead of proceeding).
func (s *Server) watchSessions(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-s.Engine.SessionsFailed():
	}
	ms := s.Engine.SessionMismatches()
	err := fmt.Errorf("%w: %d mismatch(es), first: %s; stopped serving from %s (the session was not honoured: its call waits for an operator); run `latch audit verify %s` to see every mismatch",
		ErrStateMismatch, len(ms), ms[0].String(), s.cfg.DataDir, s.cfg.DataDir)
	s.log.Error("a stored agent session disagrees with its journal record; it was not honoured; stopping", "mismatches", len(ms), "error", err)
	return err
}

// backgroundChecks runs, while serving, the start-up gate's pass over the
// unsettled executions (if any), then the check of all state. A mismatch
// stops the control plane (Run returns the error).
func (s *Server) backgroundChecks(ctx context.Context) error {
	if s.gate != nil {
		if err := s.startupPass(ctx); err != nil || ctx.Err() != nil {
			return err
		}
	}
	return s.checkAllState(ctx)
}

// startupPass runs the gate's pass; it ends early when a gated read or
// update confirms a mismatch first.
func (s *Server) startupPass(ctx context.Context) error {
	type outcome struct {
		rep *store.StateReport
		err error
	}
	start := time.Now()
	res := make(chan outcome, 1)
	go func() {
		rep, err := s.gate.Run(ctx)
		res <- outcome{rep, err}
	}()
	var rep *store.StateReport
	select {
	case <-s.gate.Failed():
		rep = &store.StateReport{Scope: store.CheckUnsettled, Mismatches: s.gate.Mismatches()}
	case o := <-res:
		if ctx.Err() != nil {
			return nil
		}
		if o.err != nil {
			return fmt.Errorf("server: start-up check of the unsettled executions: %w", o.err)
		}
		rep = o.rep
	}
	if !rep.OK() {
		err := stopServing(s.cfg.DataDir, rep)
		s.log.Error("an unsettled execution disagrees with its journal; it was not acted on; stopping", "mismatches", len(rep.Mismatches), "error", err)
		return err
	}
	s.log.Info("start-up check: the unsettled executions agree with their journal", "executions", rep.Executions, "duration", time.Since(start))
	return nil
}

// checkAllState is the background check of all state after a large
// store's start-up. A mismatch stops the control plane (Run returns the
// error).
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

// stopServing is the error of a mismatch found while serving.
func stopServing(dataDir string, rep *store.StateReport) error {
	return fmt.Errorf("%w: %d mismatch(es), first: %s; stopped serving from %s (the executions that disagree were not acted on); run `latch audit verify %s` to see every mismatch by execution ID and journal record",
		ErrStateMismatch, len(rep.Mismatches), rep.Mismatches[0].String(), dataDir, dataDir)
}

func scopeName(s store.CheckScope) string {
	if s == store.CheckUnsettled {
		return "unsettled executions (a background pass checks the rest)"
	}
	return "all state"
}
