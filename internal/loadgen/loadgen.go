// Package loadgen drives a fixed number of operations over a fixed number of
// workers and summarises their latencies. It is the one load driver of the
// repository: benchmarks use it through internal/testing/testbin.Load, and `latch
// bench` uses it directly (binaries may import it; it imports no test code).
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrConfig means Run was given a worker count or op count below 1.
var ErrConfig = errors.New("loadgen: workers and count must be at least 1")

// Result is what a run measured.
type Result struct {
	// Ops is how many operations completed without error.
	Ops int
	// Elapsed is the wall time from the first start to the last finish.
	Elapsed time.Duration
	// Stopped is true when ctx ended the run before count operations.
	Stopped bool

	sorted []time.Duration
}

// Rate is completed operations per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// Percentile returns the latency at or below which a fraction p (0..1) of
// the completed operations fell (nearest rank); 0 when none completed.
func (r Result) Percentile(p float64) time.Duration {
	if len(r.sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(r.sorted))+0.5) - 1
	return r.sorted[max(0, min(i, len(r.sorted)-1))]
}

// Run calls op count times spread over workers goroutines (i counts from 1
// to count) and returns what it measured. The first error stops every
// worker and is returned with the result so far; ctx ending stops the run
// too (Result.Stopped, no error).
func Run(ctx context.Context, workers int, count int64, op func(ctx context.Context, i int64) error) (Result, error) {
	if workers < 1 || count < 1 {
		return Result{}, fmt.Errorf("%w (got %d workers, %d ops)", ErrConfig, workers, count)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		lat  = make([][]time.Duration, workers)
	)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > count {
					return
				}
				t := time.Now()
				if err := op(ctx, i); err != nil {
					if ctx.Err() == nil {
						cancel(fmt.Errorf("operation %d: %w", i, err))
					}
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	res := Result{Elapsed: time.Since(start), sorted: slices.Concat(lat...)}
	slices.Sort(res.sorted)
	res.Ops = len(res.sorted)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		return res, cause
	}
	res.Stopped = int64(res.Ops) < count
	return res, nil
}

// Merge combines the results of several runs of one operation (rounds
// interleaved with other work): their operations and latencies together,
// their elapsed times added, so Rate is over the time the operation ran.
func Merge(rs ...Result) Result {
	var out Result
	for _, r := range rs {
		out.Ops += r.Ops
		out.Elapsed += r.Elapsed
		out.Stopped = out.Stopped || r.Stopped
		out.sorted = append(out.sorted, r.sorted...)
	}
	slices.Sort(out.sorted)
	return out
}
