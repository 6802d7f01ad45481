package mcpfront

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/internal/mcpwire"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/receipt"
)

// A long deploy returns a task at once (the go-sdk client, 2026-07-28, with
// the tasks extension); tasks/get follows it to completion with one effect;
// a new client polls the same task; the identical call attaches to it;
// another actor's tasks/get is refused; reading the result delivers it.
func TestTasksModernLongCall(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension(ExtensionTasks, nil)
	cs := st.connect(t, "alice", clientOptions{Capabilities: caps})
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow_job", Arguments: map[string]any{"job": "task-1"}})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	rel, _ := res.Meta[MetaRelatedTask].(map[string]any)
	id, _ := rel["taskId"].(string)
	key := st.waitArrived(t)
	if id == "" || id != key {
		t.Fatalf("CreateTaskResult _meta = %v, want the related task = execution %s", res.Meta, key)
	}
	_ = cs.Close() // the connection goes away mid-task

	c := st.rpc(t, "alice", eraModern)
	m := c.get(id)
	if m["status"] != "working" || m["resultType"] != "complete" || m["ttlMs"] != float64(2*time.Hour/time.Millisecond) || m["pollIntervalMs"] == nil {
		t.Errorf("tasks/get while dispatched = %v, want working, ttlMs 7200000, a pollIntervalMs", m)
	}
	if _, ok := m["result"]; ok {
		t.Errorf("working task carries a result: %v", m)
	}
	again := c.callTask("slow_job", map[string]any{"job": "task-1"})
	if again["taskId"] != id {
		t.Errorf("identical call = task %v, want the same task %s", again["taskId"], id)
	}
	if _, rerr := st.rpc(t, "bob", eraModern).do("tasks/get", map[string]any{"taskId": id}, ""); rerr == nil || rerr.Code != -32602 {
		t.Errorf("bob's tasks/get = %v, want -32602 (not among his tasks)", rerr)
	}
	st.effect.release()
	done := c.pollUntil(id, mcpwire.TaskCompleted)
	result, _ := done["result"].(map[string]any)
	sc, _ := result["structuredContent"].(map[string]any)
	if result["isError"] == true || sc["execution_id"] != id || (sc["state"] != "completed" && sc["state"] != "delivered") {
		t.Errorf("completed task result = %v, want the execution's successful tool result", result)
	}
	if _, ok := result["_meta"].(map[string]any)[MetaRelatedTask]; ok {
		t.Errorf("inlined result carries %s; the extension forbids it", MetaRelatedTask)
	}
	// The task's result carries the execution's receipt, as a call's does.
	rb, _ := json.Marshal(sc["receipt"])
	if r, err := receipt.Parse(rb); err != nil {
		t.Errorf("completed task result's receipt = %s: %v", rb, err)
	} else if _, err := receipt.Verify(r, st.verifier); err != nil || r.ExecutionID != id {
		t.Errorf("receipt.Verify(task result's receipt of %s) = %v, want it verified for %s", r.ExecutionID, err, id)
	}
	if n := st.effect.count("/slow"); n != 1 {
		t.Errorf("effect count = %d, want 1", n)
	}
	st.waitState(t, id, recordv1.State_STATE_DELIVERED)
}

// The 2026-07-28 protocol rules: no extension, no tasks; routing headers;
// no tasks/result; required tools need the extension.
func TestTasksModernProtocolErrors(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	c := st.rpc(t, "alice", eraModern)
	task := c.callTask("deploy_release", map[string]any{"service": "api", "version": "1"})
	id := task["taskId"].(string)
	if _, rerr := c.do("tasks/get", map[string]any{"taskId": id}, "act_other"); rerr == nil || rerr.Code != mcp.CodeHeaderMismatch || rerr.HTTP != 400 {
		t.Errorf("tasks/get with Mcp-Name of another task = %v, want -32020 HTTP 400", rerr)
	}
	if _, rerr := c.do("tasks/result", map[string]any{"taskId": id}, ""); rerr == nil || rerr.Code != -32601 {
		t.Errorf("tasks/result = %v, want -32601 (removed in 2026-07-28)", rerr)
	}
	if _, rerr := c.do("tasks/get", map[string]any{"taskId": "act_unknown"}, ""); rerr == nil || rerr.Code != -32602 {
		t.Errorf("tasks/get of an unknown task = %v, want -32602", rerr)
	}
	plain := st.rpc(t, "alice", eraModern)
	plain.tasks = false
	if _, rerr := plain.do("tasks/get", map[string]any{"taskId": id}, ""); rerr == nil || rerr.Code != mcp.CodeMissingRequiredClientCapabilities {
		t.Errorf("tasks/get without the extension = %v, want -32021", rerr)
	}
	sync := plain.must("tools/call", map[string]any{"name": "deploy_release", "arguments": map[string]any{"service": "api", "version": "2"}})
	if sync["resultType"] == "task" || sync["taskId"] != nil {
		t.Errorf("tools/call without the extension = %v, want a plain tool result", sync)
	}
	if u := c.must("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{}}); u["resultType"] != "complete" {
		t.Errorf("tasks/update = %v, want the empty ack", u)
	}
}

// An approval-gated call returns a task; the task says what it waits for
// and the command; the operator approves; the task completes. A second
// approval-gated task is cancelled before dispatch.
func TestTasksApprovalAndCancel(t *testing.T) {
	for _, era := range []string{eraModern, eraSession} {
		t.Run(era, func(t *testing.T) {
			st := newTestStack(t, stackOptions{})
			c := st.rpc(t, "alice", era)
			task := c.callTask("approved_job", map[string]any{"job": "a-" + era})
			id := task["taskId"].(string)
			msg, _ := task["statusMessage"].(string)
			if task["status"] != "working" || !strings.Contains(msg, "latch approvals approve "+id) {
				t.Errorf("approval-gated task = %v, want working with the approve command", task)
			}
			if _, err := st.CP.Approve(t.Context(), &controlplanev1.ApproveRequest{ExecutionId: id, Operator: "ops"}); err != nil {
				t.Fatalf("Approve: %v", err)
			}
			c.pollUntil(id, mcpwire.TaskCompleted)
			if n := st.effect.count("/approved"); n != 1 {
				t.Errorf("effect count = %d, want 1", n)
			}

			second := c.callTask("approved_job", map[string]any{"job": "b-" + era})
			sid := second["taskId"].(string)
			raw, rerr := c.do("tasks/cancel", map[string]any{"taskId": sid}, "")
			if rerr != nil {
				t.Fatalf("tasks/cancel before dispatch: %v", rerr)
			}
			var ack map[string]any
			_ = json.Unmarshal(raw, &ack)
			if era == eraModern && ack["resultType"] != "complete" {
				t.Errorf("tasks/cancel = %v, want the empty ack", ack)
			}
			done := c.pollUntil(sid, mcpwire.TaskCompleted)
			if era == eraModern {
				if r, _ := done["result"].(map[string]any); r["isError"] != true {
					t.Errorf("cancelled task = %v, want completed with an isError result", done)
				}
			}
			if got := st.get(t, sid).GetState(); got != recordv1.State_STATE_CANCELLED {
				t.Errorf("execution state = %v, want cancelled", got)
			}
			if n := st.effect.count("/approved"); n != 1 {
				t.Errorf("effect count after the cancel = %d, want 1", n)
			}
		})
	}
}

// A cancel after dispatch says the execution is in flight and will not be
// sent again; the task completes with the one effect.
func TestTasksCancelAfterDispatch(t *testing.T) {
	for _, era := range []string{eraModern, eraSession} {
		t.Run(era, func(t *testing.T) {
			st := newTestStack(t, stackOptions{})
			c := st.rpc(t, "alice", era)
			id := c.callTask("slow_job", map[string]any{"job": "c-" + era})["taskId"].(string)
			st.waitArrived(t)
			raw, rerr := c.do("tasks/cancel", map[string]any{"taskId": id}, "")
			note := ""
			if era == eraModern {
				var ack struct {
					ResultType string            `json:"resultType"`
					Meta       map[string]string `json:"_meta"`
				}
				if rerr != nil || json.Unmarshal(raw, &ack) != nil || ack.ResultType != "complete" {
					t.Fatalf("tasks/cancel = %s, %v; want the ack", raw, rerr)
				}
				note = ack.Meta["latch/note"]
			} else {
				if rerr == nil || rerr.Code != -32602 {
					t.Fatalf("tasks/cancel after dispatch = %s, %v; want -32602", raw, rerr)
				}
				note = rerr.Message
			}
			if !strings.Contains(note, "in flight") || !strings.Contains(note, "will not send it again") {
				t.Errorf("cancel answer %q, want it to say in flight and not sent again", note)
			}
			st.effect.release()
			c.pollUntil(id, mcpwire.TaskCompleted)
			if got := st.get(t, id).GetState(); got == recordv1.State_STATE_CANCELLED {
				t.Errorf("a dispatched execution was cancelled")
			}
			if n := st.effect.count("/slow"); n != 1 {
				t.Errorf("effect count = %d, want 1", n)
			}
		})
	}
}

// 2025-11-25: the capability and execution.taskSupport are advertised; a
// task-augmented call answers {task}; a second session polls it; tasks/result
// blocks until the end and carries the related-task _meta; tasks/list shows
// only the caller's tasks; the result read is the delivery.
func TestTasksSessionEra(t *testing.T) {
	st := newTestStack(t, stackOptions{})
	c := st.rpc(t, "alice", eraSession)
	var init struct {
		Capabilities struct {
			Tasks map[string]any `json:"tasks"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(c.initialized, &init)
	if init.Capabilities.Tasks["requests"] == nil || init.Capabilities.Tasks["cancel"] == nil || init.Capabilities.Tasks["list"] == nil {
		t.Errorf("initialize capabilities.tasks = %v, want list, cancel and requests.tools.call", init.Capabilities.Tasks)
	}
	list := c.must("tools/list", nil)
	support := map[string]string{}
	for _, it := range list["tools"].([]any) {
		tl := it.(map[string]any)
		ex, _ := tl["execution"].(map[string]any)
		support[tl["name"].(string)], _ = ex["taskSupport"].(string)
	}
	if support["slow_job"] != "optional" || support["read_status"] != "forbidden" || support[ToolExecutionStatus] != "forbidden" {
		t.Errorf("execution.taskSupport = %v, want slow_job optional, read-only and built-ins forbidden", support)
	}
	if _, rerr := c.do("tools/call", map[string]any{"name": "read_status", "arguments": map[string]any{}, "task": map[string]any{}}, ""); rerr == nil || rerr.Code != -32601 {
		t.Errorf("task-augmented call of a forbidden tool = %v, want -32601", rerr)
	}

	task := c.callTask("slow_job", map[string]any{"job": "legacy"})
	id := task["taskId"].(string)
	if task["status"] != "working" || task["ttl"] != float64(2*time.Hour/time.Millisecond) {
		t.Errorf("CreateTaskResult task = %v, want working with ttl 7200000", task)
	}
	st.waitArrived(t)
	other := st.rpc(t, "alice", eraSession) // a new client after a drop
	if m := other.get(id); m["status"] != "working" {
		t.Errorf("tasks/get from a new session = %v, want working", m)
	}
	if _, rerr := st.rpc(t, "bob", eraSession).do("tasks/get", map[string]any{"taskId": id}, ""); rerr == nil || rerr.Code != -32602 {
		t.Errorf("bob's tasks/get = %v, want -32602", rerr)
	}
	l := other.must("tasks/list", nil)
	if ts, _ := l["tasks"].([]any); len(ts) != 1 || ts[0].(map[string]any)["taskId"] != id {
		t.Errorf("tasks/list = %v, want alice's one task", l)
	}
	if l := st.rpc(t, "bob", eraSession).must("tasks/list", nil); len(l["tasks"].([]any)) != 0 {
		t.Errorf("bob's tasks/list = %v, want none", l)
	}

	type answer struct {
		raw  json.RawMessage
		rerr *rpcErr
	}
	got := make(chan answer, 1)
	go func() {
		raw, rerr := other.do("tasks/result", map[string]any{"taskId": id}, "")
		got <- answer{raw, rerr}
	}()
	st.effect.release()
	var a answer
	select {
	case a = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("tasks/result did not answer after the task completed")
	}
	if a.rerr != nil {
		t.Fatalf("tasks/result: %v", a.rerr)
	}
	var res struct {
		IsError           bool           `json:"isError"`
		StructuredContent CallResult     `json:"structuredContent"`
		Meta              map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(a.raw, &res)
	rel, _ := res.Meta[MetaRelatedTask].(map[string]any)
	if res.IsError || res.StructuredContent.ExecutionID != id || rel["taskId"] != id {
		t.Errorf("tasks/result = %s, want the completed result with related-task %s", a.raw, id)
	}
	if m := other.get(id); m["status"] != "completed" {
		t.Errorf("tasks/get after the end = %v, want completed", m)
	}
	if n := st.effect.count("/slow"); n != 1 {
		t.Errorf("effect count = %d, want 1", n)
	}
	st.waitState(t, id, recordv1.State_STATE_DELIVERED)
}

// Without tasks, a call that waits for a person answers within PersonWait
// (not WaitBound) with the execution and the operator command; the
// identical call after the approval attaches and gets the outcome.
func TestPersonWaitWithoutTasks(t *testing.T) {
	// The control plane's data dir is not the admin commands' default, so
	// the command shown carries what reaches it.
	const args = "--data '/srv/my latch'"
	st := newTestStack(t, stackOptions{WaitBound: 10 * time.Minute, PersonWait: 100 * time.Millisecond, Sessions: engine.SessionConfig{CommandArgs: args}})
	cs := st.connect(t, "alice", clientOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // far below WaitBound
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "approved_job", Arguments: map[string]any{"job": "p"}})
	if err != nil {
		t.Fatalf("CallTool: %v (want an answer within PersonWait, not WaitBound)", err)
	}
	cr := decodeResult(t, res)
	if cr.State != "awaiting_approval" || !strings.Contains(cr.Note, "latch approvals approve "+cr.ExecutionID+" "+args) {
		t.Fatalf("answer = %+v, want awaiting_approval with the approve command and %s", cr, args)
	}
	if _, err := st.CP.Approve(t.Context(), &controlplanev1.ApproveRequest{ExecutionId: cr.ExecutionID, Operator: "ops"}); err != nil {
		t.Fatalf("Approve: %v", err)
	}
	_, again := call(t, cs, "approved_job", map[string]any{"job": "p"})
	if again.ExecutionID != cr.ExecutionID || again.Disposition != "attached" || (again.State != "completed" && again.State != "delivered") {
		t.Errorf("re-issued call = %+v, want attached to %s and completed", again, cr.ExecutionID)
	}
	if n := st.effect.count("/approved"); n != 1 {
		t.Errorf("effect count = %d, want 1", n)
	}
}
