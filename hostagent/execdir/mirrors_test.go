package execdir

import (
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// TestMirrorsConcurrentWriters: many writers at once (groups form), each
// writing its own mirror twice in order; every file reads back as its last
// write, and no temp file is left.
func TestMirrorsConcurrentWriters(t *testing.T) {
	data := t.TempDir()
	w := NewMirrors(data)
	const writers = 40
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			id := "m_" + strconv.Itoa(i)
			for _, st := range []hostagentv1.MarkerState{hostagentv1.MarkerState_MARKER_STATE_BEGUN, hostagentv1.MarkerState_MARKER_STATE_COMPLETED} {
				if err := w.Write(&hostagentv1.Marker{ExecutionId: id, State: st, ResultJson: id}); err != nil {
					t.Errorf("Write(%s) = %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	if err := w.Write(&hostagentv1.Marker{ExecutionId: "../escape"}); err == nil {
		t.Error("Write of an ID that is not a file name succeeded")
	}
	got, errs := ReadScriptMirrors(data)
	if len(errs) != 0 {
		t.Fatalf("ReadScriptMirrors errors: %v", errs)
	}
	want := map[string]*hostagentv1.Marker{}
	for i := range writers {
		id := "m_" + strconv.Itoa(i)
		want[id] = &hostagentv1.Marker{ExecutionId: id, State: hostagentv1.MarkerState_MARKER_STATE_COMPLETED, ResultJson: id}
	}
	gotMap := map[string]*hostagentv1.Marker{}
	for _, m := range got {
		gotMap[m.GetExecutionId()] = m
	}
	if d := cmp.Diff(want, gotMap, protocmp.Transform()); d != "" {
		t.Errorf("mirrors after concurrent writes (-want +got):\n%s", d)
	}
	entries, err := os.ReadDir(ScriptsDir(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != writers {
		t.Errorf("%d entries in %s, want %d (no temp files left)", len(entries), ScriptsDir(data), writers)
	}
}

// BenchmarkMirrors measures durable mirror writes at concurrency 1 (file
// fsync + directory fsync per write: the floor) and 32, through Mirrors
// (group: file fsyncs in parallel, one directory fsync per group) and, for
// a same-run comparison, through WriteScriptMirror (each writer on its own:
// file fsync + directory fsync each, concurrently).
func BenchmarkMirrors(b *testing.B) {
	for _, c := range []int{1, 32} {
		for _, mode := range []string{"group", "each"} {
			b.Run(mode+"/c="+strconv.Itoa(c), func(b *testing.B) {
				data := b.TempDir()
				w := NewMirrors(data)
				write := w.Write
				if mode == "each" {
					write = func(m *hostagentv1.Marker) error { return WriteScriptMirror(data, m) }
				}
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
							if err := write(&hostagentv1.Marker{ExecutionId: "b_" + strconv.FormatInt(i, 10)}); err != nil {
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
}
