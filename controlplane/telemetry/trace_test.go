package telemetry_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/latchhq/latch/internal/tracing"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
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

// TestApprovalWaitIsTraced: an execution that waits for approval has an
// approval_wait span (ended by the approval, with the state it moved to),
// and its dispatch, started later by the operator's approval, continues the
// submit's trace from the traceparent kept in the execution's evidence.
func TestApprovalWaitIsTraced(t *testing.T) {
	rcv := newReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.srv.URL)
	st := newObsStack(t, true)
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	ctx := tracing.WithTraceparent(context.Background(), "00-"+traceID+"-b7ad6b7169203331-01", "")
	r, err := st.cp.Submit(ctx, &controlplanev1.SubmitRequest{Actor: "alice", Tool: "rotate_credential", Arguments: []byte(`{"service":"db"}`)})
	if err != nil {
		t.Fatal(err)
	}
	x := r.GetExecution()
	if x.GetState() != recordv1.State_STATE_AWAITING_APPROVAL {
		t.Fatalf("state %v, want awaiting_approval", x.GetState())
	}
	if _, err := st.cp.Approve(context.Background(), &controlplanev1.ApproveRequest{ExecutionId: x.GetId(), Operator: "op", Reason: "ok"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		g, err := st.cp.Get(context.Background(), &controlplanev1.GetRequest{ExecutionId: x.GetId()})
		if err == nil && g.GetExecution().GetState() == recordv1.State_STATE_COMPLETED {
			break
		}
		if i > 600 {
			t.Fatalf("execution did not complete after approval: %v %v", g.GetExecution().GetState(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := st.tracer.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	subs, waits, dispatches := rcv.named("latch.submit"), rcv.named("latch.approval_wait"), rcv.named("latch.dispatch")
	if len(subs) != 1 || len(waits) != 1 || len(dispatches) != 1 {
		t.Fatalf("exported %d submit, %d approval_wait, %d dispatch spans; want one each", len(subs), len(waits), len(dispatches))
	}
	submit := hex.EncodeToString(subs[0].GetSpanId())
	for _, s := range []*tracepb.Span{waits[0], dispatches[0]} {
		if got := hex.EncodeToString(s.GetParentSpanId()); got != submit || hex.EncodeToString(s.GetTraceId()) != traceID {
			t.Errorf("span %q: trace %x parent %s, want trace %s parent %s (the submit span)", s.GetName(), s.GetTraceId(), got, traceID, submit)
		}
	}
	if got := attr(waits[0], "latch.state"); got != "authorized" {
		t.Errorf("approval_wait latch.state = %q, want authorized (the state it ended in)", got)
	}
	if got := attr(waits[0], "latch.execution_id"); got != x.GetId() {
		t.Errorf("approval_wait latch.execution_id = %q, want %s", got, x.GetId())
	}
}
