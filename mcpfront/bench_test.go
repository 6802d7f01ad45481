package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// BenchmarkToolCall measures tool calls per second through the front (go-sdk
// client → HTTP → front → control plane → HTTP effect) against a bare go-sdk
// MCP server whose tool makes the same HTTP call with no durability and no
// identity. Every call is a new intent (a fresh version argument), so every
// call is a new execution and one effect.
//
// The front runs on newTestStack: the real control plane (Badger with
// SyncWrites) over gRPC. "controlplane" makes the same calls straight to the
// control plane's gRPC API (Submit, then Watch until completed), without MCP.
//
//	go test -run '^$' -bench ToolCall -benchtime 2000x ./mcpfront/
//
// Where the time goes (profiled 2026-12-01 on the 2-core shared dev VM, load
// average ~19, front era=2025-11-25; CPU and block profiles of this
// benchmark, which runs front and control plane in one process, plus
// runtime/trace at c=1; same-run figures: c=1 front 135 calls/s vs bare 624,
// c=32 front 304 vs bare 604):
//
//   - c=1 (7.4 ms a call): the WAL syncs are ~2.3 ms (trace syscall
//     profile: Badger msync, two group commits per call: the Submit's
//     accepted+dispatched write and the completion write). The control
//     plane's Submit RPC holds ~5.3 ms of the call (block profile:
//     store.Update waiting on its commit ~2.9 ms, waitResting ~2.5 ms,
//     which includes the dispatch to the target and the second commit).
//     The rest is goroutine wake-up latency on an overloaded machine: the
//     trace's scheduler-latency profile sums to ~5.9 ms of runnable waiting
//     per call across the goroutines of the call (chansend wake-ups of the
//     store writer/committer, gRPC and jsonrpc2 loops). CPU is under half a
//     core; c=1 is latency, not work.
//   - c=32 (CPU-bound on 2 cores): go-sdk JSON decoding is the largest
//     single item, ~11% of CPU, most of it segmentio/encoding/json
//     Decoder.readValue allocating and zeroing large buffers per message
//     (mallocgcLarge + memclr; client Await/CallToolResult decoding and
//     the server's DecodeMessage/readBatch); gRPC framing ~16%; the store's
//     read verification on the wait path (engine.Get → store.Verified →
//     checkCommitted, which also waits on Badger's read watermark) ~5%;
//     argument schema validation (tools.PrepareArguments) ~4%; Badger
//     commit work ~5%.
//
// The second pass (latch bench --profile and per-stage timers, docs/contributing/benchmarks.md "Where
// the time of an MCP call goes") found what the watermark wait cost: every
// store read that missed the cache waited for the commit in flight, and at
// c=1 the commit in flight was the previous call's delivered write. Fixed
// since: reads use a snapshot (badgerkv.KV), delivered rides in the next
// group (store.UpdateLazy), the Submit wait no longer re-reads and re-checks
// the execution (engine.AwaitResting), and the group being built stays open
// while the one before it syncs.
func BenchmarkToolCall(b *testing.B) {
	for _, conc := range []int{1, 32} {
		b.Run(fmt.Sprintf("front/era=2025-11-25/c=%d", conc), func(b *testing.B) {
			st := newTestStack(b, stackOptions{Quiet: true})
			sessions := make([]*mcp.ClientSession, conc)
			for i := range sessions {
				sessions[i] = st.connect(b, "alice", clientOptions{Era: eraSession})
			}
			runCalls(b, sessions, "deploy_release")
			if got := st.effect.count("/v1/releases"); got != b.N {
				b.Fatalf("effects = %d, want %d", got, b.N)
			}
		})
		b.Run(fmt.Sprintf("front/era=2026-07-28/c=%d", conc), func(b *testing.B) {
			st := newTestStack(b, stackOptions{Quiet: true})
			sessions := make([]*mcp.ClientSession, conc)
			for i := range sessions {
				sessions[i] = st.connect(b, "alice", clientOptions{Era: eraStateless})
			}
			runCalls(b, sessions, "deploy_release")
		})
		b.Run(fmt.Sprintf("controlplane/c=%d", conc), func(b *testing.B) {
			st := newTestStack(b, stackOptions{Quiet: true})
			testbin.Load(b, conc, func(i int64) error { return directCall(st, fmt.Sprintf("v%d", i)) })
		})
		b.Run(fmt.Sprintf("bare/c=%d", conc), func(b *testing.B) {
			url, count := bareServer(b)
			sessions := make([]*mcp.ClientSession, conc)
			for i := range sessions {
				client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
				cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: eraSession})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { cs.Close() })
				sessions[i] = cs
			}
			runCalls(b, sessions, "deploy_release")
			if got := count.Load(); got != int64(b.N) {
				b.Fatalf("effects = %d, want %d", got, b.N)
			}
		})
	}
}

// directCall submits one deploy to the control plane and waits for its
// completion on the Watch stream.
func directCall(st *testStack, version string) error {
	ctx := context.Background()
	r, err := st.CP.Submit(ctx, &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy_release", Arguments: []byte(`{"service":"api","version":"` + version + `"}`)})
	if err != nil {
		return err
	}
	w, err := st.CP.Watch(ctx, &controlplanev1.WatchRequest{ExecutionId: r.GetExecution().GetId()})
	if err != nil {
		return err
	}
	for {
		m, err := w.Recv()
		if err != nil {
			return err
		}
		if m.GetExecution().GetState() == recordv1.State_STATE_COMPLETED {
			return nil
		}
	}
}

// runCalls makes b.N calls spread over the sessions, one worker per session.
func runCalls(b *testing.B, sessions []*mcp.ClientSession, tool string) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for _, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"service": "api", "version": fmt.Sprintf("v%d", i)}})
				if err != nil || res.IsError {
					b.Errorf("CallTool #%d: %v %v", i, res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// bareServer is a go-sdk MCP server (stateful, no event store) whose tool
// forwards one HTTP POST to a loopback target.
func bareServer(b *testing.B) (string, *atomic.Int64) {
	var count atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"ok":true,"request":%s}`, body)
	}))
	b.Cleanup(target.Close)
	srv := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "deploy_release", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, target.URL+"/v1/releases", bytes.NewReader(req.Params.Arguments))
			resp, err := http.DefaultClient.Do(hreq)
			if err != nil {
				return nil, err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(body)}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	b.Cleanup(hs.Close)
	return hs.URL, &count
}
