package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/controlplane/store/pgkv"
	"github.com/latchhq/latch/internal/testing/pgtest"
	"github.com/latchhq/latch/internal/testing/testbin"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// benchCatalog's tool needs approval for every call, so a Submit is exactly
// match-or-create plus two durable transitions (accepted, awaiting_approval)
// with no dispatch running behind it.
const benchCatalog = `
targets:
  api: {channel: http, base_url: "http://127.0.0.1:1", allow_private: true, idempotency_header: Idempotency-Key}
tools:
  deploy:
    description: Deploy.
    input_schema: {type: object, required: [service, version], properties: {service: {type: string}, version: {type: string}}}
    target: api
    request: {method: POST, path: /deploy, body: {service: "{{service}}", version: "{{version}}"}}
    replay: idempotency_key
    approval: every_call
    attach_window: 1h
`

// benchBackends are the stores the benchmarks compare in one run.
var benchBackends = []string{"badger", "postgres"}

// benchEngineOn builds the bench engine on Badger in dir or on a fresh
// PostgreSQL database (backend "postgres").
func benchEngineOn(b *testing.B, backend, dir string) (*Engine, *store.Store) {
	b.Helper()
	var kv store.KV
	var err error
	if backend == "postgres" {
		kv, err = pgkv.Open(context.Background(), pgtest.URL(b), pgkv.Options{Migrate: true})
	} else {
		kv, err = badgerkv.Open(dir, badgerkv.Options{})
	}
	if err != nil {
		b.Fatal(err)
	}
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		b.Fatal(err)
	}
	cat, err := tools.Parse("bench.yaml", []byte(benchCatalog))
	if err != nil {
		b.Fatal(err)
	}
	fp, _ := fingerprint.New(bytes.Repeat([]byte{9}, 32))
	// The channel is never called (every call awaits approval), but the
	// engine refuses a tool whose channel it does not serve.
	e, err := New(Config{Store: st, Catalog: cat, Fingerprinter: fp, Channels: map[tools.Channel]Channel{tools.ChannelHTTP: &fakeChannel{}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close(); st.Close() })
	return e, st
}

// fsyncP50 measures this machine's fsync of a small append, for comparison.
func fsyncP50(b *testing.B) time.Duration {
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var ds []time.Duration
	for range 200 {
		t := time.Now()
		f.Write([]byte("0123456789abcdef"))
		f.Sync()
		ds = append(ds, time.Since(t))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// commitP50 measures a bare durable commit of one small key through the
// store (Badger with SyncWrites): the floor under any durable Submit.
func commitP50(b *testing.B, st *store.Store) time.Duration {
	var ds []time.Duration
	for i := range 200 {
		t := time.Now()
		err := st.Update(context.Background(), func(tx *store.Tx) error {
			_, err := tx.PutResult(fmt.Sprintf("probe-%d", i), &recordv1.Result{Status: 200})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkSubmit: new executions on a real on-disk Badger with SyncWrites,
// at concurrency 1 and 64. Reports executions/s and p50 latency, the
// processor time per execution of this process and of PostgreSQL
// (cpu-µs/op, db-cpu-µs/op), and the machine's fsync p50 next to it.
func BenchmarkSubmit(b *testing.B) {
	for _, backend := range benchBackends {
		for _, conc := range []int{1, 64} {
			b.Run(fmt.Sprintf("store=%s/conc=%d", backend, conc), func(b *testing.B) {
				e, st := benchEngineOn(b, backend, b.TempDir())
				fs := fsyncP50(b)
				bc := commitP50(b, st)
				var db func() (time.Duration, error)
				if backend == "postgres" {
					db = pgtest.Shared(b).CPU
				}
				cpu := testbin.StartCPU(db)
				testbin.Load(b, conc, func(i int64) error {
					args, _ := json.Marshal(map[string]string{"service": "api", "version": strconv.FormatInt(i, 10)})
					r, err := e.Submit(context.Background(), SubmitInput{Actor: "bench", Tool: "deploy", Arguments: args})
					if err != nil {
						return err
					}
					if r.Disposition != recordv1.Disposition_DISPOSITION_NEW {
						return fmt.Errorf("disposition %v, want new", r.Disposition)
					}
					return nil
				})
				cpu.Report(b)
				b.ReportMetric(float64(fs.Microseconds()), "fsync-p50-µs")
				b.ReportMetric(float64(bc.Microseconds()), "bare-commit-p50-µs")
			})
		}
	}
}

// BenchmarkMatch: an identical retry (attach) against a store already
// holding N executions; matching is one index lookup, so the cost must not
// grow with N. LATCH_BENCH_SIZES overrides the sizes (e.g. "10000,1000000").
func BenchmarkMatch(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if s := os.Getenv("LATCH_BENCH_SIZES"); s != "" {
		sizes = nil
		for _, f := range bytes.Split([]byte(s), []byte(",")) {
			n, err := strconv.Atoi(string(f))
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, backend := range benchBackends {
		for _, size := range sizes {
			b.Run(fmt.Sprintf("store=%s/stored=%d", backend, size), func(b *testing.B) {
				e, st := benchEngineOn(b, backend, b.TempDir())
				preload(b, st, size)
				args := []byte(`{"service":"api","version":"target"}`)
				first, err := e.Submit(context.Background(), SubmitInput{Actor: "bench", Tool: "deploy", Arguments: args})
				if err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for b.Loop() {
					r, err := e.Submit(context.Background(), SubmitInput{Actor: "bench", Tool: "deploy", Arguments: args})
					if err != nil || r.Execution.GetId() != first.Execution.GetId() {
						b.Fatalf("retry did not attach: %v %v", r, err)
					}
				}
			})
		}
	}
}

// preload writes n executions with their fingerprint index, in large groups.
func preload(b *testing.B, st *store.Store, n int) {
	const per = 2000
	for base := 0; base < n; base += per {
		err := st.Update(context.Background(), func(tx *store.Tx) error {
			for i := base; i < min(base+per, n); i++ {
				id := fmt.Sprintf("act_PRELOAD%012d", i)
				x := &recordv1.Execution{Id: id, Fingerprint: "hmac-sha256:" + strconv.Itoa(i), Actor: "bench", Tool: "deploy", State: recordv1.State_STATE_COMPLETED}
				if err := tx.PutExecution(x, true); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
