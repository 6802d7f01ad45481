package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func requireState(want ...recordv1.State) func(*recordv1.Execution) error {
	return func(x *recordv1.Execution) error {
		for _, s := range want {
			if x.GetState() == s {
				return nil
			}
		}
		return refuse(ErrNotResolvable, "%s is %s", x.GetId(), lifecycle.Name(x.GetState()))
	}
}

func (e *Engine) startDispatch(id string) { e.startSend(id, nil) }

// startSend runs dispatch in the background. dispatched, when set, is an
// execution its caller has just recorded as dispatched: it is sent at once.
func (e *Engine) startSend(id string, dispatched *recordv1.Execution) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.dispatch(e.ctx, id, dispatched)
	}()
}

// call assembles what a channel needs for an execution.
func (e *Engine) call(x *recordv1.Execution) (Channel, Call, error) {
	tool, ok := e.Catalog().Tools[x.GetTool()]
	if !ok {
		return nil, Call{}, fmt.Errorf("tool %s is no longer in the catalog", x.GetTool())
	}
	target := e.Catalog().Targets[tool.Target]
	ch := e.cfg.Channels[target.Channel]
	if ch == nil {
		return nil, Call{}, fmt.Errorf("no %s channel is configured in this control plane", target.Channel)
	}
	e.secretsMu.Lock()
	args, inMemory := e.secrets[x.GetId()]
	e.secretsMu.Unlock()
	if !inMemory {
		if len(tool.Fingerprint.Secret) > 0 {
			var err error
			if args, err = e.unsealArguments(x); err != nil {
				return nil, Call{}, err
			}
		} else if err := json.Unmarshal(x.GetArguments(), &args); err != nil {
			return nil, Call{}, fmt.Errorf("stored arguments do not decode: %v", err)
		}
	}
	return ch, Call{Execution: x, Tool: tool, Target: target, Arguments: args}, nil
}

func (e *Engine) dropSecrets(id string) {
	e.secretsMu.Lock()
	delete(e.secrets, id)
	e.secretsMu.Unlock()
}

// dispatch runs one execution from authorized to an observed or uncertain
// outcome. Each step is durable before the next. A send that provably left
// nothing at the target returns the execution to authorized and is tried
// again (bounded by MaxDispatches); only the last such failure is
// not_executed.
func (e *Engine) dispatch(ctx context.Context, id string, dispatched *recordv1.Execution) {
	log := e.log.With("execution_id", id)
	for {
		x := dispatched
		dispatched = nil
		if x == nil {
			var err error
			if x, err = e.st.Execution(id); err != nil {
				log.Error("dispatch: cannot load execution", "error", err)
				return
			}
		}
		ch, c, err := e.call(x)
		if errors.Is(err, errSecretsLocked) {
			log.Info("dispatch waits for the vault: the execution's secret arguments are sealed with its key (latch vault unlock)")
			return
		}
		if err != nil {
			log.Warn("dispatch: cannot build the call", "error", err)
			switch x.GetState() {
			case recordv1.State_STATE_AUTHORIZED:
				e.transition(ctx, id, recordv1.State_STATE_CANCELLED, recordv1.EntryKind_ENTRY_KIND_TRANSITION, "not dispatched: "+err.Error(), nil) //nolint:errcheck // the state says it
			case recordv1.State_STATE_DISPATCHED:
				e.transition(ctx, id, recordv1.State_STATE_NOT_EXECUTED, recordv1.EntryKind_ENTRY_KIND_TRANSITION, "nothing was sent: "+err.Error(), nil) //nolint:errcheck // the state says it
			}
			return
		}
		if x.GetState() != recordv1.State_STATE_DISPATCHED {
			x, err = e.transition(ctx, id, recordv1.State_STATE_DISPATCHED, recordv1.EntryKind_ENTRY_KIND_TRANSITION, fmt.Sprintf("dispatch attempt %d", x.GetAttempts()+1),
				requireState(recordv1.State_STATE_AUTHORIZED))
			if err != nil {
				log.Debug("dispatch: not dispatching", "error", err)
				if !errors.Is(err, ErrNotResolvable) {
					e.orphan(id) // the commit failed: dispatched again later
				}
				return
			}
		}
		c.Execution = x
		c.RecordTask = e.taskRecorder(ctx, id)
		actx, observed := e.observe(ctx, AttemptDispatch, c)
		a := e.send(actx, ch, c)
		observed(a)
		if a.Class != Observed {
			a = e.redactAttempt(x, a) // its reason is journaled below; complete redacts the rest
		}
		if ctx.Err() != nil && a.Class != Observed {
			// Shutting down mid-dispatch: leave it dispatched; start-up
			// recovery will ask the target.
			return
		}
		switch a.Class {
		case Observed:
			// The answer is recorded even when the engine is closing (ctx
			// cancelled): Close waits for this goroutine and the store
			// outlives the engine. Dropping it would leave the execution
			// dispatched for start-up recovery to ask the target again,
			// and a target that cannot be asked would need a person.
			e.complete(context.WithoutCancel(ctx), id, a, recordv1.EntryKind_ENTRY_KIND_TRANSITION)
			e.dropSecrets(id) // after complete: it redacts them from the result
			return
		case NotSent:
			if a.Final || e.dispatchRetry.Exhausted(int(x.GetAttempts())) {
				if _, err := e.transition(ctx, id, recordv1.State_STATE_NOT_EXECUTED, recordv1.EntryKind_ENTRY_KIND_TRANSITION, "nothing was sent: "+a.Reason, nil); err != nil {
					log.Error("dispatch: cannot record not_executed", "error", err)
					e.orphan(id)
					return
				}
				e.forgetSecrets(ctx, id)
				log.Info("execution not executed; dispatch attempts exhausted", "attempts", x.GetAttempts(), "reason", a.Reason)
				return
			}
			// Attempts are left: the execution goes back to authorized, not
			// to not_executed. not_executed tells a retrying agent that a
			// new call is safe, so it must be final: a retry that arrived
			// while this one waits to be sent again would otherwise become
			// a second execution, and both would be sent. An authorized
			// execution is one a retry attaches to, and start-up dispatches
			// it if the control plane stops meanwhile.
			x, err = e.transition(ctx, id, recordv1.State_STATE_AUTHORIZED, recordv1.EntryKind_ENTRY_KIND_TRANSITION,
				fmt.Sprintf("nothing was sent: %s; dispatching again (attempt %d of %d)", a.Reason, x.GetAttempts()+1, e.dispatchRetry.Limit),
				requireState(recordv1.State_STATE_DISPATCHED))
			if err != nil {
				log.Error("dispatch: cannot record the failed send", "error", err)
				if !errors.Is(err, ErrNotResolvable) {
					e.orphan(id) // the commit failed: recovered from the target later
				}
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(e.dispatchRetry.BackoffOf(id, int(x.GetAttempts()))):
			}
		default:
			// Secrets stay in memory: a replay under the same key must
			// carry the same payload.
			e.markUnknown(ctx, id, a.Reason)
			return
		}
	}
}

// send dispatches c through ch, telling the channel how late it starts
// (Call.Delay): the settle point counts from the send time recorded before
// it, and the commit that recorded it took a while. Found by the simulator
// (controlplane/sim -sim.slow): after a 25 s commit an HTTP request was still
// in flight after the settle point, and recovery took its absence as proof.
func (e *Engine) send(ctx context.Context, ch Channel, c Call) Attempt {
	if last, ok := lastSent(c.Execution); ok {
		c.Delay = max(0, e.cfg.Clock().Sub(last))
	}
	return ch.Dispatch(ctx, c)
}

func (e *Engine) markUnknown(ctx context.Context, id, reason string) {
	now := e.cfg.Clock()
	observed := false
	_, err := e.transition(ctx, id, recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.EntryKind_ENTRY_KIND_TRANSITION, "outcome unknown: "+reason, func(x *recordv1.Execution) error {
		if obs := x.GetObservation(); obs != nil {
			// Observe mode: held as uncertain on paper only; nothing
			// recovers it (observemode.go).
			observed, obs.WouldHoldUncertain = true, true
			return nil
		}
		x.NextRecoveryAt = timestamppb.New(now.Add(e.cfg.Recovery.MinBackoff))
		return nil
	})
	if err != nil {
		e.log.Error("cannot record outcome_unknown", "execution_id", id, "error", err)
		e.orphan(id)
		return
	}
	if observed {
		e.dropSecrets(id)
		return
	}
	e.Kick(id)
}

// complete stores the observed result and moves the execution to completed.
func (e *Engine) complete(ctx context.Context, id string, a Attempt, kind recordv1.EntryKind) {
	now := e.cfg.Clock()
	err := e.st.Update(ctx, func(tx *store.Tx) error {
		x, err := tx.Execution(id)
		if err != nil {
			return err
		}
		a := e.redactAttempt(x, a) // secret argument values never stored (redact.go)
		if a.Result != nil {
			sum, err := tx.PutResult(id, a.Result)
			if err != nil {
				return err
			}
			x.ResultRef, x.ResultSha256 = store.ResultRef(sum), sum
			x.TargetStatus = targetStatus(a.Result)
			x.Answer = lifecycle.AnswerOf(a.Result)
		}
		x.Outcome = a.Outcome
		return e.step(tx, x, recordv1.State_STATE_COMPLETED, now, kind, "target answered: "+a.Reason, false)
	})
	if err != nil {
		// Nothing sends it any more: without a retry it would stay
		// dispatched until the next start (a lost database connection
		// while this replica stays active). Recovery asks the target.
		e.log.Error("cannot record completion; recovering the outcome from the target", "execution_id", id, "error", err)
		e.orphan(id)
	}
}

// targetStatus is the execution's target_status for an observed answer: the
// exit status when a process ran, else the protocol status the channel
// recorded (0 when its answers have neither).
func targetStatus(r *recordv1.Result) int32 {
	if r.GetExited() {
		return r.GetExitCode()
	}
	return r.GetStatus()
}
