package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/internal/backoff"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/mcpwire"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// rpcMessage is the part of a JSON-RPC request body the task layer reads.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// taskParams are the params of tasks/get, tasks/cancel, tasks/result,
// tasks/update.
type taskParams struct {
	TaskID string         `json:"taskId"`
	Cursor string         `json:"cursor"`
	Meta   map[string]any `json:"_meta"`
}

// interceptTasks runs before the SDK handlers (route). It answers a tasks/*
// request itself and returns true; for a 2025-11-25 tools/call it moves
// params.task into HeaderTaskRequest. Anything else passes untouched.
func (f *Front) interceptTasks(w http.ResponseWriter, r *http.Request) bool {
	r.Header.Del(HeaderTaskRequest)
	if r.Method != http.MethodPost || r.Body == nil {
		return false
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	modern := isModernEra(r.Header.Get(mcpwire.HeaderProtocolVersion))
	if !bytes.Contains(body, []byte(`"tasks/`)) && (modern || !bytes.Contains(body, []byte(`"task"`))) {
		return false // the common case, without decoding the body
	}
	var msg rpcMessage
	if json.Unmarshal(body, &msg) != nil || msg.Method == "" {
		return false // batches, responses, bad JSON: the SDK answers
	}
	switch {
	case strings.HasPrefix(msg.Method, "tasks/") && len(msg.ID) > 0:
		f.serveTaskRPC(w, r, msg, modern)
		return true
	case msg.Method == "tools/call" && !modern:
		var p map[string]json.RawMessage
		if json.Unmarshal(msg.Params, &p) != nil {
			return false
		}
		task, ok := p["task"]
		if !ok || string(task) == "null" {
			return false
		}
		// The SDK drops params.task; the header carries it to the
		// middleware (its value is only ever tested for presence).
		r.Header.Set(HeaderTaskRequest, string(task))
	}
	return false
}

// taskCaller is the authenticated caller of a tasks/* request.
func (f *Front) taskCaller(r *http.Request) (callContext, error) {
	var cc callContext
	if ti := sdkauth.TokenInfoFromContext(r.Context()); ti != nil {
		cc.actor = ti.UserID
		cc.credential, _ = ti.Extra[extraCredential].(string)
	} else if !f.authRequired() {
		cc.actor = f.cfg.LoopbackActor
	}
	if cc.actor == "" {
		return cc, errors.New("no authenticated actor for this request")
	}
	return cc, nil
}

// rpcError is a JSON-RPC error with the HTTP status to answer it with.
type rpcError struct {
	httpStatus int
	err        *jsonrpc.Error
}

func invalidParams(format string, args ...any) *rpcError {
	return &rpcError{http.StatusOK, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}}
}

// serveTaskRPC answers one tasks/* request.
func (f *Front) serveTaskRPC(w http.ResponseWriter, r *http.Request, msg rpcMessage, modern bool) {
	res, rerr := f.taskRPC(r, msg, modern)
	out := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
	code := http.StatusOK
	if rerr != nil {
		out["error"] = rerr.err
		code = rerr.httpStatus
	} else {
		out["result"] = res
	}
	b, err := json.Marshal(out)
	if err != nil {
		f.log.Error("task answer not encodable", "method", msg.Method, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	// A result carrying a completed execution's stored result has the
	// delivery marker; serveObserved records delivery once this write
	// succeeded.
	_, _ = w.Write(b)
}

func (f *Front) taskRPC(r *http.Request, msg rpcMessage, modern bool) (any, *rpcError) {
	var p taskParams
	if len(msg.Params) > 0 && json.Unmarshal(msg.Params, &p) != nil {
		return nil, invalidParams("%s: params must be an object with a string taskId", msg.Method)
	}
	known := map[string]bool{methodTasksGet: true, methodTasksCancel: true}
	if modern {
		known[methodTasksUpdate] = true
	} else {
		known[methodTasksResult], known[methodTasksList] = true, true
	}
	if !known[msg.Method] {
		era := mcpwire.Era20251125
		if modern {
			era = modernEra + " (the tasks extension has no tasks/result or tasks/list: tasks/get carries the result)"
		}
		return nil, &rpcError{http.StatusOK, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method %q is not a tasks method of protocol %s", msg.Method, era)}}
	}
	if modern {
		if !clientDeclaresTasks(p.Meta) {
			return nil, &rpcError{http.StatusOK, missingTasksCapability(msg.Method + " needs the tasks extension in the request's _meta clientCapabilities")}
		}
		if err := checkTaskHeaders(r.Header, msg.Method, p.TaskID); err != nil {
			return nil, &rpcError{http.StatusBadRequest, &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: err.Error()}}
		}
	} else if r.Header.Get(mcpwire.HeaderSessionID) == "" {
		return nil, &rpcError{http.StatusBadRequest, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "missing Mcp-Session-Id: initialize a session first"}}
	}
	cc, err := f.taskCaller(r)
	if err != nil {
		return nil, &rpcError{http.StatusUnauthorized, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}}
	}
	ctx := r.Context()
	if msg.Method == methodTasksList {
		return f.tasksList(ctx, cc, p)
	}
	if p.TaskID == "" {
		return nil, invalidParams("%s: missing taskId", msg.Method)
	}
	switch msg.Method {
	case methodTasksGet:
		return f.tasksGet(ctx, cc, p.TaskID, modern)
	case methodTasksCancel:
		return f.tasksCancel(ctx, cc, p.TaskID, modern)
	case methodTasksUpdate:
		// Latch never asks the client for input (a person's decision is
		// the operator's): every inputResponses key is unknown, and the
		// spec says to ignore those. The task must still be the caller's.
		if _, _, rerr := f.ownExecution(ctx, cc, p.TaskID); rerr != nil {
			return nil, rerr
		}
		return map[string]any{"resultType": "complete"}, nil
	case methodTasksResult:
		return f.tasksResult(ctx, cc, p.TaskID)
	}
	return nil, invalidParams("unknown method %s", msg.Method)
}

// checkTaskHeaders is the 2026-07-28 routing-header rule: Mcp-Method is the
// method and Mcp-Name the taskId (SEP-2663 "Streamable HTTP: Routing
// Headers"; missing or mismatched is -32020, as the SDK does for tools/call).
func checkTaskHeaders(h http.Header, method, taskID string) error {
	if got := h.Get(headerMcpMethod); got != method {
		if got == "" {
			return fmt.Errorf("missing required %s header", headerMcpMethod)
		}
		return fmt.Errorf("header mismatch: %s header value %q does not match body value %q", headerMcpMethod, got, method)
	}
	if got := h.Get(headerMcpName); got != taskID {
		if got == "" {
			return fmt.Errorf("missing required %s header for method %q (the taskId)", headerMcpName, method)
		}
		return fmt.Errorf("header mismatch: %s header value %q does not match params.taskId %q", headerMcpName, got, taskID)
	}
	return nil
}

// ownExecution reads id as the caller's execution. Another actor's, and an
// unknown one, read the same (-32602), so ids cannot be probed.
func (f *Front) ownExecution(ctx context.Context, cc callContext, id string) (*recordv1.Execution, *recordv1.Result, *rpcError) {
	g, err := f.cfg.ControlPlane.Get(ctx, &controlplanev1.GetRequest{ExecutionId: id, Actor: cc.actor, Credential: cc.credential})
	if err == nil && g.GetExecution().GetActor() != cc.actor {
		err = status.Error(codes.NotFound, "not the caller's") // defence in depth
	}
	if err != nil {
		switch status.Code(err) {
		case codes.NotFound, codes.PermissionDenied, codes.InvalidArgument:
			return nil, nil, invalidParams("Failed to retrieve task: no task %s among your tasks", id)
		case codes.Unauthenticated:
			return nil, nil, &rpcError{http.StatusUnauthorized, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "the agent's credential is not valid: " + status.Convert(err).Message()}}
		}
		f.log.Warn("task read failed", "execution_id", id, "error", err)
		return nil, nil, &rpcError{http.StatusOK, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "latch could not reach its control plane; poll again in a moment"}}
	}
	return g.GetExecution(), g.GetResult(), nil
}

// taskResult is the tool result of a terminal task, as tools/call would
// have answered it (the note and structuredContent of a status read, and
// the execution's receipt).
func (f *Front) taskResult(ctx context.Context, cc callContext, exec *recordv1.Execution, r *recordv1.Result) *mcp.CallToolResult {
	res := f.result(ctx, cc, recordv1.Disposition_DISPOSITION_ATTACHED, dispNew, exec, r)
	f.attachReceipt(ctx, cc, res, exec, nil)
	return res
}

func (f *Front) tasksGet(ctx context.Context, cc callContext, id string, modern bool) (any, *rpcError) {
	exec, r, rerr := f.ownExecution(ctx, cc, id)
	if rerr != nil {
		return nil, rerr
	}
	t := f.newWireTask(exec, modern)
	m := t.fields()
	if modern {
		m["resultType"] = "complete"
		if t.status == mcpwire.TaskCompleted {
			// Reading a completed task's result is its delivery: the
			// marker in its _meta is recorded once written (http.go).
			m["result"] = f.taskResult(ctx, cc, exec, r)
		}
	}
	return m, nil
}

// taskRereadBackoff spaces the re-reads of a task whose watch ended early.
var taskRereadBackoff = backoff.Policy{Min: 100 * time.Millisecond, Max: 5 * time.Second}

// tasksResult (2025-11-25) blocks until the task is terminal and answers
// its tool result with the related-task _meta.
func (f *Front) tasksResult(ctx context.Context, cc callContext, id string) (any, *rpcError) {
	exec, r, rerr := f.ownExecution(ctx, cc, id)
	if rerr != nil {
		return nil, rerr
	}
	exec, r, err := f.followToEnd(ctx, cc, exec, r)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &rpcError{http.StatusOK, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "request ended before the task did"}}
		}
		return nil, invalidParams("Failed to retrieve task: no task %s among your tasks", id)
	}
	res := f.taskResult(ctx, cc, exec, r)
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[MetaRelatedTask] = map[string]any{"taskId": id}
	return res, nil
}

// resolved reports whether exec's task is terminal: the agent has nothing
// more to wait for (taskTable's completed rows).
func resolved(s recordv1.State) bool { return taskRowFor(s).status == mcpwire.TaskCompleted }

// followToEnd follows exec until its task is terminal or ctx ends: a Watch,
// and when the watch ends early (a control-plane restart, a failover, a cut
// stream) a fresh Get after taskRereadBackoff, then a Watch again. r is
// exec's stored result when the caller has it. A Get the control plane
// refuses for good (not found, not the caller's, the credential no longer
// valid) ends the follow with that error; so does ctx.
//
// It is the one follower of an execution to its end: tasks/result and the
// late results pushed to sessions (late.go) both wait by it.
func (f *Front) followToEnd(ctx context.Context, cc callContext, exec *recordv1.Execution, r *recordv1.Result) (*recordv1.Execution, *recordv1.Result, error) {
	rereads := 0
	for !resolved(exec.GetState()) {
		exec, r = f.watchTerminal(ctx, cc, exec)
		if resolved(exec.GetState()) {
			break
		}
		if ctx.Err() != nil {
			return exec, nil, ctx.Err()
		}
		rereads++
		if !taskRereadBackoff.Wait(ctx, rereads, nil) {
			return exec, nil, ctx.Err()
		}
		g, err := f.cfg.ControlPlane.Get(ctx, &controlplanev1.GetRequest{ExecutionId: exec.GetId(), Actor: cc.actor, Credential: cc.credential})
		switch {
		case err == nil && g.GetExecution() != nil:
			exec, r = g.GetExecution(), g.GetResult()
		case refusedForGood(err):
			return exec, nil, err
		}
	}
	return exec, r, nil
}

// refusedForGood reports whether a failed read will fail the same way when
// asked again: the execution is not the caller's to read, or the caller's
// credential is no longer valid.
func refusedForGood(err error) bool {
	switch status.Code(err) {
	case codes.NotFound, codes.PermissionDenied, codes.InvalidArgument, codes.Unauthenticated:
		return true
	}
	return false
}

// watchTerminal follows exec until its task is terminal or the watch ends.
func (f *Front) watchTerminal(ctx context.Context, cc callContext, exec *recordv1.Execution) (*recordv1.Execution, *recordv1.Result) {
	stream, err := f.cfg.ControlPlane.Watch(ctx, &controlplanev1.WatchRequest{ExecutionId: exec.GetId(), Actor: cc.actor, Credential: cc.credential})
	if err != nil {
		return exec, nil
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return exec, nil
		}
		if e := m.GetExecution(); e != nil {
			exec = e
			if taskRowFor(e.GetState()).status == mcpwire.TaskCompleted {
				return exec, m.GetResult()
			}
		}
	}
}

// tasksCancel maps to Cancel, which succeeds only before dispatch. After
// dispatch the answer says the execution is in flight and will not be sent
// again: 2025-11-25 as an error (its cancel must end the task or fail),
// 2026-07-28 as the ack the extension prescribes (cancellation is
// cooperative there) with the same words in _meta["latch/note"].
func (f *Front) tasksCancel(ctx context.Context, cc callContext, id string, modern bool) (any, *rpcError) {
	exec, _, rerr := f.ownExecution(ctx, cc, id)
	if rerr != nil {
		return nil, rerr
	}
	if taskRowFor(exec.GetState()).status == mcpwire.TaskCompleted {
		if modern {
			return map[string]any{"resultType": "complete"}, nil
		}
		return nil, invalidParams("task %s is already terminal (execution %s); nothing to cancel", id, lifecycle.Name(exec.GetState()))
	}
	c, err := f.cfg.ControlPlane.Cancel(ctx, &controlplanev1.CancelRequest{ExecutionId: id, Actor: cc.actor, Credential: cc.credential, Reason: "agent sent " + methodTasksCancel})
	switch {
	case err == nil && c.GetExecution().GetState() == recordv1.State_STATE_CANCELLED:
		exec = c.GetExecution()
	case err == nil || status.Code(err) == codes.FailedPrecondition:
		if e, _, rerr := f.ownExecution(ctx, cc, id); rerr == nil {
			exec = e
		}
		note := inFlightNote(exec)
		if modern {
			return map[string]any{"resultType": "complete", "_meta": map[string]any{"latch/note": note}}, nil
		}
		return nil, invalidParams("%s", note)
	default:
		f.log.Warn("task cancel failed", "execution_id", id, "error", err)
		return nil, &rpcError{http.StatusOK, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "latch could not reach its control plane; the task was not cancelled; try again"}}
	}
	if modern {
		return map[string]any{"resultType": "complete"}, nil
	}
	return f.newWireTask(exec, false).fields(), nil
}

// inFlightNote answers a cancel that came too late.
func inFlightNote(exec *recordv1.Execution) string {
	at := "(time not recorded)"
	if t := exec.GetDispatchedAt(); t != nil {
		at = t.AsTime().UTC().Format(time.RFC3339)
	}
	if taskRowFor(exec.GetState()).status == mcpwire.TaskCompleted {
		return fmt.Sprintf("execution %s is already %s; nothing to cancel", exec.GetId(), lifecycle.Name(exec.GetState()))
	}
	return fmt.Sprintf("execution %s was dispatched at %s and is in flight: it cannot be cancelled, and Latch will not send it again; poll the task for its outcome", exec.GetId(), at)
}

// maxTaskList bounds one tasks/list answer (the control plane's List limit).
const maxTaskList = 1000

// tasksList (2025-11-25) lists the caller's own executions as tasks, newest
// first, in one page: cursors are not offered, so any cursor is invalid.
func (f *Front) tasksList(ctx context.Context, cc callContext, p taskParams) (any, *rpcError) {
	if p.Cursor != "" {
		return nil, invalidParams("tasks/list: unknown cursor %q (this server answers in one page)", p.Cursor)
	}
	l, err := f.cfg.ControlPlane.List(ctx, &controlplanev1.ListRequest{Actor: cc.actor, Credential: cc.credential, Limit: maxTaskList})
	if err != nil {
		f.log.Warn("task list failed", "error", err)
		return nil, &rpcError{http.StatusOK, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "latch could not reach its control plane; try again"}}
	}
	out := []any{}
	for _, e := range l.GetExecutions() {
		if e.GetActor() != cc.actor {
			continue // defence in depth
		}
		out = append(out, f.newWireTask(e, false).fields())
	}
	return map[string]any{"tasks": out}, nil
}
