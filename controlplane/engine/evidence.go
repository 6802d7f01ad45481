package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// The evidence rule (docs/design §13): "the target has no record of it" proves
// that nothing happened only once no request carrying the execution ID can
// still be in flight or still be on its way to the target's records. That
// point, the settle point, is the latest send plus the dispatch timeout (or
// the channel's longer in-flight bound) plus the target's settle.

// absenceVerdict is what an Absent answer proves.
type absenceVerdict struct {
	counts   bool
	settleAt time.Time
	reason   string // for the journal: what was seen and why it does or does not count
}

// absence judges an Absent answer to a query sent at asked (the answer
// reflects the target at some moment after asked, so asked is the
// conservative observation time).
func absence(x *recordv1.Execution, c Call, a Attempt, asked time.Time) absenceVerdict {
	if a.Durable {
		return absenceVerdict{counts: true, reason: "the target has a durable record that it never acted on this execution ID: " + a.Reason}
	}
	last, known := lastSent(x)
	if !known {
		last = asked // no send time recorded: count from now, never from the epoch
	}
	inFlight := max(c.Tool.DispatchTimeout(c.Target), a.InFlight)
	settle := c.Target.Settle
	settleAt := last.Add(inFlight + settle)
	basis := fmt.Sprintf("last send %s + dispatch timeout %s + settle %s", stampTime(last), inFlight, settle)
	if asked.Before(settleAt) && !mutantEarlyAbsence {
		return absenceVerdict{settleAt: settleAt, reason: fmt.Sprintf(
			"absent answer, not evidence: %s; asked at %s, before the settle point %s (%s), so the request may still be in flight or not yet visible at the target; asking again at the settle point",
			a.Reason, stampTime(asked), stampTime(settleAt), basis)}
	}
	return absenceVerdict{counts: true, settleAt: settleAt, reason: fmt.Sprintf(
		"the target has no record of it: %s; asked at %s, after the settle point %s (%s), when no request carrying the execution ID could still be in flight",
		a.Reason, stampTime(asked), stampTime(settleAt), basis)}
}

// lastSent is the latest time a request carrying x's ID may have been sent.
func lastSent(x *recordv1.Execution) (time.Time, bool) {
	var t time.Time
	for _, ts := range []*timestamppb.Timestamp{x.GetDispatchedAt(), x.GetLastSentAt()} {
		if ts != nil && ts.AsTime().After(t) {
			t = ts.AsTime()
		}
	}
	return t, !t.IsZero()
}

func stampTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// noEvidence journals a recovery query or re-send that settled nothing and
// sets when to ask again: next when given (never sooner than the minimum
// backoff), else the backoff for the attempt count. counts says whether the
// attempt uses up one of MaxAttempts.
func (e *Engine) noEvidence(ctx context.Context, x *recordv1.Execution, reason string, next time.Time, counts bool) {
	now := e.cfg.Clock()
	_, err := e.journalIf(ctx, x, recordv1.EntryKind_ENTRY_KIND_RECOVERY_QUERY, reason, func(cur *recordv1.Execution) error {
		if err := requireState(recordv1.State_STATE_OUTCOME_UNKNOWN)(cur); err != nil {
			return err // settled meanwhile: this answer is history
		}
		if counts {
			cur.RecoveryAttempts++
		}
		at := now.Add(e.recoveryRetry.Backoff(int(cur.RecoveryAttempts)))
		if !next.IsZero() {
			at = later(next, now.Add(e.cfg.Recovery.MinBackoff))
		}
		cur.NextRecoveryAt = timestamppb.New(at)
		return nil
	})
	switch {
	case errors.Is(err, ErrNotResolvable):
		e.log.Debug("recovery: execution settled while it was being asked", "execution_id", x.GetId(), "error", err)
	case err != nil:
		e.log.Error("recovery: cannot journal attempt", "execution_id", x.GetId(), "error", err)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
