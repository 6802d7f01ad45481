package mcpchannel

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/internal/redact"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

func newTestChannel(t *testing.T, cfg Config) *Channel {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIdentityIsPinned: the identity enters the fingerprint; it must not
// change across releases for an unchanged catalog entry.
func TestIdentityIsPinned(t *testing.T) {
	cat, err := tools.Parse("c.yaml", []byte(`
upstreams:
  gh:
    transport: stdio
    command: [/usr/bin/gh-mcp, --stdio]
    cwd: /srv
  pay:
    transport: http
    url: https://mcp.pay.example.test/mcp
tools:
  gh.create_issue: {upstream: gh, tool: create_issue, replay: review}
  pay.refund: {upstream: pay, tool: refund, replay: review}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := newTestChannel(t, Config{})
	c.setCatalog(cat)
	for name, want := range map[string]engine.Identity{
		"gh.create_issue": {Method: "tools/call", Target: "stdio:gh#create_issue", Command: []string{"/usr/bin/gh-mcp", "--stdio"}, Cwd: "/srv"},
		"pay.refund":      {Method: "tools/call", Target: "https://mcp.pay.example.test/mcp#refund"},
	} {
		tl := cat.Tools[name]
		if diff := cmp.Diff(want, c.Identity(tl, cat.TargetOf(tl))); diff != "" {
			t.Errorf("Identity(%s) (-want +got):\n%s", name, diff)
		}
	}
}

func TestExecutionIDIn(t *testing.T) {
	for in, want := range map[string]string{
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.latch/execution_id":"act_01J"},"name":"x"}}`: "act_01J",
		`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`:                                                                   "",
		`{"_meta":{"io.latch/execution_id":""}}`:                                                                           "",
	} {
		if got := executionIDIn([]byte(in)); got != want {
			t.Errorf("executionIDIn(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestClassify walks the failure classes of the package doc.
func TestClassify(t *testing.T) {
	c := newTestChannel(t, Config{MaxResult: 64})
	u := &upstream{c: c, spec: tools.Upstream{Name: "up"}, red: redact.New([][]byte{[]byte("tok-secret")})}
	call := engine.Call{Tool: &tools.Tool{UpstreamAction: tools.UpstreamAction{UpstreamTool: "t"}}}
	written, unsent := &attemptTrack{}, &attemptTrack{}
	written.written.Store(true)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	for _, tc := range []struct {
		name    string
		tr      *attemptTrack
		res     *mcp.CallToolResult
		err     error
		class   engine.AttemptClass
		outcome recordv1.Outcome
		final   bool
	}{
		{"answer", written, text("ok"), nil, engine.Observed, recordv1.Outcome_OUTCOME_SUCCEEDED, false},
		{"isError", written, &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no"}}}, nil, engine.Observed, recordv1.Outcome_OUTCOME_FAILED_AT_TARGET, false},
		{"JSON-RPC error", written, nil, &jsonrpc.Error{Code: -32000, Message: "boom"}, engine.Observed, recordv1.Outcome_OUTCOME_FAILED_AT_TARGET, false},
		{"method not found", written, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no"}, engine.NotSent, 0, true},
		{"invalid params", written, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown tool"}, engine.NotSent, 0, true},
		{"cut after write", written, nil, errors.New("connection closed"), engine.Unknown, 0, false},
		{"never written", unsent, nil, errors.New("connection refused"), engine.NotSent, 0, false},
		{"lost session", written, nil, mcp.ErrSessionMissing, engine.NotSent, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := c.classify(u, call, tc.tr, tc.res, tc.err)
			if a.Class != tc.class || a.Outcome != tc.outcome || a.Final != tc.final {
				t.Errorf("classify = class %v outcome %v final %v (%s), want %v %v %v", a.Class, a.Outcome, a.Final, a.Reason, tc.class, tc.outcome, tc.final)
			}
		})
	}

	// Results: capped, the upstream credential redacted.
	a := c.classify(u, call, written, text("echo tok-secret "+strings.Repeat("x", 100)), nil)
	if b := a.Result.GetBody(); len(b) != 64 || !a.Result.GetBodyTruncated() || strings.Contains(string(b), "tok-secret") || !strings.Contains(string(b), "[REDACTED]") {
		t.Errorf("capped result = %q (truncated %v), want 64 bytes, truncated, credential redacted", b, a.Result.GetBodyTruncated())
	}
	if strings.Contains(a.Result.GetSummary(), "tok-secret") {
		t.Errorf("summary %q carries the credential", a.Result.GetSummary())
	}
}

// TestDispatchTooLateSendsNothing: a dispatch that starts its whole timeout
// after its recorded send time writes nothing (Call.Budget): the engine's
// unknown verdict counts from that record.
func TestDispatchTooLateSendsNothing(t *testing.T) {
	c := newTestChannel(t, Config{})
	tool := &tools.Tool{UpstreamAction: tools.UpstreamAction{UpstreamTool: "t"}}
	target := &tools.Target{Name: "up"}
	call := engine.Call{Execution: &recordv1.Execution{Id: "act_1"}, Tool: tool, Target: target, Delay: tool.DispatchTimeout(target)}
	a := c.Dispatch(t.Context(), call)
	if a.Class != engine.NotSent || !strings.Contains(a.Reason, "after it was recorded") {
		t.Errorf("Dispatch = %v (%s), want NotSent because it started past its timeout", a.Class, a.Reason)
	}
}
