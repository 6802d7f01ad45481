package engine

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Start reconciles what a previous run left uncertain and starts the
// recovery worker. Executions left in dispatched by a crash become
// outcome_unknown (never re-sent blindly) and are recovered like any other
// unknown; authorized ones are dispatched (nothing was sent: dispatched is
// durable before the first byte).
func (e *Engine) Start(ctx context.Context) error {
	for _, st := range []recordv1.State{recordv1.State_STATE_DISPATCHED, recordv1.State_STATE_AUTHORIZED} {
		for {
			xs, err := e.st.List(store.Filter{State: st, Limit: 500})
			if err != nil {
				return fmt.Errorf("engine: start-up scan: %w", err)
			}
			for _, x := range xs {
				if st == recordv1.State_STATE_DISPATCHED {
					e.log.Info("execution was dispatched when the control plane stopped; recovering its outcome from the target", "execution_id", x.GetId())
					e.markUnknown(ctx, x.GetId(), "the control plane stopped while the execution was dispatched")
				} else {
					e.startDispatch(x.GetId())
				}
			}
			if len(xs) < 500 || st == recordv1.State_STATE_AUTHORIZED {
				break
			}
		}
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.recoveryLoop()
	}()
	return nil
}

// Kick asks the recovery worker to look at one execution now.
func (e *Engine) Kick(id string) {
	select {
	case e.kick <- id:
	default:
	}
}

// Close stops dispatch and recovery; executions in flight stay dispatched and
// are recovered at the next start.
func (e *Engine) Close() {
	e.cancel()
	e.wg.Wait()
}

func (e *Engine) recoveryLoop() {
	t := time.NewTicker(e.cfg.Recovery.Interval)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case id := <-e.kick:
			if x, err := e.st.Execution(id); err == nil {
				e.recoverOne(e.ctx, x)
			}
		case <-t.C:
			xs, err := e.st.List(store.Filter{State: recordv1.State_STATE_OUTCOME_UNKNOWN, Limit: 1000})
			if err != nil {
				e.log.Error("recovery scan failed", "error", err)
				continue
			}
			e.expireApprovals(e.ctx)
			now := e.cfg.Clock()
			for _, x := range xs {
				if e.ctx.Err() != nil {
					return
				}
				if next := x.GetNextRecoveryAt(); next == nil || !next.AsTime().After(now) {
					e.recoverOne(e.ctx, x)
				}
			}
		}
	}
}

// recoverOne tries once to settle an outcome_unknown execution from evidence,
// by the tool's replay class. Every attempt is journaled with what it saw and
// why it did or did not count as evidence; whenever the execution stays
// outcome_unknown, NextRecoveryAt says when to ask again.
func (e *Engine) recoverOne(ctx context.Context, x *recordv1.Execution) {
	if x.GetState() != recordv1.State_STATE_OUTCOME_UNKNOWN {
		return
	}
	id := x.GetId()
	log := e.log.With("execution_id", id)
	review := func(reason string) {
		e.dropSecrets(id)
		if _, err := e.transition(ctx, id, recordv1.State_STATE_NEEDS_REVIEW, "recovery", reason, requireState(recordv1.State_STATE_OUTCOME_UNKNOWN)); err != nil {
			log.Debug("recovery: not moved to needs_review", "error", err)
		}
	}
	if int(x.GetRecoveryAttempts()) >= e.cfg.Recovery.MaxAttempts {
		review(fmt.Sprintf("recovery gave up after %d attempts; an operator decides (latch exec resolve)", x.GetRecoveryAttempts()))
		return
	}
	ch, c, err := e.call(x)
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
		sent, err := e.journalIf(ctx, x, "recovery_replay", "re-sending under the same execution ID, which the target's idempotency makes the same request", func(cur *recordv1.Execution) error {
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
		rctx, observed := e.observe(ctx, AttemptReplay, c)
		a = ch.Dispatch(rctx, c)
		observed(a)
	}
	switch a.Class {
	case Observed:
		e.dropSecrets(id)
		e.complete(ctx, id, a, "recovery")
		log.Info("recovered outcome from the target", "replay", c.Tool.Replay)
	case Absent:
		ev := absence(c.Execution, c, a, asked)
		if !ev.counts {
			e.noEvidence(ctx, x, ev.reason, ev.settleAt, false) // an early absence never uses up an attempt
			return
		}
		e.dropSecrets(id)
		if _, err := e.transition(ctx, id, recordv1.State_STATE_NOT_EXECUTED, "recovery", ev.reason, requireState(recordv1.State_STATE_OUTCOME_UNKNOWN)); err != nil {
			log.Debug("recovery: not moved to not_executed", "error", err)
		}
	case Unsupported:
		review("the target cannot be asked: " + a.Reason)
	default:
		e.noEvidence(ctx, x, "no evidence yet: "+a.Reason, time.Time{}, true)
	}
}
