package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/lifecycle"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// MetaRun is the `_meta` key of a call's explicit intent scope (DESIGN §5).
const MetaRun = "latch/run"

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// mcpTool derives the MCP tool from a contract. Annotations are hints for
// clients, never trusted by Latch: readOnlyHint only for read_only;
// idempotentHint only where the replay class makes a repeated call harmless
// (read_only, and idempotency_key whose target honours the execution ID);
// destructiveHint for review (irreversible, an operator decides after an
// unknown outcome).
func mcpTool(t *controlplanev1.Tool) (*mcp.Tool, error) {
	schema, err := inputSchema(t)
	if err != nil {
		return nil, err
	}
	yes, no := true, false
	ann := &mcp.ToolAnnotations{OpenWorldHint: &yes}
	switch tools.Replay(t.GetReplay()) {
	case tools.ReplayReadOnly:
		ann.ReadOnlyHint = true
		ann.IdempotentHint = true
	case tools.ReplayIdempotencyKey:
		ann.IdempotentHint = true
		ann.DestructiveHint = &no
	case tools.ReplayReview:
		ann.DestructiveHint = &yes
	default: // status_query: not destructive by contract, not idempotent
		ann.DestructiveHint = &no
	}
	desc := t.GetDescription()
	if t.GetSideEffecting() {
		desc = strings.TrimSpace(desc + " Latch runs each intent once: calling again with the same arguments attaches to the same execution; to repeat on purpose, pass repeat_of.")
	}
	return &mcp.Tool{
		Name:        t.GetName(),
		Description: desc,
		InputSchema: schema,
		Annotations: ann,
	}, nil
}

// inputSchema is the schema the control plane serves (the catalog schema
// plus the optional repeat_of argument on side-effecting tools:
// tools.Tool.MCPInputSchema). The SDK needs an object schema; anything else
// is a catalog defect.
func inputSchema(t *controlplanev1.Tool) (json.RawMessage, error) {
	raw := json.RawMessage(t.GetInputSchema())
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m["type"] != "object" {
		return nil, fmt.Errorf("input schema must be a JSON object schema with type \"object\"")
	}
	return raw, nil
}

// callContext is what one tools/call knows about its caller.
type callContext struct {
	actor string
	// credential is the agent's token when the control plane
	// authenticates it (CredentialForwarder); never logged.
	credential string
	scope      string
	evidence   *recordv1.Evidence
	stateful   bool
}

func (f *Front) caller(req *mcp.CallToolRequest, fixedActor string) (callContext, error) {
	var cc callContext
	ev := &recordv1.Evidence{}
	switch {
	case fixedActor != "":
		cc.actor = fixedActor
		ev.Transport = "stdio"
		cc.stateful = true
	case req.Extra != nil && req.Extra.TokenInfo != nil:
		cc.actor = req.Extra.TokenInfo.UserID
		ev.TokenId, _ = req.Extra.TokenInfo.Extra["token_id"].(string)
		cc.credential, _ = req.Extra.TokenInfo.Extra[extraCredential].(string)
	case !f.authRequired():
		cc.actor = f.cfg.LoopbackActor
	}
	if cc.actor == "" {
		return cc, errors.New("mcpfront: no authenticated actor for this call")
	}
	if req.Extra != nil && req.Extra.Header != nil {
		h := req.Extra.Header
		ev.JsonrpcId = h.Get(HeaderJSONRPCID)
		ev.PeerAddress = h.Get(HeaderPeerAddress)
		cc.scope = h.Get(HeaderRun)
		if v := h.Get("Mcp-Protocol-Version"); isModernEra(v) {
			ev.Transport = "streamable-http/" + v
		} else {
			ev.Transport = "streamable-http/session"
			if v != "" {
				ev.Transport = "streamable-http/" + v
			}
			cc.stateful = true
		}
	}
	if req.Session != nil {
		ev.McpSessionId = req.Session.ID()
		if ip := req.Session.InitializeParams(); ip != nil && ip.ClientInfo != nil {
			ev.ClientName = ip.ClientInfo.Name
		}
	}
	if req.Params != nil && req.Params.Meta != nil {
		if run, ok := req.Params.Meta[MetaRun].(string); ok && run != "" {
			cc.scope = run
		}
		if ev.ClientName == "" {
			if ci, ok := req.Params.Meta[mcp.MetaKeyClientInfo].(map[string]any); ok {
				ev.ClientName, _ = ci["name"].(string)
			}
		}
	}
	cc.evidence = ev
	return cc, nil
}

func (f *Front) callHandler(tool string, fixedActor string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if f.testCallDone != nil {
			defer f.testCallDone()
		}
		cc, err := f.caller(req, fixedActor)
		if err != nil {
			return nil, err
		}
		args := req.Params.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		log := f.log.With("tool", tool, "actor", cc.actor)
		// Without a progress token nothing needs the transitions in
		// between: the control plane waits for the execution to rest and
		// answers in the same round trip. It answers at once when the
		// execution awaits approval (still cancellable), so an explicit
		// cancel keeps working through the watch below.
		var waitMs int64
		if req.Params == nil || req.Params.GetProgressToken() == nil {
			waitMs = f.cfg.WaitBound.Milliseconds()
		}
		resp, err := f.cfg.ControlPlane.Submit(ctx, &controlplanev1.SubmitRequest{
			Actor:       cc.actor,
			Credential:  cc.credential,
			Tool:        tool,
			Arguments:   args,
			IntentScope: cc.scope,
			Evidence:    cc.evidence,
			WaitMs:      waitMs,
		})
		if err != nil {
			return f.submitError(log, tool, err)
		}
		f.endOnClose(req.Session, cc.actor)
		exec := resp.GetExecution()
		log = log.With("execution_id", exec.GetId())
		log.Debug("submitted", "disposition", resp.GetDisposition().String(), "state", exec.GetState().String())
		r := resp.GetResult()
		var waitErr error
		if !resting(exec.GetState()) {
			exec, r, waitErr = f.wait(ctx, req, cc, exec)
		}
		if waitErr != nil {
			return f.interrupted(ctx, log, cc, exec, waitErr)
		}
		return f.result(ctx, cc, resp.GetDisposition(), resp.GetNote(), exec, r), nil
	}
}

// submitError maps a failed Submit: InvalidArgument (schema-invalid
// arguments, unknown argument) is a JSON-RPC invalid-params error, the only
// protocol error a known tool returns; anything else is a tool error telling
// the model what is safe.
func (f *Front) submitError(log hclog.Logger, tool string, err error) (*mcp.CallToolResult, error) {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.InvalidArgument:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid arguments for %s: %s", tool, st.Message())}
	case codes.Unauthenticated:
		return toolError(fmt.Sprintf("latch refused the call, nothing was executed: the agent's credential is not valid (%s); the operator can issue a new token with `latch token create`", st.Message())), nil
	case codes.PermissionDenied, codes.FailedPrecondition, codes.NotFound:
		return toolError(fmt.Sprintf("latch refused the call: %s", st.Message())), nil
	}
	log.Warn("submit failed", "error", err)
	return toolError("latch could not reach its control plane, so it does not know whether this call was accepted. " +
		"Calling again with the same arguments is safe: it attaches to the same execution if there is one."), nil
}

func toolError(note string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: note}},
		StructuredContent: map[string]any{"note": note},
	}
}

// resting reports whether an open call's wait ends: the execution is no
// longer lifecycle.Pending (it will not move without a target answer,
// recovery, an operator or the caller). Unlike the control plane's Submit
// wait, this one waits through approval: see the lifecycle package comment.
func resting(s recordv1.State) bool { return !lifecycle.Pending(s) }

// errWaitBound ends a wait that reached Config.WaitBound.
var errWaitBound = errors.New("mcpfront: wait bound reached")

// wait watches exec until it rests, WaitBound passes (errWaitBound is not
// returned for that: the current state is answered) or ctx ends. It sends a
// progress notification on every transition and at least every
// ProgressInterval when the client asked for progress.
//
// The Watch runs on the request's ctx: when the caller goes away the wait
// stops, and nothing else happens to the execution.
func (f *Front) wait(ctx context.Context, req *mcp.CallToolRequest, cc callContext, exec *recordv1.Execution) (*recordv1.Execution, *recordv1.Result, error) {
	if resting(exec.GetState()) {
		return exec, nil, nil
	}
	wctx, cancel := context.WithTimeoutCause(ctx, f.cfg.WaitBound, errWaitBound)
	defer cancel()
	stream, err := f.cfg.ControlPlane.Watch(wctx, &controlplanev1.WatchRequest{ExecutionId: exec.GetId(), Actor: cc.actor, Credential: cc.credential})
	if err != nil {
		return f.settle(ctx, cc, exec), nil, ctx.Err()
	}
	updates := make(chan *controlplanev1.WatchResponse)
	done := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				done <- err
				return
			}
			select {
			case updates <- m:
			case <-wctx.Done():
				done <- wctx.Err()
				return
			}
		}
	}()
	var token any
	if req.Params != nil {
		token = req.Params.GetProgressToken()
	}
	step := 0.0
	progress := func(e *recordv1.Execution) {
		if token == nil || req.Session == nil {
			return
		}
		step++
		msg := fmt.Sprintf("execution %s: %s", e.GetId(), lifecycle.Name(e.GetState()))
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: step, Message: msg}); err != nil {
			f.log.Trace("progress not sent", "execution_id", e.GetId(), "error", err)
		}
	}
	progress(exec)
	tick := time.NewTicker(f.cfg.ProgressInterval)
	defer tick.Stop()
	for {
		select {
		case m := <-updates:
			e := m.GetExecution()
			if e == nil {
				continue
			}
			if e.GetState() != exec.GetState() {
				exec = e
				progress(exec)
			}
			exec = e
			if resting(exec.GetState()) {
				return exec, m.GetResult(), nil
			}
		case <-tick.C:
			progress(exec)
		case err := <-done:
			if ctx.Err() != nil {
				return exec, nil, ctx.Err()
			}
			if errors.Is(context.Cause(wctx), errWaitBound) {
				return exec, nil, nil
			}
			// Stream ended without a resting state (control plane restart):
			// answer from a fresh read.
			f.log.Debug("watch ended", "execution_id", exec.GetId(), "error", err)
			return f.settle(ctx, cc, exec), nil, ctx.Err()
		case <-wctx.Done():
			if ctx.Err() != nil {
				return exec, nil, ctx.Err()
			}
			return exec, nil, nil // wait bound: answer "still running"
		}
	}
}

// settle re-reads exec when watching failed.
func (f *Front) settle(ctx context.Context, cc callContext, exec *recordv1.Execution) *recordv1.Execution {
	if ctx.Err() != nil {
		return exec
	}
	resp, err := f.cfg.ControlPlane.Get(ctx, &controlplanev1.GetRequest{ExecutionId: exec.GetId(), Actor: cc.actor, Credential: cc.credential})
	if err != nil {
		return exec
	}
	return resp.GetExecution()
}

// interrupted handles a wait whose request ctx ended.
//
// How the SDK ends a handler's ctx (internal/jsonrpc2/conn.go, v1.8.0):
//   - notifications/cancelled for this request: the canceller preempter calls
//     Connection.Cancel(id), which calls the request's cancel(nil), so
//     context.Cause(ctx) is exactly context.Canceled;
//   - the connection closing (session DELETE or timeout, stdin closed, the
//     ephemeral stateless session closed after its POST went away): cancel
//     with the read error (io.EOF) or ErrServerClosing as the cause;
//   - the HTTP request's own ctx does not reach the handler (jsonrpc2 wraps
//     the parent in notDone unless PropagateRequestCancellation, which we
//     leave off), and in a stateful session a dropped SSE stream does not
//     end the handler at all: it keeps waiting and its answer goes to the
//     event store for GET + Last-Event-ID.
//
// So only a cause of exactly context.Canceled, on a transport that has
// notifications/cancelled (stateful HTTP, stdio), is the client's explicit
// cancel; it is forwarded to ControlPlane.Cancel, which succeeds only before
// dispatch. Any other end is "the client went away": stop waiting, never
// cancel.
func (f *Front) interrupted(ctx context.Context, log hclog.Logger, cc callContext, exec *recordv1.Execution, waitErr error) (*mcp.CallToolResult, error) {
	if !cc.stateful || context.Cause(ctx) != context.Canceled {
		return nil, waitErr
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	reason := "client sent notifications/cancelled"
	if cc.evidence.GetJsonrpcId() != "" {
		reason += " for request " + cc.evidence.GetJsonrpcId()
	}
	resp, err := f.cfg.ControlPlane.Cancel(cctx, &controlplanev1.CancelRequest{ExecutionId: exec.GetId(), Actor: cc.actor, Reason: reason, Credential: cc.credential})
	if err != nil {
		log.Warn("cancel not applied", "execution_id", exec.GetId(), "error", err)
		return nil, waitErr
	}
	f.log.Debug("cancelled on client request", "execution_id", resp.GetExecution().GetId(), "state", resp.GetExecution().GetState().String())
	// The SDK drops responses to cancelled requests; the error is for it.
	return nil, waitErr
}

// CallResult is the structuredContent of every tool call (DESIGN §8).
type CallResult struct {
	ExecutionID  string      `json:"execution_id"`
	Disposition  string      `json:"disposition"`
	State        string      `json:"state"`
	Outcome      string      `json:"outcome,omitempty"`
	TargetStatus int32       `json:"target_status,omitempty"`
	Result       *ResultView `json:"result,omitempty"`
	DispatchedAt string      `json:"dispatched_at,omitempty"`
	Note         string      `json:"note"`
}

// ResultView is a stored target answer as the model sees it.
type ResultView struct {
	Status        int32  `json:"status,omitempty"`
	ExitCode      *int32 `json:"exit_code,omitempty"`
	Signal        string `json:"signal,omitempty"`
	Body          any    `json:"body,omitempty"`
	BodyTruncated bool   `json:"body_truncated,omitempty"`
	Summary       string `json:"summary,omitempty"`
}

func outcomeName(o recordv1.Outcome) string {
	if o == recordv1.Outcome_OUTCOME_UNSPECIFIED {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(o.String(), "OUTCOME_"))
}

func dispositionName(d recordv1.Disposition) string {
	return strings.ToLower(strings.TrimPrefix(d.String(), "DISPOSITION_"))
}

func viewResult(r *recordv1.Result, channel string) *ResultView {
	if r == nil {
		return nil
	}
	v := &ResultView{Status: r.GetStatus(), Signal: r.GetSignal(), BodyTruncated: r.GetBodyTruncated(), Summary: r.GetSummary()}
	if channel != "" && channel != "http" {
		ec := r.GetExitCode()
		v.ExitCode = &ec
	}
	if body := r.GetBody(); len(body) > 0 {
		if json.Valid(body) && !r.GetBodyTruncated() {
			v.Body = json.RawMessage(body)
		} else {
			v.Body = string(body)
		}
	}
	return v
}

// result builds the answer for exec. For completed executions it reads the
// stored result and marks the answer for delivery tracking.
// result builds the tool result; r is the stored result when the caller
// already has it (from the watch), else it is read when the execution
// completed.
func (f *Front) result(ctx context.Context, cc callContext, disp recordv1.Disposition, cpNote string, exec *recordv1.Execution, r *recordv1.Result) *mcp.CallToolResult {
	cr := CallResult{
		ExecutionID:  exec.GetId(),
		Disposition:  dispositionName(disp),
		State:        lifecycle.Name(exec.GetState()),
		Outcome:      outcomeName(exec.GetOutcome()),
		TargetStatus: exec.GetTargetStatus(),
	}
	if t := exec.GetDispatchedAt(); t != nil {
		cr.DispatchedAt = t.AsTime().UTC().Format(time.RFC3339)
	}
	state := exec.GetState()
	completed := lifecycle.Observed(state)
	switch {
	case completed && r != nil:
		cr.Result = viewResult(r, exec.GetChannel())
	case completed:
		if g, err := f.cfg.ControlPlane.Get(ctx, &controlplanev1.GetRequest{ExecutionId: exec.GetId(), Actor: cc.actor, Credential: cc.credential}); err == nil {
			if g.GetExecution() != nil {
				exec = g.GetExecution()
			}
			cr.Result = viewResult(g.GetResult(), exec.GetChannel())
		}
	}
	note, isErr := noteFor(exec, cr.DispatchedAt)
	if cpNote != "" && disp != recordv1.Disposition_DISPOSITION_NEW {
		note += " (" + strings.TrimSuffix(cpNote, ".") + ")"
	}
	cr.Note = note
	res := &mcp.CallToolResult{
		IsError:           isErr,
		Content:           []mcp.Content{&mcp.TextContent{Text: note}},
		StructuredContent: cr,
	}
	if state == recordv1.State_STATE_COMPLETED && f.expectDelivery(exec.GetId()) {
		res.Meta = mcp.Meta{"latch/delivery": exec.GetId()}
	}
	return res
}

// noteFor is the one line the model reads. Uncertain states are said plainly
// and never dressed up as failures the model would retry.
func noteFor(e *recordv1.Execution, dispatchedAt string) (note string, isError bool) {
	id := e.GetId()
	reason := ""
	if r := e.GetReason(); r != "" {
		reason = ": " + r
	}
	switch e.GetState() {
	case recordv1.State_STATE_COMPLETED, recordv1.State_STATE_DELIVERED:
		if e.GetOutcome() == recordv1.Outcome_OUTCOME_FAILED_AT_TARGET {
			return fmt.Sprintf("execution %s reached the target, which reported a failure (status %d); it will not be re-sent. To try again after fixing the cause, call the tool with repeat_of=%s.", id, e.GetTargetStatus(), id), true
		}
		return fmt.Sprintf("execution %s completed; the target answered with status %d.", id, e.GetTargetStatus()), false
	case recordv1.State_STATE_DISPATCHED:
		return fmt.Sprintf("execution %s was dispatched at %s and is still running; outcome not yet known; do not retry; check latch_execution_status with execution_id %s.", id, dispatchedAt, id), false
	case recordv1.State_STATE_OUTCOME_UNKNOWN:
		return fmt.Sprintf("execution %s was dispatched at %s, outcome not yet known; do not retry; Latch is recovering it: check latch_execution_status with execution_id %s.", id, dispatchedAt, id), false
	case recordv1.State_STATE_NEEDS_REVIEW:
		return fmt.Sprintf("execution %s was dispatched at %s and its outcome is unknown; an operator must review it. Do not retry; check latch_execution_status with execution_id %s later.", id, dispatchedAt, id), false
	case recordv1.State_STATE_AWAITING_APPROVAL:
		return fmt.Sprintf("awaiting approval, execution %s%s; nothing has been sent yet. Call the tool again later with the same arguments (it attaches to this execution, no second request is made) or check latch_execution_status with execution_id %s.", id, reason, id), false
	case recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AUTHORIZED:
		return fmt.Sprintf("execution %s is accepted and still running; do not retry; check latch_execution_status with execution_id %s.", id, id), false
	case recordv1.State_STATE_NOT_EXECUTED:
		// not_executed is reached only from evidence: nothing left Latch
		// (seen before the request was written), the target's own "no
		// record" after its settle point, the host agent's not_started
		// marker, or an operator's decision. The reason says which.
		return fmt.Sprintf("execution %s was not executed%s. That is established from evidence, not from a lost connection, so calling the tool again is safe: it starts a new execution.", id, reason), true
	case recordv1.State_STATE_REJECTED:
		return fmt.Sprintf("execution %s was rejected%s; nothing was sent to the target.", id, reason), true
	case recordv1.State_STATE_CANCELLED:
		return fmt.Sprintf("execution %s was cancelled before dispatch%s; nothing was sent to the target.", id, reason), true
	}
	return fmt.Sprintf("execution %s is in state %s; check latch_execution_status with execution_id %s.", id, lifecycle.Name(e.GetState()), id), false
}
