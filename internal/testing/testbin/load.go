package testbin

import (
	"context"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/cputime"
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

// CPUMeter reports a benchmark's processor time per operation: this
// process's (user and system, so everything the benchmark runs in it) as
// cpu-µs/op and, when db is set, the database server's as db-cpu-µs/op.
// Unlike ops/s these do not depend on what else the machine is doing.
type CPUMeter struct {
	db        func() (time.Duration, error)
	self, dbt time.Duration
	others    []otherCPU
}

// otherCPU is another process a CPUMeter reads (Also).
type otherCPU struct {
	name  string
	read  func() (time.Duration, error)
	start time.Duration
}

// StartCPU reads the processor times before a run; db (nil: none) reads
// the database server's, e.g. pgtest's Server.CPU.
func StartCPU(db func() (time.Duration, error)) *CPUMeter {
	m := &CPUMeter{db: db, self: cputime.Self()}
	if db != nil {
		m.dbt, _ = db()
	}
	return m
}

// Also adds another process (read gives its processor time so far),
// reported as <name>-cpu-µs/op; a read that fails now is not reported.
func (m *CPUMeter) Also(name string, read func() (time.Duration, error)) *CPUMeter {
	if t, err := read(); err == nil {
		m.others = append(m.others, otherCPU{name: name, read: read, start: t})
	}
	return m
}

// Report reads them again after a run of b.N operations and reports the
// differences per operation.
func (m *CPUMeter) Report(b *testing.B) {
	n := float64(max(b.N, 1))
	b.ReportMetric(float64((cputime.Self()-m.self).Microseconds())/n, "cpu-µs/op")
	for _, o := range m.others {
		if t, err := o.read(); err == nil {
			b.ReportMetric(float64((t-o.start).Microseconds())/n, o.name+"-cpu-µs/op")
		} else {
			b.Logf("%s CPU time not reported: %v", o.name, err)
		}
	}
	if m.db != nil {
		d, err := m.db()
		if err != nil {
			b.Logf("database CPU time not reported: %v", err)
			return
		}
		b.ReportMetric(float64((d-m.dbt).Microseconds())/n, "db-cpu-µs/op")
	}
}
