package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/internal/lifecycle"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Built-in tool names. Every built-in acts on the caller's own executions
// only: the actor goes into every Get/List/Cancel request.
const (
	ToolExecutionStatus = "latch_execution_status"
	ToolExecutions      = "latch_executions"
	ToolCancelExecution = "latch_cancel_execution"
)

// ExecutionSummary is one line of latch_executions.
type ExecutionSummary struct {
	ExecutionID  string `json:"execution_id"`
	Tool         string `json:"tool"`
	State        string `json:"state"`
	Outcome      string `json:"outcome,omitempty"`
	AcceptedAt   string `json:"accepted_at,omitempty"`
	DispatchedAt string `json:"dispatched_at,omitempty"`
}

func (f *Front) addBuiltins(srv *mcp.Server, fixedActor string) {
	yes, no := true, false
	idSchema := json.RawMessage(`{"type":"object","required":["execution_id"],"additionalProperties":false,"properties":{"execution_id":{"type":"string","description":"An execution_id (act_…) returned by an earlier call."}}}`)
	srv.AddTool(&mcp.Tool{
		Name:        ToolExecutionStatus,
		Description: "Show one of your executions: its state, outcome and stored result. Use it instead of retrying a call whose outcome was not yet known.",
		InputSchema: idSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no},
	}, f.statusHandler(fixedActor))
	srv.AddTool(&mcp.Tool{
		Name:        ToolExecutions,
		Description: "List your most recent executions, newest first.",
		InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"limit":{"type":"integer","minimum":1,"maximum":1000,"description":"At most this many (default 20)."}}}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no},
	}, f.listHandler(fixedActor))
	srv.AddTool(&mcp.Tool{
		Name:        ToolCancelExecution,
		Description: "Cancel one of your executions that has not been dispatched yet (for example one awaiting approval). A dispatched execution cannot be cancelled: it runs to its observed outcome.",
		InputSchema: idSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no},
	}, f.cancelHandler(fixedActor))
	f.addReceiptTool(srv, fixedActor)
}

func (f *Front) builtinCaller(req *mcp.CallToolRequest, fixedActor string) (callContext, error) {
	return f.caller(req, fixedActor)
}

func decodeArgs(req *mcp.CallToolRequest, v any) error {
	args := req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	if err := tools.CheckRawArguments(args); err != nil {
		return badArguments{argumentNote(req.Params.Name, tools.ArgumentProblem(err))}
	}
	if err := json.Unmarshal(args, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return badArguments{argumentNote(req.Params.Name, fmt.Sprintf("argument %s must be %s", te.Field, jsonKind(te.Type.Kind())))}
		}
		return badArguments{argumentNote(req.Params.Name, "arguments must be a JSON object")}
	}
	return nil
}

// badArguments is a built-in tool's argument problem: answered as a tool
// error (isError) the model can correct, not as a protocol error.
type badArguments struct{ note string }

func (b badArguments) Error() string { return b.note }

// handlerError answers err: a tool error for bad arguments, else the error
// itself (no authenticated actor).
func handlerError(err error) (*mcp.CallToolResult, error) {
	var b badArguments
	if errors.As(err, &b) {
		return toolError(b.note), nil
	}
	return nil, err
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "an integer"
	}
	return "a " + k.String()
}

// rpcToolError turns a control-plane error into a tool error: NotFound and
// PermissionDenied read the same, so a caller cannot probe other actors' ids.
func (f *Front) rpcToolError(id string, err error) *mcp.CallToolResult {
	switch status.Code(err) {
	case codes.NotFound, codes.PermissionDenied:
		return toolError(fmt.Sprintf("no execution %s among your executions.", id))
	case codes.FailedPrecondition:
		return toolError(fmt.Sprintf("execution %s cannot be changed: %s", id, status.Convert(err).Message()))
	case codes.InvalidArgument:
		return toolError(fmt.Sprintf("bad execution id %q: %s", id, status.Convert(err).Message()))
	case codes.Unauthenticated:
		return toolError(fmt.Sprintf("latch refused the call: the agent's credential is not valid (%s); the operator can issue a new token with `latch token create`", status.Convert(err).Message()))
	}
	f.log.Warn("control plane call failed", "execution_id", id, "error", err)
	return toolError("latch could not reach its control plane; try again in a moment.")
}

// executionArg reads the caller's actor and the execution_id argument of a
// built-in tool; a missing id is a badArguments error.
func (f *Front) executionArg(req *mcp.CallToolRequest, fixedActor string) (cc callContext, id string, err error) {
	if cc, err = f.builtinCaller(req, fixedActor); err != nil {
		return cc, "", err
	}
	var in struct {
		ExecutionID string `json:"execution_id"`
	}
	if err := decodeArgs(req, &in); err != nil {
		return cc, "", err
	}
	if in.ExecutionID == "" {
		return cc, "", badArguments{argumentNote(req.Params.Name, `missing required argument "execution_id" (string: an execution_id, act_…, returned by an earlier call)`)}
	}
	return cc, in.ExecutionID, nil
}

func (f *Front) statusHandler(fixedActor string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cc, id, err := f.executionArg(req, fixedActor)
		if err != nil {
			return handlerError(err)
		}
		g, err := f.cfg.ControlPlane.Get(ctx, &controlplanev1.GetRequest{ExecutionId: id, Actor: cc.actor, Credential: cc.credential})
		if err != nil {
			return f.rpcToolError(id, err), nil
		}
		// The disposition of a status read is "attached": it reads the same
		// execution, never makes one. A read of an unresolved execution is
		// one more answer the caller waits on: its outcome is pushed too.
		cc.pushed = f.watchLate(ctx, req, cc, g.GetExecution(), lateCall)
		return f.result(ctx, cc, recordv1.Disposition_DISPOSITION_ATTACHED, dispNew, g.GetExecution(), g.GetResult()), nil
	}
}

func (f *Front) listHandler(fixedActor string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cc, err := f.builtinCaller(req, fixedActor)
		if err != nil {
			return handlerError(err)
		}
		actor := cc.actor
		var in struct {
			Limit int32 `json:"limit"`
		}
		if err := decodeArgs(req, &in); err != nil {
			return handlerError(err)
		}
		if in.Limit <= 0 {
			in.Limit = 20
		}
		in.Limit = min(in.Limit, 1000)
		l, err := f.cfg.ControlPlane.List(ctx, &controlplanev1.ListRequest{Actor: actor, Limit: in.Limit, Credential: cc.credential})
		if err != nil {
			return f.rpcToolError("", err), nil
		}
		out := struct {
			Executions []ExecutionSummary `json:"executions"`
			Note       string             `json:"note"`
		}{Executions: []ExecutionSummary{}}
		for _, e := range l.GetExecutions() {
			if e.GetActor() != actor {
				continue // defence in depth: never show another actor's work
			}
			s := ExecutionSummary{ExecutionID: e.GetId(), Tool: e.GetTool(), State: lifecycle.Name(e.GetState()), Outcome: outcomeName(e.GetOutcome())}
			if t := e.GetAcceptedAt(); t != nil {
				s.AcceptedAt = t.AsTime().UTC().Format(time.RFC3339)
			}
			if t := e.GetDispatchedAt(); t != nil {
				s.DispatchedAt = t.AsTime().UTC().Format(time.RFC3339)
			}
			out.Executions = append(out.Executions, s)
		}
		out.Note = fmt.Sprintf("%d of your executions, newest first.", len(out.Executions))
		text, _ := json.Marshal(out)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: out}, nil
	}
}

func (f *Front) cancelHandler(fixedActor string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cc, id, err := f.executionArg(req, fixedActor)
		if err != nil {
			return handlerError(err)
		}
		c, err := f.cfg.ControlPlane.Cancel(ctx, &controlplanev1.CancelRequest{ExecutionId: id, Actor: cc.actor, Reason: "agent called " + ToolCancelExecution, Credential: cc.credential})
		if err != nil {
			return f.rpcToolError(id, err), nil
		}
		res := f.result(ctx, cc, recordv1.Disposition_DISPOSITION_ATTACHED, dispNew, c.GetExecution(), nil)
		if c.GetExecution().GetState() == recordv1.State_STATE_CANCELLED {
			res.IsError = false // the cancel the caller asked for succeeded
		}
		return res, nil
	}
}
