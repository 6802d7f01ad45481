package mcpchannel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/internal/mcpwire"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Upstream tasks (MCP 2025-11-25 tasks utility; 2026-07-28 extension
// io.modelcontextprotocol/tasks, SEP-2663). See the package doc for what a
// task's status proves.

const (
	extensionTasks = mcpwire.ExtensionTasks
	// requestedTaskTTL is the retention Latch asks for (2025-11-25
	// params.task.ttl): long enough for recovery to ask after a restart; the
	// upstream may grant less.
	requestedTaskTTL = 24 * time.Hour
	// Poll interval bounds (the upstream's pollInterval is a hint).
	minPoll     = 50 * time.Millisecond
	defaultPoll = 500 * time.Millisecond
	maxPoll     = 5 * time.Second
)

// Task statuses (both eras).
const (
	taskWorking       = string(mcpwire.TaskWorking)
	taskInputRequired = string(mcpwire.TaskInputRequired)
	taskCompleted     = string(mcpwire.TaskCompleted)
	taskFailed        = string(mcpwire.TaskFailed)
	taskCancelled     = string(mcpwire.TaskCancelled)
)

// wireTask is a Task in either era (2025-11-25 ttl/pollInterval, 2026-07-28
// ttlMs/pollIntervalMs with the result or error inlined by tasks/get).
type wireTask struct {
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	PollInterval   *int64          `json:"pollInterval,omitempty"`
	PollIntervalMs *int64          `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          json.RawMessage `json:"error,omitempty"`
}

func (t *wireTask) poll() time.Duration {
	d := defaultPoll
	if t.PollIntervalMs != nil {
		d = time.Duration(*t.PollIntervalMs) * time.Millisecond
	} else if t.PollInterval != nil {
		d = time.Duration(*t.PollInterval) * time.Millisecond
	}
	return min(max(d, minPoll), maxPoll)
}

func terminal(status string) bool {
	return status == taskCompleted || status == taskFailed || status == taskCancelled
}

// taskCapable reports whether tool (the upstream's name) is called
// task-augmented on this connection, and why not.
func taskCapable(caps taskCaps, tool string) (bool, string) {
	if caps.modern {
		return true, ""
	}
	if !caps.legacy {
		return false, "it does not advertise tasks for tools/call (capabilities.tasks.requests.tools.call, or the io.modelcontextprotocol/tasks extension)"
	}
	switch caps.support[tool] {
	case "optional", "required":
		return true, ""
	}
	return false, fmt.Sprintf("its tool %s does not take tasks (execution.taskSupport is %q)", tool, caps.support[tool])
}

// callsAs says how tool (the upstream's name) is called on the upstream's
// current connection, for latch catalog upstream-tools: "task", or "plain:"
// and why not as a task.
func (u *upstream) callsAs(tool string) string {
	tp, err := u.tapNow()
	if err != nil {
		return "plain: no live connection to the upstream to read its task capabilities from"
	}
	if ok, why := taskCapable(tp.capsNow(), tool); !ok {
		return "plain: " + why
	}
	return "task"
}

// reqMeta is the _meta of a raw request: the execution ID, and on a
// 2026-07-28 connection the per-request protocol fields with the tasks
// extension declared.
func (u *upstream) reqMeta(caps taskCaps, id string) map[string]any {
	m := map[string]any{}
	if id != "" {
		m[MetaExecutionID] = id
	}
	if caps.modern {
		m[mcp.MetaKeyProtocolVersion] = caps.protocolVersion
		m[mcp.MetaKeyClientInfo] = map[string]any{"name": "latch", "version": u.c.cfg.Version}
		m[mcp.MetaKeyClientCapabilities] = map[string]any{"extensions": map[string]any{extensionTasks: map[string]any{}}}
	}
	return m
}

// dispatchTask makes one task-augmented tools/call, records the task ID the
// upstream answers through call.RecordTask, and follows the task to its end
// within the tool's timeout.
func (c *Channel) dispatchTask(ctx context.Context, u *upstream, tp *tap, caps taskCaps, call engine.Call, args map[string]any, tr *attemptTrack, timeout time.Duration) engine.Attempt {
	id := call.Execution.GetId()
	name := u.spec.Name + "." + call.Tool.UpstreamTool
	params := map[string]any{"name": call.Tool.UpstreamTool, "arguments": args, "_meta": u.reqMeta(caps, id)}
	if !caps.modern {
		params["task"] = map[string]any{"ttl": requestedTaskTTL.Milliseconds()}
	}
	deadline := time.Now().Add(timeout)
	callCtx := context.WithoutCancel(ctx) // a written call runs to its outcome; only the waiting stops
	if caps.protocolVersion >= standardHeadersSince {
		if lt := u.listedTools()[call.Tool.UpstreamTool]; lt != nil {
			callCtx = withParamHeaders(callCtx, paramHeaders(lt.InputSchema, args))
		}
	}
	type answer struct {
		raw json.RawMessage
		err error
	}
	done := make(chan answer, 1)
	go func() {
		raw, err := tp.call(callCtx, "tools/call", params, func() { tr.written.Store(true) })
		done <- answer{raw, err}
	}()
	var a answer
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case a = <-done:
	case <-timer.C:
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("upstream %s: no answer to the task-augmented tools/call %s within %s after the request was handed to the transport (no task ID was received)", u.spec.Name, call.Tool.UpstreamTool, timeout)}
	case <-ctx.Done():
		return engine.Attempt{Class: engine.Unknown, Reason: "the control plane stopped before upstream " + u.spec.Name + " answered the task-augmented call (no task ID was received)"}
	}
	if a.err != nil {
		if errors.Is(a.err, ErrRawClosed) && !tr.isWritten() {
			return engine.Attempt{Class: engine.NotSent, Reason: fmt.Sprintf("upstream %s: nothing was sent: %v", name, a.err)}
		}
		return c.classify(u, call, tr, nil, a.err)
	}
	task, res, err := decodeCallAnswer(caps, a.raw)
	if err != nil {
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("upstream %s answered the task-augmented call with something Latch cannot read (%v); it may have acted", name, err)}
	}
	if res != nil { // the upstream answered at once, without a task
		return c.classify(u, call, tr, res, nil)
	}
	log := u.log.With("execution_id", id, "task_id", task.TaskID)
	recorded := ""
	if call.RecordTask != nil {
		if err := call.RecordTask(task.TaskID); err != nil {
			log.Error("upstream task ID not recorded; an unknown outcome of this call will need review", "error", err)
			recorded = " (its task ID could not be recorded: " + err.Error() + ")"
		}
	}
	log.Debug("upstream accepted the call as a task", "status", task.Status)
	return c.followTask(ctx, u, tp, caps, call, task, deadline, recorded)
}

// decodeCallAnswer tells a CreateTaskResult from a CallToolResult.
func decodeCallAnswer(caps taskCaps, raw json.RawMessage) (*wireTask, *mcp.CallToolResult, error) {
	var probe struct {
		ResultType string    `json:"resultType"`
		Task       *wireTask `json:"task"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, nil, err
	}
	switch {
	case probe.ResultType == "task":
		var t wireTask
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, nil, err
		}
		if t.TaskID == "" {
			return nil, nil, errors.New("a CreateTaskResult without a taskId")
		}
		return &t, nil, nil
	case probe.Task != nil && !caps.modern:
		if probe.Task.TaskID == "" {
			return nil, nil, errors.New("a CreateTaskResult without a taskId")
		}
		return probe.Task, nil, nil
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, nil, err
	}
	return nil, &res, nil
}

// followTask polls tasks/get until the task ends or deadline passes.
func (c *Channel) followTask(ctx context.Context, u *upstream, tp *tap, caps taskCaps, call engine.Call, task *wireTask, deadline time.Time, note string) engine.Attempt {
	name := u.spec.Name + "." + call.Tool.UpstreamTool
	for {
		if terminal(task.Status) {
			return c.taskOutcome(ctx, u, tp, caps, call, task)
		}
		wait := task.poll()
		if time.Now().Add(wait).After(deadline) {
			return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("upstream %s: task %s is still %s after the tool's timeout%s%s", name, task.TaskID, task.Status, statusNote(task), note)}
		}
		select {
		case <-ctx.Done():
			return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("the control plane stopped while upstream %s ran task %s%s", name, task.TaskID, note)}
		case <-time.After(wait):
		}
		next, err := c.getTask(ctx, u, tp, caps, task.TaskID, deadline)
		if err != nil {
			var werr *jsonrpc.Error
			if errors.As(err, &werr) && werr.Code == jsonrpc.CodeInvalidParams {
				return engine.Attempt{Class: engine.Unsupported, Reason: fmt.Sprintf("upstream %s no longer knows task %s (JSON-RPC %d: %s); a task that existed and is gone proves nothing about its effect%s", name, task.TaskID, werr.Code, clip(werr.Message, 200), note)}
			}
			return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("upstream %s: asking about task %s failed: %v%s", name, task.TaskID, err, note)}
		}
		task = next
	}
}

func statusNote(t *wireTask) string {
	if t.StatusMessage == "" {
		return ""
	}
	return " (" + clip(t.StatusMessage, 200) + ")"
}

func (c *Channel) getTask(ctx context.Context, u *upstream, tp *tap, caps taskCaps, taskID string, deadline time.Time) (*wireTask, error) {
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	raw, err := tp.call(rctx, mcpwire.MethodTasksGet, map[string]any{"taskId": taskID, "_meta": u.reqMeta(caps, "")}, nil)
	if err != nil {
		return nil, err
	}
	var t wireTask
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("the tasks/get answer does not decode: %w", err)
	}
	if t.TaskID == "" {
		t.TaskID = taskID
	}
	return &t, nil
}

// taskOutcome is what a terminal task proves: completed is the call's
// result; failed (a JSON-RPC error during execution) and cancelled (by the
// upstream: Latch never cancels) are the upstream's final word that the call
// did not complete, recorded as failed_at_target with what it said.
func (c *Channel) taskOutcome(ctx context.Context, u *upstream, tp *tap, caps taskCaps, call engine.Call, task *wireTask) engine.Attempt {
	name := u.spec.Name + "." + call.Tool.UpstreamTool
	switch task.Status {
	case taskCancelled:
		body, _ := json.Marshal(map[string]any{"task": map[string]any{"taskId": task.TaskID, "status": task.Status, "statusMessage": task.StatusMessage}})
		body, cut := c.capBody(u, body)
		return engine.Attempt{
			Class: engine.Observed, Outcome: recordv1.Outcome_OUTCOME_FAILED_AT_TARGET,
			Result: &recordv1.Result{Answer: recordv1.AnswerKind_ANSWER_KIND_TOOL_RESULT, Body: body, BodyTruncated: cut, Summary: clip(u.scrub([]byte("the upstream cancelled the task: "+task.StatusMessage)), 200)},
			Reason: fmt.Sprintf("upstream %s reports task %s cancelled", name, task.TaskID),
		}
	case taskFailed:
		if len(task.Error) > 0 { // 2026-07-28: the JSON-RPC error inlined
			var werr jsonrpc.Error
			if json.Unmarshal(task.Error, &werr) == nil {
				return c.rpcErrorResult(u, name, &werr, "task "+task.TaskID+" failed")
			}
		}
	case taskCompleted:
		if len(task.Result) > 0 { // 2026-07-28: the result inlined
			var res mcp.CallToolResult
			if err := json.Unmarshal(task.Result, &res); err != nil {
				return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("upstream %s: task %s completed with a result Latch cannot read: %v", name, task.TaskID, err)}
			}
			return c.observed(u, name, &res, "task "+task.TaskID+" completed")
		}
	}
	if caps.modern {
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("upstream %s: task %s is %s but tasks/get carried no result or error", name, task.TaskID, task.Status)}
	}
	// 2025-11-25: tasks/result answers the call's result (or its error).
	raw, err := tp.call(ctx, mcpwire.MethodTasksResult, map[string]any{"taskId": task.TaskID, "_meta": u.reqMeta(caps, "")}, nil)
	if err != nil {
		var werr *jsonrpc.Error
		if errors.As(err, &werr) {
			if task.Status == taskCompleted && werr.Code == jsonrpc.CodeInvalidParams {
				return engine.Attempt{Class: engine.Unsupported, Reason: fmt.Sprintf("upstream %s: task %s completed but its result is gone (JSON-RPC %d: %s)", name, task.TaskID, werr.Code, clip(werr.Message, 200))}
			}
			return c.rpcErrorResult(u, name, werr, "task "+task.TaskID+" "+task.Status)
		}
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("upstream %s: task %s is %s; fetching its result failed: %v", name, task.TaskID, task.Status, err)}
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("upstream %s: task %s's result does not decode: %v", name, task.TaskID, err)}
	}
	a := c.observed(u, name, &res, "task "+task.TaskID+" "+task.Status)
	if task.Status == taskFailed {
		a.Outcome = recordv1.Outcome_OUTCOME_FAILED_AT_TARGET
	}
	return a
}

// queryTask is Query for an execution whose dispatch recorded an upstream
// task ID.
func (c *Channel) queryTask(ctx context.Context, call engine.Call) engine.Attempt {
	taskID := call.Execution.GetTargetTaskId()
	name := call.Target.Name + "." + call.Tool.UpstreamTool
	if taskID == "" {
		return engine.Attempt{Class: engine.Unsupported, Reason: fmt.Sprintf("upstream %s: no task ID was recorded for this execution (the call was made without a task, or the control plane stopped between the upstream's CreateTaskResult and its own record of it), so it cannot be asked what became of the call", name)}
	}
	u, err := c.upstream(call.Target.Name)
	if err != nil {
		return engine.Attempt{Class: engine.Unknown, Reason: err.Error()}
	}
	tp, err := u.tapNow()
	if err != nil {
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("cannot ask upstream %s about task %s yet: %v", name, taskID, err)}
	}
	caps := tp.capsNow()
	deadline := time.Now().Add(call.Tool.DispatchTimeout(call.Target))
	task, err := c.getTask(ctx, u, tp, caps, taskID, deadline)
	if err != nil {
		var werr *jsonrpc.Error
		if errors.As(err, &werr) && werr.Code == jsonrpc.CodeInvalidParams {
			// Only issued IDs are recorded: the upstream knew this task. A
			// task that is gone (expired, or lost with a restart) proves
			// nothing about whether the call took effect.
			return engine.Attempt{Class: engine.Unsupported, Reason: fmt.Sprintf("upstream %s no longer knows task %s (JSON-RPC %d: %s); a task that existed and is gone is no proof that nothing ran", name, taskID, werr.Code, clip(werr.Message, 200))}
		}
		return engine.Attempt{Class: engine.Unknown, Reason: fmt.Sprintf("upstream %s: tasks/get %s failed: %v", name, taskID, err)}
	}
	return c.followTask(ctx, u, tp, caps, call, task, deadline, "")
}

// observed is an answered call's attempt.
func (c *Channel) observed(u *upstream, name string, res *mcp.CallToolResult, what string) engine.Attempt {
	outcome := recordv1.Outcome_OUTCOME_SUCCEEDED
	reason := "upstream " + name + " answered"
	if what != "" {
		reason += " (" + what + ")"
	}
	if res.IsError {
		outcome = recordv1.Outcome_OUTCOME_FAILED_AT_TARGET
		reason += " with isError"
	}
	return engine.Attempt{Class: engine.Observed, Outcome: outcome, Result: c.result(u, res), Reason: reason}
}

// rpcErrorResult is a JSON-RPC error answer kept as the call's result.
func (c *Channel) rpcErrorResult(u *upstream, name string, werr *jsonrpc.Error, what string) engine.Attempt {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": werr.Code, "message": werr.Message, "data": json.RawMessage(orNull(werr.Data))}})
	body, cut := c.capBody(u, body)
	reason := fmt.Sprintf("upstream %s answered with JSON-RPC error %d", name, werr.Code)
	if what != "" {
		reason += " (" + what + ")"
	}
	return engine.Attempt{
		Class: engine.Observed, Outcome: recordv1.Outcome_OUTCOME_FAILED_AT_TARGET,
		Result: &recordv1.Result{Answer: recordv1.AnswerKind_ANSWER_KIND_TOOL_RESULT, Body: body, BodyTruncated: cut, Summary: fmt.Sprintf("JSON-RPC error %d: %s", werr.Code, clip(u.scrub([]byte(werr.Message)), 200))},
		Reason: reason,
	}
}

// statusQueryHold says why upstream tool t, whose replay is status_query,
// cannot be exposed on the upstream's current connection ("" when it can).
func (u *upstream) statusQueryHold(t *tools.Tool) string {
	if t.Replay != tools.ReplayStatusQuery {
		return ""
	}
	tp, err := u.tapNow()
	if err != nil {
		return ""
	}
	if ok, why := taskCapable(tp.capsNow(), t.UpstreamTool); !ok {
		return fmt.Sprintf("held: %s has replay status_query, which needs the upstream to run the call as a task it can be asked about (tasks/get), but upstream %s: %s (use review, or idempotency_key with idempotency_argument)", t.Name, u.spec.Name, why)
	}
	return ""
}
