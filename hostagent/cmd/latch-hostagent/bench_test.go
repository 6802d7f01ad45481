package main

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// BenchmarkMarkerBeginComplete measures the marker API of a real agent over
// its unix socket: begin + complete per op, each durable (mirror log frame
// and store commit, both fsynced) before the reply. c=1 is one script at a
// time, where group commit cannot help (the floor is four fsyncs per op:
// two log frames, two store commits); c=32 is 32 scripts at once, where
// concurrent changes share one log frame and one store commit.
func BenchmarkMarkerBeginComplete(b *testing.B) {
	for _, c := range []int{1, 32} {
		b.Run("c="+strconv.Itoa(c), func(b *testing.B) {
			a := startAgent(b, agentOpts{flags: []string{"--log-level", "info"}})
			ctx := ctxT(b)
			var (
				next atomic.Int64
				wg   sync.WaitGroup
			)
			n := int64(b.N)
			start := time.Now()
			b.ResetTimer()
			for range c {
				wg.Go(func() {
					for i := next.Add(1); i <= n; i = next.Add(1) {
						id := "bench_marker_" + strconv.FormatInt(i, 10)
						if _, err := a.Client.MarkerBegin(ctx, &hostagentv1.MarkerBeginRequest{ExecutionId: id}); err != nil {
							b.Error(err)
							return
						}
						if _, err := a.Client.MarkerComplete(ctx, &hostagentv1.MarkerCompleteRequest{ExecutionId: id}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "begin+complete/s")
		})
	}
}

// BenchmarkRunRoundTrip measures Run → exited of `true` on a real agent:
// marker starting, shim spawn, gate, running, exit status file, exited.
func BenchmarkRunRoundTrip(b *testing.B) {
	a := startAgent(b, agentOpts{flags: []string{"--log-level", "info"}})
	ctx := ctxT(b)
	i := 0
	for b.Loop() {
		id := "bench_run_" + strconv.Itoa(i)
		i++
		if _, err := a.Client.Run(ctx, &hostagentv1.RunRequest{ExecutionId: id, Argv: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
		resp, err := a.Client.Wait(ctx, &hostagentv1.WaitRequest{ExecutionId: id, TimeoutMs: 30_000})
		if err != nil {
			b.Fatal(err)
		}
		if resp.GetMarker().GetState() != hostagentv1.MarkerState_MARKER_STATE_EXITED {
			b.Fatalf("marker = %v, want exited", resp.GetMarker())
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}

// BenchmarkIdleFootprint reports the idle agent's resident memory
// (/proc/<pid>/status VmRSS) and the binary's size.
func BenchmarkIdleFootprint(b *testing.B) {
	a := startAgent(b, agentOpts{flags: []string{"--log-level", "info"}})
	var rss int64
	for b.Loop() {
		rss = vmRSS(b, a.Cmd.Process.Pid)
	}
	fi, err := os.Stat(binPath)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(rss), "VmRSS-kB")
	b.ReportMetric(float64(fi.Size())/(1<<20), "binary-MiB")
}

func vmRSS(tb testing.TB, pid int) int64 {
	tb.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return n
				}
			}
		}
	}
	tb.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
