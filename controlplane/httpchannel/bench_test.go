package httpchannel

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/httpdispatch"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/controlplane/store/pgkv"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/testing/pgtest"
	"github.com/latchhq/latch/internal/testing/testbin"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

const benchCatalog = `
targets:
  api: {channel: http, base_url: "%s", allow_private: true, idempotency_header: Idempotency-Key}
tools:
  deploy_release:
    description: Deploy.
    input_schema: {type: object, required: [service, version], properties: {service: {type: string}, version: {type: string}, region: {type: string}}}
    defaults: {region: us-east-1}
    target: api
    request: {method: POST, path: /v1/releases, body: {service: "{{service}}", version: "{{version}}", region: "{{region}}"}}
    replay: idempotency_key
`

// BenchmarkDurablePath is the whole durable path: submit (accepted +
// authorized), dispatched, the HTTP call, completed — on Badger with
// SyncWrites, and on PostgreSQL (a real server on this machine, fsync and
// synchronous_commit on) — next to a plain Go HTTP client calling the same
// target. The target runs in a process of its own: cpu-µs/op is this
// process's processor time per action (the engine, the store and the load
// generator's calls; on the plain path the HTTP client), target-cpu-µs/op
// the target's and db-cpu-µs/op PostgreSQL's (all its processes).
func BenchmarkDurablePath(b *testing.B) {
	ts := startDemoProcess(b)
	for _, conc := range []int{1, 64} {
		for _, backend := range []string{"badger", "postgres"} {
			b.Run(fmt.Sprintf("latch/store=%s/conc=%d", backend, conc), func(b *testing.B) {
				var kv store.KV
				var err error
				if backend == "postgres" {
					kv, err = pgkv.Open(context.Background(), pgtest.URL(b), pgkv.Options{Migrate: true})
				} else {
					kv, err = badgerkv.Open(b.TempDir(), badgerkv.Options{})
				}
				if err != nil {
					b.Fatal(err)
				}
				st, _ := store.New(store.Config{KV: kv})
				defer st.Close()
				cat, err := tools.Parse("bench.yaml", []byte(fmt.Sprintf(benchCatalog, ts.URL)))
				if err != nil {
					b.Fatal(err)
				}
				d, _ := httpdispatch.New(httpdispatch.Config{})
				defer d.Close()
				ch, _ := New(Config{Dispatcher: d})
				fp, _ := fingerprint.New(bytes.Repeat([]byte{3}, 32))
				e, err := engine.New(engine.Config{Store: st, Catalog: cat, Fingerprinter: fp, Channels: map[tools.Channel]engine.Channel{tools.ChannelHTTP: ch}})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				prefix := fmt.Sprintf("c%d-%d-", conc, time.Now().UnixNano())
				var db func() (time.Duration, error)
				if backend == "postgres" {
					db = pgtest.Shared(b).CPU
				}
				cpu := testbin.StartCPU(db).Also("target", ts.CPU)
				defer cpu.Report(b)
				testbin.Load(b, conc, func(i int64) error {
					r, err := e.Submit(context.Background(), engine.SubmitInput{Actor: "bench", Tool: "deploy_release",
						Arguments: []byte(`{"service":"api","version":"` + prefix + strconv.FormatInt(i, 10) + `"}`)})
					if err != nil {
						return err
					}
					// The wait of the API's Submit with wait_ms.
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					x := e.AwaitResting(ctx, r.Execution, func(x *recordv1.Execution) bool { return lifecycle.Resting(x.GetState()) })
					if x.GetState() != recordv1.State_STATE_COMPLETED {
						return fmt.Errorf("execution %s is %s, not completed", x.GetId(), lifecycle.Name(x.GetState()))
					}
					if x.GetOutcome() != recordv1.Outcome_OUTCOME_SUCCEEDED {
						return fmt.Errorf("outcome %v", x.GetOutcome())
					}
					return nil
				})
			})
		}
		b.Run(fmt.Sprintf("plain/conc=%d", conc), func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			prefix := fmt.Sprintf("p%d-%d-", conc, time.Now().UnixNano())
			cpu := testbin.StartCPU(nil).Also("target", ts.CPU)
			defer cpu.Report(b)
			testbin.Load(b, conc, func(i int64) error {
				body := `{"service":"api","version":"` + prefix + strconv.FormatInt(i, 10) + `","region":"us-east-1"}`
				req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/releases", bytes.NewReader([]byte(body)))
				req.Header.Set("Idempotency-Key", prefix+strconv.FormatInt(i, 10))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					return fmt.Errorf("status %d", resp.StatusCode)
				}
				return nil
			})
		})
	}
}
