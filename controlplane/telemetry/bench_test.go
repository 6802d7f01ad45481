package telemetry_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkObservedToolCall measures the hot path (MCP client → front →
// gRPC → control plane with Badger → HTTP target) with metrics and tracing
// off and on, in the same run, at 64 concurrent sessions. "on" exports every
// span over OTLP/HTTP to an in-process receiver and serves the metrics
// registry (the receiver drops what it gets: a collector's cost is not
// Latch's); "off" has no telemetry at all. The calls alternate between the
// two stacks in rounds so that drift on a shared machine hits both alike;
// overhead-% is (off calls/s - on calls/s) / off calls/s. cpu-overhead-% is
// the same comparison of the process's CPU time per call (getrusage), which
// other processes on the machine disturb less than throughput.
//
//	go test -run '^$' -bench ObservedToolCall -benchtime 4000x ./controlplane/telemetry/
func BenchmarkObservedToolCall(b *testing.B) {
	const conc, rounds = 64, 16
	rcv := newReceiver(b)
	rcv.discard.Store(true)
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.srv.URL)
	type side struct {
		name     string
		sessions []*mcp.ClientSession
		elapsed  time.Duration
		cpu      time.Duration
		calls    int
	}
	var sides []*side
	for _, on := range []bool{false, true} {
		st := newObsStack(b, on)
		s := &side{name: map[bool]string{false: "off", true: "on"}[on]}
		for range conc {
			s.sessions = append(s.sessions, st.connect(b, "2025-11-25"))
		}
		sides = append(sides, s)
	}
	var version atomic.Int64
	run := func(s *side, n int) {
		var next atomic.Int64
		var wg sync.WaitGroup
		start, cpu0 := time.Now(), cpuTime()
		for _, cs := range s.sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(n) {
					v := version.Add(1)
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"service": "api", "version": fmt.Sprintf("v%d", v)}})
					if err != nil || res.IsError {
						b.Errorf("CallTool (%s): %v %v", s.name, res, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		s.elapsed += time.Since(start)
		s.cpu += cpuTime() - cpu0
		s.calls += n
	}
	b.ResetTimer()
	per := max(1, b.N/rounds)
	for r := range rounds {
		for i := range sides {
			run(sides[(i+r)%2], per) // alternate which side goes first
		}
	}
	b.StopTimer()
	off, on := float64(sides[0].calls)/sides[0].elapsed.Seconds(), float64(sides[1].calls)/sides[1].elapsed.Seconds()
	b.ReportMetric(off, "off-calls/s")
	b.ReportMetric(on, "on-calls/s")
	b.ReportMetric(100*(off-on)/off, "overhead-%")
	offCPU, onCPU := float64(sides[0].cpu.Microseconds())/float64(sides[0].calls), float64(sides[1].cpu.Microseconds())/float64(sides[1].calls)
	b.ReportMetric(offCPU, "off-cpu-µs/call")
	b.ReportMetric(onCPU, "on-cpu-µs/call")
	b.ReportMetric(100*(onCPU-offCPU)/offCPU, "cpu-overhead-%")
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
