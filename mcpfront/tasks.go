package mcpfront

// MCP tasks: an execution is the task. A task-augmented tools/call answers
// CreateTaskResult once Submit returned an accepted execution (it is durable
// in the control plane by then, so tasks/get resolves at once); the task ID
// is the execution ID; an identical call that attaches returns the same task.
// The control plane's execution stays the single source of truth: the front
// keeps no task state, every tasks/* request is a Get, Watch or Cancel of the
// caller's own execution.
//
// Both protocol eras, negotiated by capability:
//
//   - 2026-07-28, the extension io.modelcontextprotocol/tasks (SEP-2663): the
//     server advertises capabilities.extensions["io.modelcontextprotocol/tasks"]
//     in server/discover; a client opts in per request with
//     _meta["io.modelcontextprotocol/clientCapabilities"].extensions; the
//     server decides (Latch makes a task of every call of a tool whose task
//     support is optional or required); CreateTaskResult is flat (resultType
//     "task", taskId, status, ttlMs, pollIntervalMs, ...); tasks/get inlines
//     the result; tasks/update and tasks/cancel answer an empty ack; there is
//     no tasks/result or tasks/list (-32601); tasks/* without the extension
//     is -32021; Mcp-Method and Mcp-Name (= taskId) must match (-32020, 400).
//   - 2025-11-25, the tasks utility: capabilities.tasks {list, cancel,
//     requests.tools.call} in initialize; tools carry execution.taskSupport;
//     a call opts in with params.task {ttl}; CreateTaskResult is {task:{...}}
//     (ttl, pollInterval); tasks/get answers the Task; tasks/result blocks
//     until the task is terminal and answers the CallToolResult with
//     _meta["io.modelcontextprotocol/related-task"]; tasks/list lists the
//     caller's own executions; tasks/cancel answers the Task.
//
// Where this sits in the SDK (go-sdk v1.8.0 has no task support at all: no
// tasks/* methods, no CreateTaskResult, no tasks capability, no
// Tool.execution, and CallToolParams drops params.task):
//
//   - tasks/* requests never reach the SDK: its method table refuses unknown
//     methods before any middleware runs (checkRequest in handleReceive, and
//     again in the streamable transport). So route (front.go) hands a POST
//     whose method starts with "tasks/" to serveTaskRPC (tasks_http.go), after
//     the same Origin check and bearer authentication as every request. It
//     answers one JSON-RPC response as application/json (the spec allows it;
//     2025-11-25 asks servers not to open SSE for tasks/get).
//   - params.task (2025-11-25) is moved by route into the Latch-Task-Request
//     header (a client-sent one is removed first), the way the JSON-RPC id
//     reaches handlers (http.go).
//   - tools/call, tools/list and initialize pass through taskMiddleware, a
//     receiving middleware (Server.AddReceivingMiddleware): it answers a
//     task-augmented tools/call itself and adds the 2025-11-25 fields to the
//     initialize and tools/list results (result types embedding
//     mcp.ResultBase with their own MarshalJSON).
//
// Tasks are served on Streamable HTTP only; stdio sessions advertise none.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/mcpwire"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Protocol names.
const (
	// ExtensionTasks is the 2026-07-28 tasks extension's identifier.
	ExtensionTasks = mcpwire.ExtensionTasks
	// MetaRelatedTask ties a message to a task (2025-11-25; tasks/result).
	MetaRelatedTask       = mcpwire.MetaRelatedTask
	metaImmediateResponse = mcpwire.MetaImmediateResponse
	// HeaderTaskRequest carries a 2025-11-25 call's params.task (JSON) from
	// route to the tools/call middleware.
	HeaderTaskRequest = "Latch-Task-Request"
	// headerMcpName and headerMcpMethod are the 2026-07-28 routing headers.
	headerMcpName   = mcpwire.HeaderName
	headerMcpMethod = mcpwire.HeaderMethod
)

// Task methods.
const (
	methodTasksGet    = mcpwire.MethodTasksGet
	methodTasksCancel = mcpwire.MethodTasksCancel
	methodTasksUpdate = mcpwire.MethodTasksUpdate
	methodTasksResult = mcpwire.MethodTasksResult
	methodTasksList   = mcpwire.MethodTasksList
)

// Task polling hints.
const (
	// DefaultPersonWait bounds a call without a task that waits for a
	// person (an approval, a session authorization).
	DefaultPersonWait = 5 * time.Second
	// taskPollInterval is the pollInterval of a task whose execution moves
	// on its own; personPollInterval of one that waits for a person.
	taskPollInterval   = time.Second
	personPollInterval = 5 * time.Second
)

// Task statuses are mcpwire's. mcpwire.TaskFailed is for protocol-level
// errors only. An accepted execution never is one: a target failure is a
// completed task with an isError result, and an uncertain outcome is
// working; input_required and cancelled are never answered either.

// waitKind is what a working task waits for, which decides its
// statusMessage.
type waitKind int

const (
	waitsNothing  waitKind = iota // terminal
	waitsLatch                    // accepted, authorized: dispatch is next
	waitsTarget                   // dispatched: the target's answer
	waitsPerson                   // an approval or a session authorization
	waitsEvidence                 // outcome_unknown: recovery establishes it
	waitsOperator                 // needs_review: an operator decides
)

// taskRow maps execution states to a task status (docs/concepts/tasks.md).
type taskRow struct {
	states []recordv1.State
	status mcpwire.TaskStatus
	waits  waitKind
	// isError: the completed task's result is an isError result that says
	// nothing was done and why.
	isError bool
}

// taskTable is the status mapping. awaiting_approval (approvals and session
// authorizations) is working, never input_required: the agent cannot give
// that input. outcome_unknown and needs_review are working, never failed:
// the effect may have happened. Every terminal execution is completed, its
// result the tool result (isError for a target failure, and for
// not_executed, rejected and cancelled, which did nothing).
var taskTable = []taskRow{
	{states: []recordv1.State{recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AUTHORIZED}, status: mcpwire.TaskWorking, waits: waitsLatch},
	{states: []recordv1.State{recordv1.State_STATE_DISPATCHED}, status: mcpwire.TaskWorking, waits: waitsTarget},
	{states: []recordv1.State{recordv1.State_STATE_AWAITING_APPROVAL}, status: mcpwire.TaskWorking, waits: waitsPerson},
	{states: []recordv1.State{recordv1.State_STATE_OUTCOME_UNKNOWN}, status: mcpwire.TaskWorking, waits: waitsEvidence},
	{states: []recordv1.State{recordv1.State_STATE_NEEDS_REVIEW}, status: mcpwire.TaskWorking, waits: waitsOperator},
	{states: []recordv1.State{recordv1.State_STATE_COMPLETED, recordv1.State_STATE_DELIVERED}, status: mcpwire.TaskCompleted},
	{states: []recordv1.State{recordv1.State_STATE_NOT_EXECUTED, recordv1.State_STATE_REJECTED, recordv1.State_STATE_CANCELLED}, status: mcpwire.TaskCompleted, isError: true},
}

// taskRowFor is s's row; a state the table does not know (a newer schema)
// is working: never claim an end that may not be one.
func taskRowFor(s recordv1.State) taskRow {
	for _, r := range taskTable {
		if stateIn(s, r.states) {
			return r
		}
	}
	return taskRow{status: mcpwire.TaskWorking, waits: waitsLatch}
}

// personWait says what exec waits for from a person and the exact operator
// command that gives it, with args (what reaches this control plane, from
// ListTools) appended; ok is false when it waits for no person.
func personWait(exec *recordv1.Execution, args string) (what, command string, ok bool) {
	what, command, ok = personCommand(exec)
	if ok && args != "" {
		command += " " + args
	}
	return what, command, ok
}

func personCommand(exec *recordv1.Execution) (what, command string, ok bool) {
	if exec.GetState() != recordv1.State_STATE_AWAITING_APPROVAL {
		return "", "", false
	}
	if lifecycle.ReasonOf(exec) == recordv1.ReasonCode_REASON_CODE_SESSION_AUTHORIZATION && exec.GetSessionId() != "" {
		return fmt.Sprintf("an operator to authorize agent session %s", exec.GetSessionId()),
			"latch session authorize " + exec.GetSessionId(), true
	}
	return "an operator's approval", "latch approvals approve " + exec.GetId(), true
}

// taskMessage is the statusMessage of exec as a task.
func taskMessage(exec *recordv1.Execution, row taskRow, args string) string {
	id := exec.GetId()
	at := "(time not recorded)"
	if t := exec.GetDispatchedAt(); t != nil {
		at = t.AsTime().UTC().Format(time.RFC3339)
	}
	switch row.waits {
	case waitsLatch:
		return fmt.Sprintf("execution %s is accepted and not yet dispatched.", id)
	case waitsTarget:
		return fmt.Sprintf("execution %s was dispatched at %s; waiting for the target's answer. Do not call the tool again: poll this task.", id, at)
	case waitsPerson:
		what, cmd, _ := personWait(exec, args)
		return fmt.Sprintf("execution %s waits for %s; nothing has been sent yet. The operator runs: %s", id, what, cmd)
	case waitsEvidence:
		return fmt.Sprintf("execution %s was dispatched at %s and its outcome is being established from the target; it may have taken effect, so do not call the tool again: poll this task.", id, at)
	case waitsOperator:
		return fmt.Sprintf("execution %s was dispatched at %s and its outcome is unknown; it awaits an operator's review (latch exec resolve %s). Do not call the tool again.", id, at, strings.TrimSpace(id+" "+args))
	}
	switch exec.GetState() {
	case recordv1.State_STATE_CANCELLED:
		return fmt.Sprintf("execution %s was cancelled before dispatch; nothing was sent.", id)
	case recordv1.State_STATE_REJECTED:
		return fmt.Sprintf("execution %s was rejected; nothing was sent.", id)
	case recordv1.State_STATE_NOT_EXECUTED:
		return fmt.Sprintf("execution %s was not executed; nothing took effect.", id)
	}
	return fmt.Sprintf("execution %s completed.", id)
}

// taskSupport is a served tool's task support ("" from an older control
// plane: the default for its replay class). Built-ins take no tasks.
func (f *Front) taskSupport(name string) (tools.TaskSupport, bool) {
	f.toolsMu.Lock()
	t, ok := f.tools[name]
	f.toolsMu.Unlock()
	if !ok {
		return tools.TaskForbidden, false
	}
	if s := tools.TaskSupport(t.GetTaskSupport()); s != "" {
		return s, true
	}
	return tools.DefaultTaskSupport(tools.Replay(t.GetReplay())), true
}

// wireTask is a Task in one era's field names.
type wireTask struct {
	modern bool
	exec   *recordv1.Execution
	status mcpwire.TaskStatus
	msg    string
	// result is the completed task's tool result (tasks/get, modern era).
	result *mcp.CallToolResult
}

func (f *Front) newWireTask(exec *recordv1.Execution, modern bool) wireTask {
	row := taskRowFor(exec.GetState())
	return wireTask{modern: modern, exec: exec, status: row.status, msg: taskMessage(exec, row, f.operatorArgs())}
}

// ttlMs is the task's time to live: the tool's attach window (an identical
// call attaches within it), null (unlimited) for until_resolved.
func ttlMs(exec *recordv1.Execution) *int64 {
	if exec.GetUntilResolved() || exec.GetAttachWindowSeconds() <= 0 {
		return nil
	}
	ms := exec.GetAttachWindowSeconds() * 1000
	return &ms
}

func pollMs(exec *recordv1.Execution) int64 {
	if _, _, ok := personCommand(exec); ok {
		return personPollInterval.Milliseconds()
	}
	return taskPollInterval.Milliseconds()
}

const taskTime = "2006-01-02T15:04:05.000Z07:00"

// fields is the Task object; extra fields (resultType, result) are added
// by the caller.
func (t wireTask) fields() map[string]any {
	e := t.exec
	created := e.GetAcceptedAt().AsTime().UTC()
	updated := created
	if u := e.GetUpdatedAt(); u != nil && u.AsTime().After(created) {
		updated = u.AsTime().UTC()
	}
	m := map[string]any{
		"taskId":        e.GetId(),
		"status":        string(t.status),
		"statusMessage": t.msg,
		"createdAt":     created.Format(taskTime),
		"lastUpdatedAt": updated.Format(taskTime),
	}
	ttlKey, pollKey := "ttl", "pollInterval"
	if t.modern {
		ttlKey, pollKey = "ttlMs", "pollIntervalMs"
	}
	if ttl := ttlMs(e); ttl != nil {
		m[ttlKey] = *ttl
	} else {
		m[ttlKey] = nil
	}
	if t.status == mcpwire.TaskWorking {
		m[pollKey] = pollMs(e)
	}
	return m
}

// rawResult is a result the front writes itself (CreateTaskResult, the
// 2025-11-25 initialize and tools/list additions): its JSON is fixed.
type rawResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

func newRawResult(v any) (*rawResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &rawResult{raw: b}, nil
}

// createTaskResult is the answer to a task-augmented tools/call.
func (f *Front) createTaskResult(t wireTask, immediate string) (*rawResult, error) {
	meta := map[string]any{MetaRelatedTask: map[string]any{"taskId": t.exec.GetId()}}
	if t.modern {
		m := t.fields()
		m["resultType"] = "task"
		m["_meta"] = meta
		return newRawResult(m)
	}
	meta[metaImmediateResponse] = immediate
	return newRawResult(map[string]any{"task": t.fields(), "_meta": meta})
}

// clientDeclaresTasks reports whether a 2026-07-28 request's _meta declares
// the tasks extension in its per-request client capabilities.
func clientDeclaresTasks(meta map[string]any) bool {
	caps, ok := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	if !ok {
		return false
	}
	ext, ok := caps["extensions"].(map[string]any)
	if !ok {
		return false
	}
	_, ok = ext[ExtensionTasks]
	return ok
}

// missingTasksCapability is the 2026-07-28 error for a request that needs
// the tasks extension from a client that did not declare it.
func missingTasksCapability(why string) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ExtensionTasks: map[string]any{}}}})
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "Missing required client capability: " + why, Data: data}
}

// taskMiddleware adds tasks to the HTTP server's tools/call, initialize
// (2025-11-25 capability) and tools/list (2025-11-25 execution.taskSupport).
func (f *Front) taskMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/call":
			if r, ok := req.(*mcp.CallToolRequest); ok {
				return f.callMaybeTask(ctx, r, next)
			}
		case "initialize":
			res, err := next(ctx, method, req)
			if ir, ok := res.(*mcp.InitializeResult); ok && err == nil {
				return addTasksCapability(ir)
			}
			return res, err
		case "tools/list":
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil && !isModernEra(headerOf(req, mcpwire.HeaderProtocolVersion)) {
				return f.addTaskSupport(lr)
			}
			return res, err
		}
		return next(ctx, method, req)
	}
}

func headerOf(req mcp.Request, name string) string {
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		return ex.Header.Get(name)
	}
	return ""
}

// legacyTasksCapability is the 2025-11-25 server tasks capability.
var legacyTasksCapability = map[string]any{
	"list":     map[string]any{},
	"cancel":   map[string]any{},
	"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
}

func addTasksCapability(ir *mcp.InitializeResult) (mcp.Result, error) {
	raw, err := json.Marshal(ir)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	caps, _ := m["capabilities"].(map[string]any)
	if caps == nil {
		caps = map[string]any{}
	}
	caps["tasks"] = legacyTasksCapability
	m["capabilities"] = caps
	return newRawResult(m)
}

// addTaskSupport sets execution.taskSupport on every tool of a 2025-11-25
// tools/list (the SDK's Tool has no execution field).
func (f *Front) addTaskSupport(lr *mcp.ListToolsResult) (mcp.Result, error) {
	raw, err := json.Marshal(lr)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	list, _ := m["tools"].([]any)
	for _, item := range list {
		t, ok := item.(map[string]any)
		if !ok {
			continue
		}
		name, _ := t["name"].(string)
		s, _ := f.taskSupport(name)
		t["execution"] = map[string]any{"taskSupport": string(s)}
	}
	return newRawResult(m)
}

// callMaybeTask decides whether a tools/call becomes a task.
//
// 2026-07-28: the server decides; a client that declares the extension on
// the request gets a task for every tool whose support is optional or
// required; a required tool from a client without it is -32021.
// 2025-11-25: the client asks with params.task; asking for a task of a
// forbidden tool, or calling a required one without, is -32601 (the spec's
// tool-level negotiation).
func (f *Front) callMaybeTask(ctx context.Context, req *mcp.CallToolRequest, next mcp.MethodHandler) (mcp.Result, error) {
	name := req.Params.Name
	support, known := f.taskSupport(name)
	if !known {
		return next(ctx, "tools/call", req)
	}
	modern := isModernEra(headerOf(req, mcpwire.HeaderProtocolVersion))
	var asks bool
	if modern {
		asks = clientDeclaresTasks(req.Params.Meta)
	} else {
		asks = headerOf(req, HeaderTaskRequest) != ""
	}
	switch {
	case modern && support == tools.TaskRequired && !asks:
		return nil, missingTasksCapability(fmt.Sprintf("tool %s runs only as a task (task: required); declare the %s extension", name, ExtensionTasks))
	case !modern && support == tools.TaskRequired && !asks:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("tool %s must be called as a task (execution.taskSupport is required): add params.task", name)}
	case !modern && support == tools.TaskForbidden && asks:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("tool %s cannot be called as a task (execution.taskSupport is forbidden): call it without params.task", name)}
	case !asks || support == tools.TaskForbidden:
		return next(ctx, "tools/call", req)
	}
	return f.startTask(ctx, req, modern)
}

// startTask submits the call and answers CreateTaskResult for the
// execution Submit returned; a call refused before it had an execution is
// answered as the tool error it is.
func (f *Front) startTask(ctx context.Context, req *mcp.CallToolRequest, modern bool) (mcp.Result, error) {
	tool := req.Params.Name
	ctx, observed := f.observeCall(ctx, req, tool)
	var submitted *controlplanev1.SubmitResponse
	defer func() { observed(submitted.GetDisposition(), submitted.GetExecution(), nil) }()
	cc, err := f.caller(req, "")
	if err != nil {
		return nil, err
	}
	args := req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	log := f.log.With("tool", tool, "actor", cc.actor)
	// No wait: Submit answers once the execution is durable; the engine
	// goes on without the caller.
	resp, err := f.cfg.ControlPlane.Submit(ctx, &controlplanev1.SubmitRequest{
		Actor: cc.actor, Credential: cc.credential, Tool: tool, Arguments: args,
		IntentScope: cc.scope, Evidence: cc.evidence,
	})
	if err != nil {
		return f.submitError(log, tool, err)
	}
	submitted = resp
	f.endOnClose(req.Session, cc.actor)
	exec := resp.GetExecution()
	log.Debug("task created", "execution_id", exec.GetId(), "disposition", resp.GetDisposition().String(), "state", lifecycle.Name(exec.GetState()))
	if !modern {
		// The task's end is pushed to this session (late.go).
		f.watchLate(ctx, req, cc, exec, lateTask)
	}
	t := f.newWireTask(exec, modern)
	immediate := fmt.Sprintf("Latch started task %s for this call (%s). %s", exec.GetId(), dispositionName(resp.GetDisposition()), t.msg)
	return f.createTaskResult(t, immediate)
}
