package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latchhq/latch/internal/loadgen"
)

// storeMetrics is what a control plane's /metrics serves of the store's
// write counters (the text format, as promhttp writes it).
func storeMetrics(commits, updates int, keys, bytes float64) string {
	return fmt.Sprintf(`# HELP latch_store_group_size Number of updates that shared one group commit.
# TYPE latch_store_group_size histogram
latch_store_group_size_bucket{le="+Inf"} %d
latch_store_group_size_sum %d
latch_store_group_size_count %d
# TYPE latch_store_written_keys_total counter
latch_store_written_keys_total %g
# TYPE latch_store_written_bytes_total counter
latch_store_written_bytes_total %g
`, commits, updates, commits, keys, bytes)
}

// metricsServer serves bodies[i] on the i-th scrape (the last one after).
func metricsServer(t *testing.T, bodies ...string) *httptest.Server {
	t.Helper()
	var n atomic.Int64 // each connection has a goroutine of its own
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, bodies[min(int(n.Add(1))-1, len(bodies)-1)])
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestWritesMeterReadsTheStoreCounters: two scrapes around a path give
// what it wrote, and the line divides it by the path's calls.
func TestWritesMeterReadsTheStoreCounters(t *testing.T) {
	srv := metricsServer(t, storeMetrics(10, 40, 100, 50000), storeMetrics(30, 240, 2100, 750000))
	m := newWritesMeter(srv.URL)
	before := m.read(context.Background())
	after := m.read(context.Background())
	w := after.since(before)
	if want := (storeWrites{commits: 20, updates: 200, keys: 2000, bytes: 700000, ok: true}); w != want {
		t.Fatalf("since = %+v, want %+v (err %v)", w, want, m.err)
	}
	var out bytes.Buffer
	printWrites(&out, m, []string{"durable", "mcp"}, map[string]loadgen.Result{"durable": {Ops: 100}, "mcp": {Ops: 100}},
		map[string]benchCPU{"durable": {writes: w}, "mcp": {writes: w.add(w)}})
	want := "Store writes per call (its /metrics): durable 0.20 commits of 10.0 updates, 20.0 keys, 7.00 KB; mcp 0.40 commits of 10.0 updates, 40.0 keys, 14.00 KB.\n"
	if out.String() != want {
		t.Errorf("printWrites =\n%q\nwant\n%q", out.String(), want)
	}
}

// TestWritesMeterSaysWhyNot: without an ops listener in the dev.json, or
// when the listener serves no store counters, there is no figure, and the
// line says why and what to do.
func TestWritesMeterSaysWhyNot(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *writesMeter
		want []string
	}{
		{"no listener", newWritesMeter(""), []string{"names no ops listener", "restart it with this latch"}},
		{"no counters", newWritesMeter(metricsServer(t, "# TYPE other counter\nother 1\n").URL), []string{"serves no latch_store_group_size", "restart it with this latch"}},
		{"not found", newWritesMeter(metricsServer(t, "").URL + "/nowhere"), []string{"/nowhere/metrics: 404 Not Found"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w := tc.m.read(context.Background()); w.ok {
				t.Fatalf("read = %+v, want no reading", w)
			}
			var out bytes.Buffer
			printWrites(&out, tc.m, []string{"durable"}, map[string]loadgen.Result{"durable": {Ops: 10}}, map[string]benchCPU{"durable": {}})
			s := out.String()
			if !strings.HasPrefix(s, "Store writes not measured: ") {
				t.Errorf("printWrites = %q, want the not-measured line", s)
			}
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("printWrites = %q, want it to say %q", s, w)
				}
			}
		})
	}
}
