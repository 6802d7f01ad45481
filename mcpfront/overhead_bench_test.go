package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	receiptv1 "github.com/latchhq/latch/proto/latch/receipt/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// BenchmarkFrontOverhead is the CPU the front adds to a tool call over a
// bare go-sdk server, with the control plane taken away: the front runs on
// instantControlPlane, an in-memory ControlPlaneClient that answers every
// Submit at once with a completed execution and a stored result (no store,
// no gRPC), so what is measured is the front's own HTTP, authentication,
// MCP and answer-building work, as in `latch dev` (bearer tokens through
// the control plane's AuthenticateAgent, cached; delivery recorded after
// the answer). The bare servers answer the same target body at once, with
// the same input schema as the front's tool ("bare-same-schema": the SDK
// re-reads a tool's input schema on every call) and with {"type":"object"}.
// Compare ns/op, B/op and allocs/op of one run:
//
//	go test -run '^$' -bench FrontOverhead -benchmem -benchtime 3000x ./mcpfront/
func BenchmarkFrontOverhead(b *testing.B) {
	tools, rc := realTools(b)
	var schema json.RawMessage
	for _, t := range tools.GetTools() {
		if t.GetName() == "deploy_release" {
			schema = t.GetInputSchema()
		}
	}
	for _, conc := range []int{1, 32} {
		b.Run(fmt.Sprintf("front/c=%d", conc), func(b *testing.B) {
			cp := &instantControlPlane{tools: tools, receipt: rc}
			url := instantFront(b, cp)
			runCalls(b, connectN(b, url, conc, "latch_bench_token_0123456789"), "deploy_release")
			if got := cp.submits.Load(); got != int64(b.N) {
				b.Fatalf("submits = %d, want %d", got, b.N)
			}
		})
		b.Run(fmt.Sprintf("bare-same-schema/c=%d", conc), func(b *testing.B) {
			runCalls(b, connectN(b, instantBare(b, schema), conc, ""), "deploy_release")
		})
		b.Run(fmt.Sprintf("bare/c=%d", conc), func(b *testing.B) {
			runCalls(b, connectN(b, instantBare(b, json.RawMessage(`{"type":"object"}`)), conc, ""), "deploy_release")
		})
	}
}

// demoAnswer is what the demo target answers a deploy (devstack).
const demoAnswer = `{"release_id":"rel_0123456789","service":"api","version":"v1","region":"us-east-1","status":"deployed"}`

// realTools is the catalog the real control plane serves the test stack,
// and the receipt of one of its executions (what the front's answers carry).
func realTools(b *testing.B) (*controlplanev1.ListToolsResponse, *receiptv1.Receipt) {
	st := newTestStack(b, stackOptions{Quiet: true})
	resp, err := st.CP.ListTools(b.Context(), &controlplanev1.ListToolsRequest{})
	if err != nil {
		b.Fatal(err)
	}
	r, err := st.CP.Submit(b.Context(), &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy_release", Arguments: []byte(`{"service":"api","version":"v1"}`), WaitMs: 10_000, Receipt: true})
	if err != nil || r.GetReceipt() == nil {
		b.Fatalf("Submit for a receipt = %v, %v", r, err)
	}
	return resp, r.GetReceipt()
}

// instantControlPlane is an in-memory control plane for measuring the
// front alone: every Submit is a new execution, completed, with its result.
type instantControlPlane struct {
	controlplanev1.ControlPlaneClient
	tools              *controlplanev1.ListToolsResponse
	receipt            *receiptv1.Receipt // answered when a Submit asks for one
	submits, delivered atomic.Int64
}

func (c *instantControlPlane) ListTools(context.Context, *controlplanev1.ListToolsRequest, ...grpc.CallOption) (*controlplanev1.ListToolsResponse, error) {
	return c.tools, nil
}

func (c *instantControlPlane) AuthenticateAgent(_ context.Context, req *controlplanev1.AuthenticateAgentRequest, _ ...grpc.CallOption) (*controlplanev1.AuthenticateAgentResponse, error) {
	return &controlplanev1.AuthenticateAgentResponse{Actor: "alice", TokenId: "tok_alice"}, nil
}

func (c *instantControlPlane) Submit(_ context.Context, req *controlplanev1.SubmitRequest, _ ...grpc.CallOption) (*controlplanev1.SubmitResponse, error) {
	n := c.submits.Add(1)
	now := timestamppb.Now()
	var rc *receiptv1.Receipt
	if req.GetReceipt() {
		rc = c.receipt
	}
	return &controlplanev1.SubmitResponse{
		Receipt:     rc,
		Disposition: recordv1.Disposition_DISPOSITION_NEW,
		Execution: &recordv1.Execution{
			Id: fmt.Sprintf("act_%026d", n), Actor: req.GetActor(), Tool: req.GetTool(), State: recordv1.State_STATE_COMPLETED,
			Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, TargetStatus: 201, AcceptedAt: now, DispatchedAt: now, CompletedAt: now,
			ResultRef: "r", ResultSha256: make([]byte, 32),
		},
		Result: &recordv1.Result{Status: 201, Body: []byte(demoAnswer)},
	}, nil
}

func (c *instantControlPlane) MarkDelivered(context.Context, *controlplanev1.MarkDeliveredRequest, ...grpc.CallOption) (*controlplanev1.MarkDeliveredResponse, error) {
	c.delivered.Add(1)
	return &controlplanev1.MarkDeliveredResponse{}, nil
}

func (c *instantControlPlane) EndSession(context.Context, *controlplanev1.EndSessionRequest, ...grpc.CallOption) (*controlplanev1.EndSessionResponse, error) {
	return &controlplanev1.EndSessionResponse{}, nil
}

// instantFront serves a front on cp with bearer tokens checked by cp.
func instantFront(b *testing.B, cp *instantControlPlane) string {
	verifier, err := NewControlPlaneTokens(cp, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	f, err := New(Config{Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn}), ControlPlane: cp, Tokens: verifier})
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(b.Context()); err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(f.HTTPHandler())
	b.Cleanup(func() { hs.Close(); _ = f.Close() })
	return hs.URL + "/mcp"
}

// instantBare is a go-sdk server whose deploy_release answers demoAnswer.
func instantBare(b *testing.B, schema json.RawMessage) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "deploy_release", InputSchema: schema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: demoAnswer}}}, nil
		})
	get := func(*http.Request) *mcp.Server { return srv }
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true}))
	b.Cleanup(hs.Close)
	return hs.URL
}

// connectN opens n sessions (the Go client's default era, 2026-07-28, as
// latch bench uses), with token as bearer when set.
func connectN(b *testing.B, url string, n int, token string) []*mcp.ClientSession {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = n
	var rt http.RoundTripper = t
	if token != "" {
		rt = bearer{token: token, base: t}
	}
	out := make([]*mcp.ClientSession, n)
	for i := range out {
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := client.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		out[i] = cs
	}
	return out
}
