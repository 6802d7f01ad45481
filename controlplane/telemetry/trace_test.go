package telemetry_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

func attr(s *tracepb.Span, key string) string {
	for _, a := range s.GetAttributes() {
		if a.GetKey() == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestTraceFromAgentToTarget: the agent's traceparent in `_meta` is the
// parent of the front's tools/call span, whose child is the control plane's
// submit span (across the gRPC hop), whose child is the dispatch span, whose
// context the HTTP target receives in its traceparent header: one trace from
// agent to target, exported over OTLP/HTTP.
func TestTraceFromAgentToTarget(t *testing.T) {
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(era, func(t *testing.T) {
			rcv := newReceiver(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.srv.URL)
			st := newObsStack(t, true)
			cs := st.connect(t, era)
			const traceID, agentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{
				Name: "deploy_release", Arguments: map[string]any{"service": "api", "version": "1.0"},
				Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + agentSpan + "-01"},
			})
			if err != nil || res.IsError {
				t.Fatalf("CallTool: %v %v", res, err)
			}
			if err := st.tracer.Shutdown(context.Background()); err != nil { // flush
				t.Fatalf("flushing spans: %v", err)
			}
			one := func(name string) *tracepb.Span {
				t.Helper()
				got := rcv.named(name)
				if len(got) != 1 {
					t.Fatalf("exported %d %q spans, want 1", len(got), name)
				}
				if id := hex.EncodeToString(got[0].GetTraceId()); id != traceID {
					t.Errorf("span %q has trace %s, want the agent's %s", name, id, traceID)
				}
				return got[0]
			}
			front, submit, dispatch := one("mcp tools/call"), one("latch.submit"), one("latch.dispatch")
			for _, c := range []struct {
				child  *tracepb.Span
				parent string
				what   string
			}{
				{front, agentSpan, "the agent's span"},
				{submit, hex.EncodeToString(front.GetSpanId()), "the front's tools/call span"},
				{dispatch, hex.EncodeToString(submit.GetSpanId()), "the submit span"},
			} {
				if got := hex.EncodeToString(c.child.GetParentSpanId()); got != c.parent {
					t.Errorf("span %q has parent %s, want %s (%s)", c.child.GetName(), got, c.parent, c.what)
				}
			}
			id := attr(submit, "latch.execution_id")
			if !strings.HasPrefix(id, "act_") || attr(dispatch, "latch.execution_id") != id || attr(front, "latch.execution_id") != id {
				t.Errorf("latch.execution_id: front %q, submit %q, dispatch %q; want one act_ ID on all three",
					attr(front, "latch.execution_id"), id, attr(dispatch, "latch.execution_id"))
			}
			if got := attr(submit, "latch.disposition"); got != "new" {
				t.Errorf("submit span latch.disposition = %q, want new", got)
			}
			if got := attr(dispatch, "latch.tool"); got != "deploy_release" {
				t.Errorf("dispatch span latch.tool = %q, want deploy_release", got)
			}
			st.target.mu.Lock()
			tps := st.target.tps
			st.target.mu.Unlock()
			want := "00-" + traceID + "-" + hex.EncodeToString(dispatch.GetSpanId()) + "-01"
			if len(tps) != 1 || tps[0] != want {
				t.Errorf("target received traceparent %q, want %q (the dispatch span)", tps, want)
			}
		})
	}
}

// TestNoTracingWithoutEndpoint: without OTEL_EXPORTER_OTLP_* nothing is
// exported, and the target still receives the agent's own trace context
// (the front continues it even when it records nothing).
func TestNoTracingWithoutEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	st := newObsStack(t, true)
	if st.tracer.Enabled() {
		t.Fatal("tracing is on without an OTLP endpoint")
	}
	cs := st.connect(t, "2025-11-25")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name: "deploy_release", Arguments: map[string]any{"service": "api", "version": "2.0"},
		Meta: mcp.Meta{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	})
	if err != nil || res.IsError {
		t.Fatalf("CallTool: %v %v", res, err)
	}
	st.target.mu.Lock()
	defer st.target.mu.Unlock()
	if len(st.target.tps) != 1 || !strings.Contains(st.target.tps[0], "4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Errorf("target received traceparent %q, want the agent's trace", st.target.tps)
	}
}
