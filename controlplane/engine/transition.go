package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/transition"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// step moves x to state `to` inside tx: it checks the transition, stamps the
// timestamp that belongs to the state, stores the execution and appends the
// journal record. x is modified in place. A reason no program branches on
// is recorded as REASON_CODE_OTHER (stepCode records another).
func (e *Engine) step(tx *store.Tx, x *recordv1.Execution, to recordv1.State, now time.Time, kind recordv1.EntryKind, reason string, index bool) error {
	return e.stepCode(tx, x, to, now, kind, recordv1.ReasonCode_REASON_CODE_OTHER, reason, index)
}

// stepCode is step with the code of its reason: the execution and its
// journal record carry it with the reason, so readers branch on the code,
// never on the reason's text.
func (e *Engine) stepCode(tx *store.Tx, x *recordv1.Execution, to recordv1.State, now time.Time, kind recordv1.EntryKind, code recordv1.ReasonCode, reason string, index bool) error {
	if err := transition.Check(x.GetState(), to); err != nil {
		return err
	}
	from := x.GetState()
	ts := timestamppb.New(now)
	switch to {
	case recordv1.State_STATE_AUTHORIZED:
		if x.AuthorizedAt == nil { // back from a send that reached nothing: authorized when first authorized
			x.AuthorizedAt = ts
		}
	case recordv1.State_STATE_DISPATCHED:
		if x.DispatchedAt == nil {
			x.DispatchedAt = ts
		}
		x.LastSentAt = ts // the evidence rule counts from the latest send
		x.Attempts++
	case recordv1.State_STATE_COMPLETED:
		x.CompletedAt = ts
	case recordv1.State_STATE_DELIVERED:
		x.DeliveredAt = ts
		x.Delivery = recordv1.Delivery_DELIVERY_DELIVERED
	}
	x.State = to
	x.UpdatedAt = ts
	if sealedGone(to) && e.cfg.Sealer != nil && e.hasSecrets(x) {
		tx.DeleteSealedArguments(x.GetId()) // nothing will send it again (secrets.go)
	}
	entryCode := recordv1.ReasonCode_REASON_CODE_UNSPECIFIED
	if reason != "" {
		x.Reason, x.ReasonCode, entryCode = reason, code, code
	}
	idx, err := appendJournaled(tx, &recordv1.JournalEntry{
		Time: ts, ExecutionId: x.GetId(), From: from, To: to, EntryKind: kind,
		Reason: reason, ReasonCode: entryCode, Actor: x.GetActor(), Execution: x,
	})
	if err != nil {
		return err
	}
	x.JournalIndex = uint64(idx)
	return tx.PutExecution(x, index)
}

// transition loads an execution, lets mutate check and change it, and moves
// it to `to` durably. mutate may return an error to refuse.
func (e *Engine) transition(ctx context.Context, id string, to recordv1.State, kind recordv1.EntryKind, reason string, mutate func(x *recordv1.Execution) error) (*recordv1.Execution, error) {
	return e.transitionVia(ctx, e.st.Update, id, to, kind, recordv1.ReasonCode_REASON_CODE_OTHER, reason, mutate)
}

// transitionCode is transition with the code of its reason (stepCode).
func (e *Engine) transitionCode(ctx context.Context, id string, to recordv1.State, kind recordv1.EntryKind, code recordv1.ReasonCode, reason string, mutate func(x *recordv1.Execution) error) (*recordv1.Execution, error) {
	return e.transitionVia(ctx, e.st.Update, id, to, kind, code, reason, mutate)
}

// transitionVia is transition committed through update (Store.Update, or
// Store.UpdateLazy for a record nothing waits on).
func (e *Engine) transitionVia(ctx context.Context, update func(context.Context, func(*store.Tx) error) error, id string, to recordv1.State, kind recordv1.EntryKind, code recordv1.ReasonCode, reason string, mutate func(x *recordv1.Execution) error) (*recordv1.Execution, error) {
	var out *recordv1.Execution
	now := e.cfg.Clock()
	err := update(ctx, func(tx *store.Tx) error {
		x, err := tx.Execution(id)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		if err != nil {
			return err
		}
		if mutate != nil {
			if err := mutate(x); err != nil {
				return err
			}
		}
		if err := e.stepCode(tx, x, to, now, kind, code, reason, false); err != nil {
			return err
		}
		out = x
		return nil
	})
	if errors.Is(err, store.ErrClosed) {
		return nil, ErrClosed
	}
	return out, err
}

// journal appends a non-transition record (recovery attempt, evidence).
func (e *Engine) journal(ctx context.Context, x *recordv1.Execution, kind recordv1.EntryKind, reason string, mutate func(x *recordv1.Execution)) (*recordv1.Execution, error) {
	return e.journalIf(ctx, x, kind, reason, func(cur *recordv1.Execution) error {
		if mutate != nil {
			mutate(cur)
		}
		return nil
	})
}

// journalIf is journal whose mutate may refuse (nothing is written then).
func (e *Engine) journalIf(ctx context.Context, x *recordv1.Execution, kind recordv1.EntryKind, reason string, mutate func(x *recordv1.Execution) error) (*recordv1.Execution, error) {
	return e.journalIfVia(ctx, e.st.Update, x, kind, reason, mutate)
}

// journalIfVia is journalIf committed through update (Store.Update, or
// Store.UpdateLazy for a record nothing waits on).
func (e *Engine) journalIfVia(ctx context.Context, update func(context.Context, func(*store.Tx) error) error, x *recordv1.Execution, kind recordv1.EntryKind, reason string, mutate func(x *recordv1.Execution) error) (*recordv1.Execution, error) {
	var out *recordv1.Execution
	now := e.cfg.Clock()
	err := update(ctx, func(tx *store.Tx) error {
		cur, err := tx.Execution(x.GetId())
		if err != nil {
			return err
		}
		if err := mutate(cur); err != nil {
			return err
		}
		cur.UpdatedAt = timestamppb.New(now)
		idx, err := appendJournaled(tx, &recordv1.JournalEntry{
			Time: timestamppb.New(now), ExecutionId: cur.GetId(), From: cur.GetState(), To: cur.GetState(),
			EntryKind: kind, Reason: reason, Actor: cur.GetActor(), Execution: cur,
		})
		if err != nil {
			return err
		}
		cur.JournalIndex = uint64(idx)
		out = cur
		return tx.PutExecution(cur, false)
	})
	return out, err
}

// appendJournaled appends a journal record of e.Execution. The fields fixed
// at acceptance (canonical intent, arguments, evidence) are carried by the
// accepted record only; later records carry what changes. The record is
// encoded inside Append, so the execution lends it those fields' absence for
// that call only instead of being copied.
func appendJournaled(tx *store.Tx, e *recordv1.JournalEntry) (int64, error) {
	x := e.GetExecution()
	if x.GetState() != recordv1.State_STATE_ACCEPTED {
		intent, args, evidence := x.CanonicalIntent, x.Arguments, x.Evidence
		x.CanonicalIntent, x.Arguments, x.Evidence = nil, nil, nil
		defer func() { x.CanonicalIntent, x.Arguments, x.Evidence = intent, args, evidence }()
	}
	return tx.Append(e)
}
