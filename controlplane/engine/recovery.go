package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/dueq"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Recovery scheduling
//
// Work on executions whose outcome is unknown lives in one due-time queue
// (dueq), one item per execution, ordered by when it is due and, among
// items due together, oldest accepted first. RecoveryConfig.Workers workers
// drain it, at most RecoveryConfig.PerTarget on one target at a time. The
// queue is fed by the start-up scan (every outcome_unknown, dispatched and
// authorized execution, page by page, oldest first) and by every transition
// into outcome_unknown (markUnknown calls Kick).
//
// After each round the worker reads the execution again: still
// outcome_unknown, it goes back in the queue at its NextRecoveryAt. A round
// that recorded nothing (its journal write or transition failed) is retried
// after a backoff that doubles per failed round, from MinBackoff to
// MaxBackoff, instead of at once.
//
// The backoff floor of an execution is the end of its last recovery round
// plus MinBackoff, where the end of the last round is the later of its
// record's updated_at (every recovery record and the transition into
// outcome_unknown set it) and the time this process last finished a round
// on it (which also covers rounds whose record failed to be written). No
// query of an execution starts before its floor. An attaching retry
// (Submit finding the execution outcome_unknown) calls hurry, which moves
// the execution's next query to the later of now and its floor when that is
// earlier than its NextRecoveryAt; it never moves a query later and never
// ahead of work that is already overdue. A query made before NextRecoveryAt
// does not consume a recovery attempt (recoverOne's counts).

// job is what a queued item asks a worker to do.
type job int

const (
	// jobRecover: query (or re-send, by replay class) an outcome_unknown
	// execution.
	jobRecover job = iota
	// jobOrphaned: found dispatched at start-up; nothing is sending it,
	// so it becomes outcome_unknown (never re-sent blindly), then recovered.
	jobOrphaned
	// jobDispatch: found authorized at start-up; nothing was sent
	// (dispatched is durable before the first byte), so it is dispatched.
	jobDispatch
)

// recoveryState is what recovery remembers of one execution between rounds,
// in memory only.
type recoveryState struct {
	lastRound time.Time // when this process last finished a round on it
	failures  int       // consecutive rounds that recorded nothing
}

// startPage is the page size of the start-up scan.
const startPage = 500

// Start queues what a previous run left uncertain and starts the recovery
// workers and the approvals expiry. It returns once the store has been
// scanned: the work itself runs in the workers. Executions left dispatched
// by a crash become outcome_unknown (never re-sent blindly) and are
// recovered like any other unknown; authorized ones are dispatched (nothing
// was sent: dispatched is durable before the first byte).
func (e *Engine) Start(ctx context.Context) error {
	now := e.cfg.Clock()
	var found [3]int // by job
	for _, scan := range []struct {
		state recordv1.State
		job   job
	}{
		{recordv1.State_STATE_OUTCOME_UNKNOWN, jobRecover},
		{recordv1.State_STATE_DISPATCHED, jobOrphaned},
		{recordv1.State_STATE_AUTHORIZED, jobDispatch},
	} {
		f := store.Filter{State: scan.state, Limit: startPage, OldestFirst: true}
		for {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("engine: start-up scan interrupted: %w", err)
			}
			xs, err := e.st.List(f)
			if err != nil {
				return fmt.Errorf("engine: start-up scan of %s executions: %w", lifecycle.Name(scan.state), err)
			}
			for _, x := range xs {
				if scan.job == jobRecover && x.GetObservation() != nil {
					continue // observe mode: never recovered (observemode.go)
				}
				due := now
				if scan.job == jobRecover {
					due = e.recoveryDue(x)
				}
				e.rq.Push(e.item(x, scan.job, due))
			}
			found[scan.job] += len(xs)
			if len(xs) < startPage {
				break
			}
			f.After = xs[len(xs)-1].GetId()
		}
	}
	if found != [3]int{} {
		e.log.Info("resuming executions the last run left unsettled",
			"outcome_unknown", found[jobRecover], "dispatched", found[jobOrphaned], "authorized", found[jobDispatch])
	}
	for range e.cfg.Recovery.Workers {
		e.wg.Go(e.recoveryWorker)
	}
	e.wg.Go(e.approvalsLoop)
	return nil
}

// Kick schedules an outcome_unknown execution's next recovery round at its
// NextRecoveryAt (never before its backoff floor). markUnknown calls it after
// each transition into outcome_unknown.
func (e *Engine) Kick(id string) {
	x, err := e.st.Execution(id)
	if err != nil {
		// Keep it queued all the same: the worker reads it again and
		// retries with backoff while the store cannot answer.
		e.log.Warn("recovery: cannot read execution to schedule it; retrying", "execution_id", id, "error", err)
		e.rq.Push(dueq.Item[job]{ID: id, Due: e.cfg.Clock().Add(e.cfg.Recovery.MinBackoff), Value: jobRecover})
		return
	}
	if x.GetState() == recordv1.State_STATE_OUTCOME_UNKNOWN {
		e.rq.Push(e.item(x, jobRecover, e.recoveryDue(x)))
	}
}

// hurry is an attaching retry's request for a fresh answer: it pulls the
// execution's next query to the later of now and its backoff floor (see
// Recovery scheduling above). Such a query does not consume an attempt.
func (e *Engine) hurry(x *recordv1.Execution) {
	if x.GetState() != recordv1.State_STATE_OUTCOME_UNKNOWN {
		return
	}
	due := e.cfg.Clock()
	if floor := e.floor(x); floor.After(due) {
		due = floor
	}
	e.rq.Pull(e.item(x, jobRecover, due))
}

// Close stops dispatch and recovery; executions in flight stay dispatched and
// are recovered at the next start.
func (e *Engine) Close() {
	e.cancel()
	e.wg.Wait()
}

func (e *Engine) item(x *recordv1.Execution, j job, due time.Time) dueq.Item[job] {
	return dueq.Item[job]{ID: x.GetId(), Group: x.GetTarget(), Due: due, Since: x.GetAcceptedAt().AsTime(), Value: j}
}

// floor is the earliest an execution may be queried again.
func (e *Engine) floor(x *recordv1.Execution) time.Time {
	last := x.GetUpdatedAt().AsTime()
	e.rstateMu.Lock()
	if s := e.rstate[x.GetId()]; s != nil && s.lastRound.After(last) {
		last = s.lastRound
	}
	e.rstateMu.Unlock()
	return last.Add(e.cfg.Recovery.MinBackoff)
}

// recoveryDue is when an outcome_unknown execution's next counted round is
// due: its NextRecoveryAt, never before its floor.
func (e *Engine) recoveryDue(x *recordv1.Execution) time.Time {
	due := e.floor(x)
	if next := x.GetNextRecoveryAt(); next != nil && next.AsTime().After(due) {
		due = next.AsTime()
	}
	return due
}

func (e *Engine) recoveryWorker() {
	for {
		it, err := e.rq.Take(e.ctx)
		if err != nil {
			return
		}
		e.work(it)
		e.rq.Done(it.ID)
	}
}

// work runs one round on a queued execution and queues the next one.
func (e *Engine) work(it dueq.Item[job]) {
	id := it.ID
	log := e.log.With("execution_id", id)
	x, err := e.st.Execution(id)
	if errors.Is(err, store.ErrNotFound) {
		e.forget(id)
		return
	}
	if err != nil {
		e.retry(it, "cannot read the execution", err)
		return
	}
	switch {
	case it.Value == jobOrphaned && x.GetState() == recordv1.State_STATE_DISPATCHED:
		log.Debug("execution was dispatched when the control plane stopped; recovering its outcome from the target")
		e.markUnknown(e.ctx, id, "the control plane stopped while the execution was dispatched")
	case it.Value == jobDispatch && x.GetState() == recordv1.State_STATE_AUTHORIZED:
		e.dispatch(e.ctx, id, nil)
	case x.GetObservation() != nil && x.GetState() == recordv1.State_STATE_OUTCOME_UNKNOWN:
		e.forget(id) // observe mode: never recovered (observemode.go)
		return
	case x.GetState() == recordv1.State_STATE_OUTCOME_UNKNOWN:
		now := e.cfg.Clock()
		counts := x.GetNextRecoveryAt() == nil || !now.Before(x.GetNextRecoveryAt().AsTime())
		e.recoverOne(e.ctx, x, counts)
		e.rstateMu.Lock()
		s := e.rstate[id]
		if s == nil {
			s = &recoveryState{}
			e.rstate[id] = s
		}
		s.lastRound = e.cfg.Clock()
		e.rstateMu.Unlock()
	default:
		e.forget(id) // settled or moved on by someone else
		return
	}
	if e.ctx.Err() != nil {
		return // shutting down: the next start scans it again
	}
	after, err := e.st.Execution(id)
	if err != nil {
		e.retry(it, "cannot read the execution after a recovery round", err)
		return
	}
	unchanged := after.GetJournalIndex() == x.GetJournalIndex() && after.GetState() == x.GetState()
	switch {
	case unchanged && it.Value == jobOrphaned:
		// markUnknown failed and queued the retry itself (orphan).
	case unchanged && e.waitsForVault(id):
		// Its sealed secret arguments wait for the vault: ResumeSealed
		// takes it up at unlock (secrets.go).
		e.forget(id)
	case unchanged:
		e.retry(e.item(after, it.Value, it.Due), "the round recorded nothing (its error is logged above)", nil)
	case after.GetState() == recordv1.State_STATE_OUTCOME_UNKNOWN:
		e.succeeded(id)
		e.rq.Push(e.item(after, jobRecover, e.recoveryDue(after)))
	case after.GetState() == recordv1.State_STATE_DISPATCHED:
		// The dispatch ended without recording its outcome (markUnknown
		// failed and queued the retry itself).
	default:
		e.forget(id)
	}
}

// orphan queues, for later, an execution that nothing is working on any
// more because a step of its dispatch could not be recorded: a dispatched one
// (its completion, its outcome_unknown or its failed send was not recorded)
// goes to outcome_unknown, then recovery, which asks the target; an
// authorized one (its failed send was recorded, its next dispatch was not) is
// dispatched again. Either would otherwise wait for the next start. Found by
// the simulator (controlplane/sim): a commit that failed while a refused send
// was recorded left the execution dispatched for good.
func (e *Engine) orphan(id string) {
	if e.ctx.Err() != nil {
		return // shutting down: the next start scans it
	}
	x, err := e.st.Execution(id)
	if err != nil {
		return // unreadable: the next start finds it
	}
	switch x.GetState() {
	case recordv1.State_STATE_DISPATCHED:
		e.retry(e.item(x, jobOrphaned, e.cfg.Clock()), "its dispatch ended but the step after it was not recorded", nil)
	case recordv1.State_STATE_AUTHORIZED:
		e.retry(e.item(x, jobDispatch, e.cfg.Clock()), "its next dispatch could not be recorded", nil)
	}
}

// retry queues an item again after a backoff that grows with each
// consecutive failed round of the execution.
func (e *Engine) retry(it dueq.Item[job], what string, err error) {
	e.rstateMu.Lock()
	s := e.rstate[it.ID]
	if s == nil {
		s = &recoveryState{}
		e.rstate[it.ID] = s
	}
	s.failures++
	n := s.failures
	e.rstateMu.Unlock()
	wait := e.recoveryRetry.Backoff(n) // unbounded: a failed round used up nothing
	due := e.cfg.Clock().Add(wait)
	if it.Due.After(due) {
		due = it.Due
	}
	it.Due = due
	e.log.Warn("recovery: "+what+"; retrying", "execution_id", it.ID, "failed_rounds", n, "retry_in", wait, "error", err)
	e.rq.Push(it)
}

func (e *Engine) succeeded(id string) {
	e.rstateMu.Lock()
	if s := e.rstate[id]; s != nil {
		s.failures = 0
	}
	e.rstateMu.Unlock()
}

func (e *Engine) forget(id string) {
	e.rstateMu.Lock()
	delete(e.rstate, id)
	e.rstateMu.Unlock()
}

// approvalsLoop rejects expired approvals every Interval.
func (e *Engine) approvalsLoop() {
	t := time.NewTicker(e.cfg.Recovery.Interval)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
			e.expireApprovals(e.ctx)
		}
	}
}

// recoverOne tries once to settle an outcome_unknown execution from evidence,
// by the tool's replay class. Every attempt is journaled with what it saw and
// why it did or did not count as evidence; whenever the execution stays
// outcome_unknown, NextRecoveryAt says when to ask again. counts is false for
// a query made before the execution was due (pulled by an attaching retry):
// it does not consume a recovery attempt.
func (e *Engine) recoverOne(ctx context.Context, x *recordv1.Execution, counts bool) {
	if x.GetState() != recordv1.State_STATE_OUTCOME_UNKNOWN || x.GetObservation() != nil {
		return // an observed execution is never recovered (observemode.go)
	}
	id := x.GetId()
	log := e.log.With("execution_id", id)
	review := func(reason string) {
		e.dropSecrets(id)
		if _, err := e.transition(ctx, id, recordv1.State_STATE_NEEDS_REVIEW, recordv1.EntryKind_ENTRY_KIND_RECOVERY, reason, requireState(recordv1.State_STATE_OUTCOME_UNKNOWN)); err != nil {
			log.Debug("recovery: not moved to needs_review", "error", err)
		}
	}
	if e.recoveryRetry.Exhausted(int(x.GetRecoveryAttempts())) {
		review(fmt.Sprintf("recovery gave up after %d attempts; an operator decides (latch exec resolve)", x.GetRecoveryAttempts()))
		return
	}
	ch, c, err := e.call(x)
	if errors.Is(err, errSecretsLocked) {
		// Waits, not reviewed: ResumeSealed kicks it at unlock.
		e.noEvidence(ctx, x, "waiting for the vault to be unlocked: "+err.Error(), e.cfg.Clock().Add(sealWait), false)
		return
	}
	if err != nil {
		review("cannot ask the target: " + err.Error())
		return
	}
	c.Recovery = true
	var a Attempt
	asked := e.cfg.Clock()
	switch c.Tool.Replay {
	case tools.ReplayReview:
		review("outcome unknown and the tool's replay class is review: an operator decides (latch exec resolve)")
		return
	case tools.ReplayStatusQuery:
		qctx, observed := e.observe(ctx, AttemptQuery, c)
		a = ch.Query(qctx, c)
		observed(a)
	default: // idempotency_key, read_only: re-send under the same execution ID
		// The send time is durable before the first byte, like a dispatch:
		// the evidence rule counts from the latest send.
		sent, err := e.journalIf(ctx, x, recordv1.EntryKind_ENTRY_KIND_RECOVERY_REPLAY, "re-sending under the same execution ID, which the target's idempotency makes the same request", func(cur *recordv1.Execution) error {
			if err := requireState(recordv1.State_STATE_OUTCOME_UNKNOWN)(cur); err != nil {
				return err // settled meanwhile (an operator, another query): nothing to re-send
			}
			cur.LastSentAt = timestamppb.New(asked)
			return nil
		})
		if err != nil {
			log.Debug("recovery: not re-sending", "error", err)
			return
		}
		c.Execution = sent
		c.RecordTask = e.taskRecorder(ctx, id)
		rctx, observed := e.observe(ctx, AttemptReplay, c)
		a = e.send(rctx, ch, c)
		observed(a)
	}
	if a.Class != Observed {
		a = e.redactAttempt(x, a) // its reason is journaled below; complete redacts the rest
	}
	switch a.Class {
	case Observed:
		// Kept when the engine is closing, like a dispatch's answer.
		e.complete(context.WithoutCancel(ctx), id, a, recordv1.EntryKind_ENTRY_KIND_RECOVERY)
		e.dropSecrets(id) // after complete: it redacts them from the result
		log.Info("recovered outcome from the target", "replay", c.Tool.Replay)
	case Absent:
		ev := absence(c.Execution, c, a, asked)
		if !ev.counts {
			e.noEvidence(ctx, x, ev.reason, ev.settleAt, false) // an early absence never uses up an attempt
			return
		}
		e.forgetSecrets(ctx, id)
		if _, err := e.transition(ctx, id, recordv1.State_STATE_NOT_EXECUTED, recordv1.EntryKind_ENTRY_KIND_RECOVERY, ev.reason, requireState(recordv1.State_STATE_OUTCOME_UNKNOWN)); err != nil {
			log.Debug("recovery: not moved to not_executed", "error", err)
		}
	case Unsupported:
		review("the target cannot be asked: " + a.Reason)
	default:
		e.noEvidence(ctx, x, "no evidence yet: "+a.Reason, time.Time{}, counts)
	}
}
