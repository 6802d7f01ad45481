package testbin

import (
	"context"
	"testing"

	"github.com/latchhq/latch/internal/loadgen"
)

// Load runs op b.N times spread over workers goroutines (i counts from 1),
// and reports ops/s and the p50 latency of one op. The first error stops
// the benchmark. It is loadgen.Run with the benchmark's timer and metrics.
func Load(b *testing.B, workers int, op func(i int64) error) {
	b.ResetTimer()
	res, err := loadgen.Run(context.Background(), workers, int64(b.N), func(_ context.Context, i int64) error { return op(i) })
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.Rate(), "ops/s")
	if res.Ops > 0 {
		b.ReportMetric(float64(res.Percentile(0.5).Microseconds()), "p50-µs")
	}
}
