package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Get returns an execution and its stored result (nil when none). With a
// non-empty actor, another actor's execution is reported as not found.
//
// Both are checked against the journal first (store.Verified). A record
// that disagrees is an error wrapping store.ErrStateMismatch. A result whose
// bytes do not hash to its completed record is never returned: the
// execution moves to needs_review with reason result_integrity (journaled)
// and is returned without a result.
func (e *Engine) Get(id, actor string) (*recordv1.Execution, *recordv1.Result, error) {
	x, r, err := e.st.Verified(id)
	if errors.Is(err, store.ErrNotFound) || (x != nil && actor != "" && x.GetActor() != actor) {
		return nil, nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if errors.Is(err, store.ErrResultIntegrity) {
		return e.quarantine(x, err)
	}
	if err != nil {
		if errors.Is(err, store.ErrStateMismatch) {
			e.log.Error("execution record disagrees with its journal; not served", "execution_id", id, "journal_index", x.GetJournalIndex(), "error", err)
		}
		return nil, nil, err
	}
	return x, r, nil
}

// integrityReview logs a result that failed its hash check and returns the
// reason to journal (its code is REASON_CODE_RESULT_INTEGRITY), and whether x is in a state (completed, delivered) that
// must move to needs_review for it.
func (e *Engine) integrityReview(x *recordv1.Execution, cause error) (string, bool) {
	var detail string
	var se *store.StateError
	if errors.As(cause, &se) && len(se.Mismatches) > 0 {
		detail = se.Mismatches[0].String()
	}
	e.log.Error("stored result does not hash to its journal record; withheld and sent to review",
		"execution_id", x.GetId(), "journal_index", x.GetJournalIndex(), "mismatch", detail, "command", store.VerifyCommand)
	reason := lifecycle.Reason(recordv1.ReasonCode_REASON_CODE_RESULT_INTEGRITY, fmt.Sprintf("the stored result does not hash to journal record %d (%s); it is withheld. Run `%s` on the stopped data dir; an operator decides (latch exec resolve)",
		x.GetJournalIndex(), detail, store.VerifyCommand))
	switch x.GetState() {
	case recordv1.State_STATE_COMPLETED, recordv1.State_STATE_DELIVERED:
		return reason, true
	}
	return reason, false
}

// quarantine records that x's stored result failed its hash check: a
// completed or delivered execution moves to needs_review, journaled with
// the disagreeing record, so an operator sees it; the result is withheld.
func (e *Engine) quarantine(x *recordv1.Execution, cause error) (*recordv1.Execution, *recordv1.Result, error) {
	reason, review := e.integrityReview(x, cause)
	if !review {
		return x, nil, nil // already out of completed (needs_review says why)
	}
	y, err := e.transitionCode(e.ctx, x.GetId(), recordv1.State_STATE_NEEDS_REVIEW, recordv1.EntryKind_ENTRY_KIND_INTEGRITY, recordv1.ReasonCode_REASON_CODE_RESULT_INTEGRITY, reason, requireState(recordv1.State_STATE_COMPLETED, recordv1.State_STATE_DELIVERED))
	if err != nil {
		e.log.Error("cannot record result_integrity review", "execution_id", x.GetId(), "error", err)
		if errors.Is(err, ErrNotResolvable) {
			if cur, gerr := e.st.Execution(x.GetId()); gerr == nil {
				return cur, nil, nil
			}
		}
		return nil, nil, fmt.Errorf("%w (and recording it failed: %v)", cause, err)
	}
	return y, nil, nil
}

// History returns the journal records of an execution, oldest first.
func (e *Engine) History(id, actor string) ([]*recordv1.JournalEntry, error) {
	if _, _, err := e.Get(id, actor); err != nil {
		return nil, err
	}
	return e.st.History(id)
}

// List returns executions newest first.
func (e *Engine) List(f store.Filter) ([]*recordv1.Execution, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.Limit > 1000 {
		f.Limit = 1000
	}
	return e.st.List(f)
}

// MarkDelivered records that the result of a completed execution reached the
// caller. Delivering twice is not an error.
//
// It is committed lazily (store.UpdateLazy): delivered is the last record of
// an execution and nothing is ordered after it, and losing it in a crash
// leaves the execution completed_result_not_delivered, whose attach returns
// the stored result again (the safe side). So it does not need a sync of its
// own: it rides in the next group commit (at most a few milliseconds away
// under load), and the answer still waits until it is durable. Measured: a
// delivered write synced on its own sat in front of the next call's
// accepted write (two syncs in a row on that call's critical path, and
// every read that call made waited on it).
func (e *Engine) MarkDelivered(ctx context.Context, id string) (*recordv1.Execution, error) {
	return e.MarkDeliveredAt(ctx, id, time.Time{})
}

// MarkDeliveredAt is MarkDelivered for a front's report observed at
// observed (zero: just now). The journal's time is when it is recorded; a
// report that arrives late (kept by a front while the control plane was
// away) names the front's time in its reason.
func (e *Engine) MarkDeliveredAt(ctx context.Context, id string, observed time.Time) (*recordv1.Execution, error) {
	reason := "result delivered to the caller" + e.lateNote(observed, "written")
	x, err := e.transitionVia(ctx, e.st.UpdateLazy, id, recordv1.State_STATE_DELIVERED, recordv1.EntryKind_ENTRY_KIND_TRANSITION, recordv1.ReasonCode_REASON_CODE_OTHER, reason, requireState(recordv1.State_STATE_COMPLETED))
	if errors.Is(err, ErrNotResolvable) {
		if cur, gerr := e.st.Execution(id); gerr == nil && cur.GetState() == recordv1.State_STATE_DELIVERED {
			return cur, nil
		}
	}
	return x, err
}

// lateNoteAfter is how far behind the control plane's clock a front's
// observation must be for its reason to name the front's time.
const lateNoteAfter = 2 * time.Second

// lateNote is ", as a front saw it <what> at T, recorded late" when
// observed is well before now, else "".
func (e *Engine) lateNote(observed time.Time, what string) string {
	if observed.IsZero() || e.cfg.Clock().Sub(observed) < lateNoteAfter {
		return ""
	}
	return fmt.Sprintf(" (the front saw it %s at %s and kept the record until the control plane could take it)", what, observed.UTC().Format(time.RFC3339Nano))
}

// errNothingToRecord refuses a journal record that would say nothing new.
var errNothingToRecord = errors.New("engine: nothing new to record")

// MarkCallerLeft records a front's report that the caller's connection or
// stream closed before the answer could be written (journal kind
// lifecycle.CallerLeftKind; Execution.delivery becomes caller_left). The
// state does not change: a retry that attaches still gets the stored result
// and is recorded delivered. An execution whose caller is owed nothing
// (delivered, rejected, cancelled, not_executed) or already recorded as
// left is returned as it is: a front's report sent twice is not an error.
func (e *Engine) MarkCallerLeft(ctx context.Context, id string, observed time.Time) (*recordv1.Execution, error) {
	cur, err := e.st.Execution(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	reason := "not delivered: a front saw the caller leave (its connection or stream closed) before the answer was written" + e.lateNote(observed, "leave")
	// Lazy, as delivered (no sync of its own on a stateless caller's
	// way out): losing it in a crash leaves "delivery not recorded", which
	// claims nothing, and it reads and changes the execution as it is when
	// its group applies it, so a step ordered next to it keeps the record
	// and the journal in agreement.
	x, err := e.journalIfVia(ctx, e.st.UpdateLazy, cur, lifecycle.CallerLeftKind, reason, func(x *recordv1.Execution) error {
		if !lifecycle.Owed(x.GetState()) || x.GetDelivery() == recordv1.Delivery_DELIVERY_CALLER_LEFT {
			return errNothingToRecord
		}
		x.Delivery = recordv1.Delivery_DELIVERY_CALLER_LEFT
		x.CallerLeftAt = timestamppb.New(e.cfg.Clock())
		return nil
	})
	switch {
	case errors.Is(err, errNothingToRecord):
		return e.st.Execution(id)
	case errors.Is(err, store.ErrClosed):
		return nil, ErrClosed
	}
	return x, err
}

// Cancel cancels an execution that has not been dispatched.
func (e *Engine) Cancel(ctx context.Context, id, actor, reason string) (*recordv1.Execution, error) {
	if reason == "" {
		reason = "cancelled by the caller"
	}
	x, err := e.transition(ctx, id, recordv1.State_STATE_CANCELLED, recordv1.EntryKind_ENTRY_KIND_TRANSITION, reason, func(x *recordv1.Execution) error {
		if actor != "" && x.GetActor() != actor {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		switch {
		case lifecycle.Cancellable(x.GetState()):
			return nil
		case x.GetState() == recordv1.State_STATE_CANCELLED:
			return errAlreadyCancelled
		}
		return refuse(ErrTooLate, "%s is %s; after dispatch an execution runs to its observed outcome", id, lifecycle.Name(x.GetState()))
	})
	if errors.Is(err, errAlreadyCancelled) {
		cur, gerr := e.st.Execution(id)
		return cur, gerr
	}
	if err == nil {
		e.dropSecrets(id)
	}
	return x, err
}

var errAlreadyCancelled = errors.New("already cancelled")

// ResolveInput is an operator's decision on an uncertain execution.
type ResolveInput struct {
	ID          string
	Completed   bool
	NotExecuted bool
	Outcome     recordv1.Outcome
	Reason      string
	Operator    string
}

// Resolve settles an outcome_unknown or needs_review execution by an
// operator's decision, journaled with the reason.
func (e *Engine) Resolve(ctx context.Context, in ResolveInput) (*recordv1.Execution, error) {
	switch {
	case in.Completed == in.NotExecuted:
		return nil, fmt.Errorf("%w: say exactly one of completed or not_executed", ErrInvalidRequest)
	case in.Reason == "":
		return nil, fmt.Errorf("%w: a reason is required (what evidence decided it)", ErrInvalidRequest)
	case in.Completed && in.Outcome == recordv1.Outcome_OUTCOME_UNSPECIFIED:
		return nil, fmt.Errorf("%w: completed needs an outcome (succeeded or failed_at_target)", ErrInvalidRequest)
	}
	operator := in.Operator
	if operator == "" {
		operator = "operator"
	}
	to := recordv1.State_STATE_NOT_EXECUTED
	if in.Completed {
		to = recordv1.State_STATE_COMPLETED
	}
	x, err := e.transition(ctx, in.ID, to, recordv1.EntryKind_ENTRY_KIND_RESOLVE, "resolved by "+operator+": "+in.Reason, func(x *recordv1.Execution) error {
		if err := requireState(recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.State_STATE_NEEDS_REVIEW)(x); err != nil {
			return err
		}
		if in.Completed {
			x.Outcome = in.Outcome
		}
		return nil
	})
	if err == nil {
		e.dropSecrets(in.ID)
	}
	return x, err
}

// Watch streams an execution's states: the current one first, then each
// change, until ctx ends. The channel keeps only the newest state when the
// reader falls behind; it is closed when ctx ends.
func (e *Engine) Watch(ctx context.Context, id, actor string) (<-chan *recordv1.Execution, error) {
	ch, unsubscribe := e.subscribe(id)
	x, _, err := e.Get(id, actor)
	if err != nil {
		unsubscribe()
		return nil, err
	}
	e.watchMu.Lock()
	offer(ch, x)
	e.watchMu.Unlock()
	go func() {
		<-ctx.Done()
		unsubscribe()
	}()
	return ch, nil
}

// subscribe registers a watcher channel of id (see Watch).
func (e *Engine) subscribe(id string) (chan *recordv1.Execution, func()) {
	ch := make(chan *recordv1.Execution, 8)
	e.watchMu.Lock()
	if e.watchers[id] == nil {
		e.watchers[id] = map[chan *recordv1.Execution]struct{}{}
	}
	e.watchers[id][ch] = struct{}{}
	e.watchMu.Unlock()
	return ch, func() {
		e.watchMu.Lock()
		delete(e.watchers[id], ch)
		if len(e.watchers[id]) == 0 {
			delete(e.watchers, id)
		}
		close(ch)
		e.watchMu.Unlock()
	}
}

// AwaitResting follows x (as its caller last saw it) until rests says it
// rests or ctx ends, and returns the newest state seen. A state it returns
// came from a commit of this engine (the writer's notify) or through Get
// (checked against the journal), as with Watch; the current state read
// right after subscribing, which only decides whether to keep waiting, is
// re-read through Get before it is returned. Unlike Watch it does not read
// and check the execution when it starts (the caller has it from Submit)
// and needs no goroutine: it is the wait of a Submit with wait_ms.
func (e *Engine) AwaitResting(ctx context.Context, x *recordv1.Execution, rests func(*recordv1.Execution) bool) *recordv1.Execution {
	if rests(x) {
		return x
	}
	ch, stop := e.subscribe(x.GetId())
	defer stop()
	// A change committed between the caller's read and the subscription
	// reached no channel: look once.
	if cur, err := e.st.Execution(x.GetId()); err == nil && cur.GetJournalIndex() > x.GetJournalIndex() {
		if rests(cur) {
			if v, _, err := e.Get(x.GetId(), ""); err == nil {
				return v
			}
			return x
		}
		x = cur
	}
	for {
		select {
		case cur := <-ch:
			if cur.GetJournalIndex() >= x.GetJournalIndex() {
				x = cur
			}
			if rests(x) {
				return x
			}
		case <-ctx.Done():
			return x
		}
	}
}

// notify runs on the store's writer after each commit.
func (e *Engine) notify(changed []*recordv1.Execution) {
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	for _, x := range changed {
		for ch := range e.watchers[x.GetId()] {
			offer(ch, proto.Clone(x).(*recordv1.Execution))
		}
	}
}

// offer sends without blocking, dropping the oldest queued state if full.
func offer(ch chan *recordv1.Execution, x *recordv1.Execution) {
	for {
		select {
		case ch <- x:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}
