package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// The start-up check, streamed.
//
// CheckUnsettled checks every execution the control plane acts on at
// start-up before it serves; at 100,000 unsettled executions that is
// seconds. A StartupGate does the same check while the control plane
// serves, without letting it act on anything unchecked first:
//
//   - Run, the pass, walks the state index of every state CheckUnsettled
//     covers and checks each execution it lists (record, history, result
//     against the journal, confirmed in the writer like Verified, and the
//     index against the record), as CheckUnsettled does;
//   - until the pass is done, every read that can lead to acting on an
//     execution checks it first when its record is in such a state and
//     neither the pass nor an earlier read has cleared it: Tx.Execution
//     (every update that changes an execution reads it this way; the check
//     uses the update's consistent view, so a mismatch is certain) and
//     Store.Execution (what the recovery worker reads before it asks a
//     target; a mismatch seen outside the writer may be a commit landing
//     between two reads, so the read fails and the pass confirms).
//
// A confirmed mismatch closes Failed and is kept in Mismatches: the caller
// stops serving. When the pass has cleared everything, the gate removes
// itself and reads cost what they did before. Listings (List,
// SessionExecutions) are not gated: they answer, they do not act.
type StartupGate struct {
	s *Store

	mu         sync.Mutex
	cleared    map[string]struct{}
	mismatches []Mismatch
	failed     chan struct{}
	failOnce   sync.Once
	done       chan struct{}
	doneOnce   sync.Once
}

// startupChecked reports whether the start-up check covers executions in
// state st: every state not settled, and not_executed (which may be
// dispatched again).
func startupChecked(st recordv1.State) bool {
	return st != recordv1.State_STATE_UNSPECIFIED && (!lifecycle.Settled(st) || st == recordv1.State_STATE_NOT_EXECUTED)
}

// OpenStartupGate installs a gate on s (see StartupGate) and returns it;
// the caller runs its pass (Run). Opening a second one replaces the first.
func (s *Store) OpenStartupGate() *StartupGate {
	g := &StartupGate{s: s, cleared: map[string]struct{}{}, failed: make(chan struct{}), done: make(chan struct{})}
	s.gate.Store(g)
	return g
}

// StartupGateOpen reports whether a start-up gate is open.
func (s *Store) StartupGateOpen() bool { return s.gate.Load() != nil }

// Failed is closed at the first confirmed mismatch.
func (g *StartupGate) Failed() <-chan struct{} { return g.failed }

// Done is closed when the pass has ended (Run returned).
func (g *StartupGate) Done() <-chan struct{} { return g.done }

// Mismatches returns the confirmed mismatches found so far.
func (g *StartupGate) Mismatches() []Mismatch {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Mismatch(nil), g.mismatches...)
}

func (g *StartupGate) isCleared(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.cleared[id]
	return ok
}

func (g *StartupGate) clear(id string) {
	g.mu.Lock()
	g.cleared[id] = struct{}{}
	g.mu.Unlock()
}

func (g *StartupGate) fail(ms []Mismatch) {
	g.mu.Lock()
	g.mismatches = append(g.mismatches, ms...)
	g.mu.Unlock()
	g.failOnce.Do(func() { close(g.failed) })
}

// admitRead checks x, read outside the writer, unless cleared. A mismatch
// fails the read but is not confirmed here (the pass confirms it).
func (g *StartupGate) admitRead(id string, x *recordv1.Execution) error {
	if !startupChecked(x.GetState()) || g.isCleared(id) {
		return nil
	}
	ms, _ := checkOne(g.s.kv.Get, id, x)
	if len(ms) == 0 {
		g.clear(id)
		return nil
	}
	// Not confirmed here: the caller may be inside an update, where asking
	// the writer would wait for itself. The pass confirms it.
	return fmt.Errorf("store: %s is not yet cleared by the start-up check (%w)", id, stateErr(ms))
}

// admitTx checks x as an update sees it, unless cleared; a mismatch there
// is certain.
func (g *StartupGate) admitTx(get func([]byte) ([]byte, error), id string, x *recordv1.Execution) error {
	if !startupChecked(x.GetState()) || g.isCleared(id) {
		return nil
	}
	ms, _ := checkOne(get, id, x)
	if len(ms) > 0 {
		g.fail(ms)
		return stateErr(ms)
	}
	g.clear(id)
	return nil
}

// Run is the pass: it checks every execution the state index lists in a
// state the start-up check covers, then removes the gate. Its report
// counts the executions checked and holds every confirmed mismatch (those
// found by gated reads too). An error means the pass could not read the
// store (or ctx ended); the gate then stays, and every gated read keeps
// checking.
func (g *StartupGate) Run(ctx context.Context) (*StateReport, error) {
	defer g.doneOnce.Do(func() { close(g.done) })
	s := g.s
	rep := &StateReport{Scope: CheckUnsettled}
	for st := range recordv1.State_name {
		state := recordv1.State(st)
		if !startupChecked(state) {
			continue
		}
		prefix := []byte("s/" + strconv.Itoa(int(state)) + "/")
		var ids []string
		if err := s.kv.Scan(prefix, false, func(k, _ []byte) bool {
			ids = append(ids, string(k[len(prefix):]))
			return ctx.Err() == nil
		}); err != nil {
			return nil, fmt.Errorf("store: start-up check: %w", err)
		}
		for _, id := range ids {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			rep.Executions++
			if g.isCleared(id) {
				continue
			}
			ms, err := g.checkListedFast(state, id)
			if err != nil {
				return nil, fmt.Errorf("store: start-up check of %s: %w", id, err)
			}
			if len(ms) > 0 {
				g.fail(ms)
				continue
			}
			g.clear(id)
		}
	}
	rep.Mismatches = g.Mismatches()
	if len(rep.Mismatches) == 0 {
		s.gate.CompareAndSwap(g, nil)
	}
	return rep, nil
}

// checkListedFast checks one execution the state index lists as state
// with plain reads; only a disagreement is checked again in the writer
// (checkListed), since a commit can land between two plain reads.
func (g *StartupGate) checkListedFast(state recordv1.State, id string) ([]Mismatch, error) {
	x, err := decodeExecution(g.s.kv.Get(execKey(id)))
	if err == nil && x.GetState() == state {
		if ms, _ := checkOne(g.s.kv.Get, id, x); len(ms) == 0 {
			return nil, nil
		}
	}
	return g.checkListed(state, id)
}

// checkListed checks one execution the state index lists as state, on the
// writer's consistent view (a read-only update: no commit, no sync), so
// that a store being written cannot produce a mismatch that is not there.
func (g *StartupGate) checkListed(state recordv1.State, id string) ([]Mismatch, error) {
	var ms []Mismatch
	err := g.s.Update(context.Background(), func(tx *Tx) error {
		ms = nil
		v, err := tx.get(execKey(id))
		if errors.Is(err, ErrNotFound) {
			if _, ierr := tx.get(stateKey(state, id)); ierr == nil {
				ms = []Mismatch{{ExecutionID: id, JournalIndex: -1, Key: "x/" + id, Kind: MismatchMissing,
					Detail: "the state index lists this execution as " + lifecycle.Name(state) + " but its record is gone"}}
			}
			return nil
		}
		if err != nil {
			return err
		}
		x, err := decodeExecution(v, nil)
		if err != nil {
			ms = []Mismatch{{ExecutionID: id, JournalIndex: -1, Key: "x/" + id, Kind: MismatchRecord, Detail: err.Error()}}
			return nil
		}
		if x.GetState() != state {
			// Moved on since the index was scanned, unless the index
			// still lists it as state.
			if _, ierr := tx.get(stateKey(state, id)); ierr == nil {
				ms = append(ms, Mismatch{ExecutionID: id, JournalIndex: int64(x.GetJournalIndex()), Key: "s/" + id, Kind: MismatchRecord,
					Detail: "the state index says " + lifecycle.Name(state) + ", the record says " + lifecycle.Name(x.GetState())})
			}
		}
		more, _ := checkOne(tx.get, id, x)
		ms = append(ms, more...)
		return nil
	})
	if errors.Is(err, ErrClosed) {
		return nil, err
	}
	return ms, err
}
