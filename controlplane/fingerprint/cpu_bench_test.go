package fingerprint

import (
	"testing"

	"github.com/latchhq/latch/internal/cputime"
)

// The machines benchmarks run on are shared: wall time per operation is
// noisy, processor time per operation (this process's, GC included) less
// so. These benchmarks report both.

func reportCPU(b *testing.B, run func()) {
	start := cputime.Self()
	n := 0
	for b.Loop() {
		run()
		n++
	}
	b.ReportMetric(float64((cputime.Self()-start).Nanoseconds())/float64(n), "cpu-ns/op")
}

// BenchmarkCanonicalize: the canonical form of a typical intent's JSON, the
// part of every call's fingerprint that reads JSON.
func BenchmarkCanonicalize(b *testing.B) {
	in := []byte(`{"arguments":{"labels":{"team":"core","tier":"1"},"region":"us-east-1","replicas":3,"service":"api","version":"1.2.3"},"audience":"https://deploy.example.com","principal":"agent:ci","tool":"deploy","weight":0.25}`)
	reportCPU(b, func() {
		if _, err := Canonicalize(in); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkFingerprintCPU is BenchmarkFingerprint with processor time.
func BenchmarkFingerprintCPU(b *testing.B) {
	f := testFingerprinter(b)
	in := baseIntent(decodeArgs(b, `{"service":"api","version":"1.2.3","region":"us-east-1","replicas":3,"labels":{"team":"core","tier":"1"}}`))
	reportCPU(b, func() {
		if _, _, err := f.Fingerprint(in, []string{"region"}, []string{"service"}); err != nil {
			b.Fatal(err)
		}
	})
}
