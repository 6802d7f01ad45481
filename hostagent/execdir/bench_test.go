package execdir

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// BenchmarkMirrors measures durable mirror writes (WriteScriptMirror: temp
// file fsync, rename, directory fsync) at concurrency 1 (the floor: two
// syncs a write) and 32 (concurrent fsyncs share journal commits in the
// file system; each file's data sync remains). A user-space group commit
// (temp files fsync'd in parallel, renames, one directory fsync per group)
// measured the same as independent writers here, same run: 620/333 vs
// 342/767 writes/s over two rounds at c=32, so it was not kept.
func BenchmarkMirrors(b *testing.B) {
	for _, c := range []int{1, 32} {
		b.Run("c="+strconv.Itoa(c), func(b *testing.B) {
			data := b.TempDir()
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
						if err := WriteScriptMirror(data, &hostagentv1.Marker{ExecutionId: "b_" + strconv.FormatInt(i, 10)}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
		})
	}
}
