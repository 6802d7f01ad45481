package testbin

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Load runs op b.N times spread over workers goroutines (i counts from 1),
// and reports ops/s and the p50 latency of one op. The first error stops
// the benchmark.
func Load(b *testing.B, workers int, op func(i int64) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	lat := make([][]time.Duration, workers)
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				t := time.Now()
				if err := op(i); err != nil {
					errs <- err
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	}
}
