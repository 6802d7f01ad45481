// Package backoff is the one exponential backoff of the tree: the engine's
// retry policy, the upstream MCP reconnects, the replica search and the
// front's control-plane polls all wait by it. Who decides whether to try
// again stays with the caller (the engine's RetryPolicy bounds attempts);
// this package only says how long to wait.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is a doubling wait: Min after the first failed attempt, twice as
// long after each further one, capped at Max.
type Policy struct {
	Min, Max time.Duration
	// Jitter takes up to half of each wait off at random, so callers that
	// failed together do not come back together.
	Jitter bool
	// Rand, when set, is the jitter's source: a number in [0, n). Nil is
	// math/rand/v2's; the simulator passes its seeded one.
	Rand func(n int64) int64
}

// Delay is the wait after the given failed attempt (1-based; lower counts
// as 1): Min·2^(attempt-1), capped at Max, less the jitter.
func (p Policy) Delay(attempt int) time.Duration {
	d := p.Min
	for i := 1; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	if p.Jitter && d > 0 {
		draw := p.Rand
		if draw == nil {
			draw = rand.Int64N //nolint:gosec // jitter spreads retries; it guards nothing
		}
		d -= time.Duration(draw(int64(d)/2 + 1))
	}
	return d
}

// Wait sleeps Delay(attempt), or less when wake is closed or sent on (nil:
// never). It returns false, at once, when ctx ends first.
func (p Policy) Wait(ctx context.Context, attempt int, wake <-chan struct{}) bool {
	t := time.NewTimer(p.Delay(attempt))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-wake:
	}
	return ctx.Err() == nil
}
