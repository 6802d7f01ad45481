package engine

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/latchhq/latch/internal/backoff"
)

// Retry and backoff
//
// The engine is the only layer that decides to try again, and RetryPolicy is
// its one rule for how often and how soon. The layers below it make one
// attempt per call and classify what it proved (Attempt.Class: observed, not
// sent, unknown): httpdispatch sends one request, sshdial dials once,
// hostchannel makes one Run or Status call. So one engine attempt is one
// dial and one request, and the bounds below are the whole story:
//
//   - dispatch: an attempt that provably sent nothing (NotSent) returns the
//     execution to authorized and is sent again after
//     dispatchRetry.Backoff(attempts), at most
//     Config.MaxDispatches dispatches in all; the waits start at
//     RecoveryConfig.MinBackoff/4 and carry jitter, so executions that
//     failed together against one target do not come back together; a
//     NotSent the channel marks Final (the failure cannot pass by itself)
//     rests at not_executed at once;
//   - recovery: an outcome_unknown execution is asked again after
//     recoveryRetry.Backoff(recovery attempts), at most
//     RecoveryConfig.MaxAttempts counted attempts, then needs_review; the
//     waits are deterministic because they are journaled (NextRecoveryAt);
//   - failed rounds: a recovery round that recorded nothing (the store
//     failed) is queued again after recoveryRetry.Backoff(consecutive
//     failures), without limit: nothing was learned, nothing is used up.
//
// One thing below the engine looks like a retry and is not one:
// httpdispatch, handed a kept-alive connection from its own pool that turns
// out dead before a single byte of the request was written to it, sends on a
// new connection (once). The request was never sent; the pool's stale
// connection is the dispatcher's own state, as net/http does for
// replayable requests.

// RetryPolicy bounds how often and how soon the engine tries again.
type RetryPolicy struct {
	// Min is the wait after the first failed attempt; it doubles per
	// further attempt up to Max.
	Min, Max time.Duration
	// Limit is how many attempts may be made in all; 0 is no limit.
	Limit int
	// Jitter takes up to half of each wait off at random.
	Jitter bool
}

// Backoff is the wait after the given failed attempt (1-based; lower counts
// as 1): Min·2^(attempt-1), capped at Max, less the jitter (backoff.Policy).
func (p RetryPolicy) Backoff(attempt int) time.Duration {
	return backoff.Policy{Min: p.Min, Max: p.Max, Jitter: p.Jitter}.Delay(attempt)
}

// BackoffOf is Backoff for one execution: its jitter is drawn from a hash
// of the execution ID and the attempt, not from a shared random source.
// Executions that failed together still come back apart (their IDs
// differ), and one execution's waits depend on nothing else that runs, so
// a simulated schedule replays (controlplane/sim).
func (p RetryPolicy) BackoffOf(id string, attempt int) time.Duration {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", id, attempt)
	sum := h.Sum64()
	draw := func(n int64) int64 { return int64(sum % uint64(n)) } //nolint:gosec // n > 0
	return backoff.Policy{Min: p.Min, Max: p.Max, Jitter: p.Jitter, Rand: draw}.Delay(attempt)
}

// Exhausted reports whether attempts made so far use up the limit.
func (p RetryPolicy) Exhausted(attempts int) bool {
	return p.Limit > 0 && attempts >= p.Limit
}
