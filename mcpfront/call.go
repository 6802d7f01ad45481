package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/internal/errinfo"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/mcpwire"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/receipt"
	"github.com/latchhq/latch/tools"
)

// MetaRun is the `_meta` key of a call's explicit intent scope (docs/design §5).
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
	if t.GetSideEffecting() && !t.GetObserved() {
		desc = strings.TrimSpace(desc + " Latch runs each intent once: calling again with the same arguments attaches to the same execution; to repeat on purpose, pass repeat_of.")
	}
	return &mcp.Tool{
		Name:         t.GetName(),
		Description:  desc,
		InputSchema:  schema,
		OutputSchema: callResultSchema,
		Annotations:  ann,
	}, nil
}

// callResultSchema is the outputSchema of every catalog tool: the shape of
// CallResult, the structuredContent of each answer. Only note is required:
// a call refused before it had an execution (bad arguments, a refusal)
// answers with the note alone.
var callResultSchema = json.RawMessage(`{
  "type": "object",
  "required": ["note"],
  "properties": {
    "execution_id": {"type": "string", "description": "The execution this call made or attached to (act_…)."},
    "disposition": {"type": "string", "enum": ["new", "attached", "recovered", "rejected"], "description": "Whether this call made a new execution or attached to an identical earlier one."},
    "state": {"type": "string", "enum": ["accepted", "awaiting_approval", "authorized", "dispatched", "completed", "delivered", "outcome_unknown", "not_executed", "needs_review", "rejected", "cancelled"]},
    "outcome": {"type": "string", "enum": ["succeeded", "failed_at_target"]},
    "target_status": {"type": "integer", "description": "HTTP status, or the command's exit status; absent for an upstream tool's result (see result.answer)."},
    "dispatched_at": {"type": "string", "format": "date-time"},
    "result": {
      "type": "object",
      "description": "The target's stored answer.",
      "properties": {
        "answer": {"type": "string", "enum": ["http_status", "process_exit", "upstream_tool_result", "script_marker"], "description": "What kind of answer the target gave."},
        "status": {"type": "integer"},
        "exit_code": {"type": "integer"},
        "signal": {"type": "string"},
        "body": {"type": ["object", "array", "string", "number", "boolean", "null"], "description": "The answer's body: JSON when the target sent JSON, else text."},
        "body_truncated": {"type": "boolean"},
        "summary": {"type": "string"}
      }
    },
    "note": {"type": "string", "description": "What happened and what to do next, written for the model."},
    "receipt": {"type": "object", "description": "The execution's receipt: its journal record, an inclusion proof and a checkpoint signed by Latch's journal key, checkable offline (latch receipt verify)."}
  }
}`)

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
	// resumable is a stateful HTTP session's call: an answer its dropped
	// stream missed is kept for a resume (GET + Last-Event-ID), so a drop
	// is not the caller leaving (delivery.go).
	resumable bool
	// pushed: the front follows this answer's execution for the caller's
	// session and pushes its outcome there (late.go); the note says so.
	pushed bool
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
		if v := h.Get(mcpwire.HeaderProtocolVersion); isModernEra(v) {
			ev.Transport = "streamable-http/" + v
		} else {
			ev.Transport = "streamable-http/session"
			if v != "" {
				ev.Transport = "streamable-http/" + v
			}
			cc.stateful, cc.resumable = true, true
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
		ctx, observed := f.observeCall(ctx, req, tool)
		var submitted *controlplanev1.SubmitResponse
		defer func() { observed(submitted.GetDisposition(), submitted.GetExecution(), nil) }()
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
			Receipt:     !f.cfg.NoReceipts,
		})
		if err != nil {
			return f.submitError(log, tool, err)
		}
		submitted = resp
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
		cc.pushed = f.watchLate(ctx, req, cc, exec, lateCall)
		res := f.result(ctx, cc, resp.GetDisposition(), axisDisp(resp.GetDisposition()), exec, r)
		if exec.GetJournalIndex() == resp.GetExecution().GetJournalIndex() {
			f.attachReceipt(ctx, cc, res, exec, resp.GetReceipt())
		} else {
			f.attachReceipt(ctx, cc, res, exec, nil) // moved on while watched: the receipt of where it rests
		}
		res = personNote(res, exec, f.operatorArgs())
		if ctx.Err() != nil && !cc.resumable {
			// The caller left while the answer was being made: it is
			// never written (the SDK drops answers to ended requests).
			f.callerLeft(exec.GetId())
		}
		return res, nil
	}
}

// submitError maps a failed Submit. Bad arguments (InvalidArgument) are a
// tool error the model can act on, naming the argument and what is expected;
// so are refusals. Protocol errors are left to the SDK (unknown tool,
// malformed request). Anything else is a tool error telling the model what
// is safe.
func (f *Front) submitError(log hclog.Logger, tool string, err error) (*mcp.CallToolResult, error) {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.InvalidArgument:
		return toolError(argumentNote(tool, statusProblem(err, st))), nil
	case codes.Unauthenticated:
		return toolError(fmt.Sprintf("latch refused the call, nothing was executed: the agent's credential is not valid (%s); the operator can issue a new token with `latch token create`", st.Message())), nil
	case codes.PermissionDenied, codes.FailedPrecondition, codes.NotFound:
		return toolError(fmt.Sprintf("latch refused the call: %s", statusProblem(err, st))), nil
	}
	if st.Code() == codes.Canceled {
		// The client went away before the control plane answered: nothing
		// is wrong with Latch, and the execution (if accepted) goes on.
		log.Debug("submit abandoned: the client went away", "error", err)
	} else {
		log.Warn("submit failed", "error", err)
	}
	return toolError("latch could not reach its control plane, so it does not know whether this call was accepted. " +
		"Calling again with the same arguments is safe: it attaches to the same execution if there is one."), nil
}

// statusProblem is the caller-facing problem of a refusal: the problem the
// control plane's ErrorInfo carries (errinfo.Problem; an ErrorInfo of
// another domain is not read), else the status message as it is. The
// message is never rewritten: what the caller may read is the control
// plane's to say.
func statusProblem(err error, st *status.Status) string {
	if p := errinfo.Problem(err); p != "" {
		return p
	}
	return st.Message()
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
	person := f.newPersonTimer(exec) // tasks_person.go
	defer person.stop()
	for {
		select {
		case <-person.C():
			return exec, nil, nil // waits for a person: answer now
		case m := <-updates:
			e := m.GetExecution()
			if e == nil {
				continue
			}
			person.update(e)
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
//
// Either way the caller will not get this answer: it left before it, which
// is reported (delivery.go), except on a resumable session whose stream
// merely dropped (its answer waits for a resume; the session's end
// records what it never got).
func (f *Front) interrupted(ctx context.Context, log hclog.Logger, cc callContext, exec *recordv1.Execution, waitErr error) (*mcp.CallToolResult, error) {
	explicit := cc.stateful && context.Cause(ctx) == context.Canceled //nolint:errorlint // exactly context.Canceled is the explicit cancel (above); a wrapped one is not
	if explicit || !cc.resumable {
		defer f.callerLeft(exec.GetId())
	}
	if !explicit {
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

// CallResult is the structuredContent of every tool call (docs/design §8).
type CallResult struct {
	ExecutionID  string      `json:"execution_id"`
	Disposition  string      `json:"disposition"`
	State        string      `json:"state"`
	Outcome      string      `json:"outcome,omitempty"`
	TargetStatus int32       `json:"target_status,omitempty"`
	Result       *ResultView `json:"result,omitempty"`
	DispatchedAt string      `json:"dispatched_at,omitempty"`
	Note         string      `json:"note"`
	// Receipt is the execution's receipt (receipts.go): its journal
	// record, proven against a signed checkpoint.
	Receipt *receipt.Receipt `json:"receipt,omitempty"`
}

// ResultView is a stored target answer as the model sees it.
type ResultView struct {
	// Answer is the kind of answer (answerNames): "http_status",
	// "process_exit", "upstream_tool_result" or "script_marker".
	Answer        string `json:"answer,omitempty"`
	Status        int32  `json:"status,omitempty"`
	ExitCode      *int32 `json:"exit_code,omitempty"`
	Signal        string `json:"signal,omitempty"`
	Body          any    `json:"body,omitempty"`
	BodyTruncated bool   `json:"body_truncated,omitempty"`
	Summary       string `json:"summary,omitempty"`

	kind recordv1.AnswerKind
}

// answerKind is the view's kind of answer; a view made without one (by
// hand) is a process's exit when it carries one, else a status.
func (v *ResultView) answerKind() recordv1.AnswerKind {
	switch {
	case v.kind != recordv1.AnswerKind_ANSWER_KIND_UNSPECIFIED:
		return v.kind
	case v.ExitCode != nil || v.Signal != "":
		return recordv1.AnswerKind_ANSWER_KIND_PROCESS
	}
	return recordv1.AnswerKind_ANSWER_KIND_STATUS
}

// answerNames are ResultView.Answer's values.
var answerNames = map[recordv1.AnswerKind]string{
	recordv1.AnswerKind_ANSWER_KIND_STATUS:      "http_status",
	recordv1.AnswerKind_ANSWER_KIND_PROCESS:     "process_exit",
	recordv1.AnswerKind_ANSWER_KIND_TOOL_RESULT: "upstream_tool_result",
	recordv1.AnswerKind_ANSWER_KIND_MARKER:      "script_marker",
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

// viewResult is the stored result as the model sees it. It reads only the
// fields the channel that observed it set (recordv1.Result): the front knows
// no channel by name.
func viewResult(r *recordv1.Result) *ResultView {
	if r == nil {
		return nil
	}
	k := lifecycle.AnswerOf(r)
	v := &ResultView{kind: k, Answer: answerNames[k], Status: r.GetStatus(), Signal: r.GetSignal(), BodyTruncated: r.GetBodyTruncated(), Summary: r.GetSummary()}
	if r.GetExited() {
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

// result builds the tool result for exec. r is the stored result when the
// caller already has it (from the watch), else it is read when the execution
// completed; a completed answer is marked for delivery tracking. The
// control plane's Submit note is not used: the note comes from noteTable
// alone, for the state the execution is in now.
//
// nd is the note's disposition axis: axisDisp(disp) for a tool call,
// dispNew for a status read or cancel, which describe the execution itself.
func (f *Front) result(ctx context.Context, cc callContext, disp recordv1.Disposition, nd noteDisp, exec *recordv1.Execution, r *recordv1.Result) *mcp.CallToolResult {
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
		cr.Result = viewResult(r)
	case completed:
		if g, err := f.cfg.ControlPlane.Get(ctx, &controlplanev1.GetRequest{ExecutionId: exec.GetId(), Actor: cc.actor, Credential: cc.credential}); err == nil {
			if g.GetExecution() != nil {
				exec = g.GetExecution()
			}
			cr.Result = viewResult(g.GetResult())
		}
	}
	note, isErr := noteFor(exec, nd, cr.DispatchedAt, cr.Result, cc.pushed && !resolved(exec.GetState()))
	cr.Note = note
	res := &mcp.CallToolResult{
		IsError:           isErr,
		Content:           []mcp.Content{&mcp.TextContent{Text: resultText(note, cr.Result)}},
		StructuredContent: cr,
	}
	if state == recordv1.State_STATE_COMPLETED && f.expectDelivery(exec.GetId()) {
		res.Meta = mcp.Meta{"latch/delivery": exec.GetId()}
	}
	return res
}

// maxTextBody caps the target's body in the text block; the whole stored
// body (itself capped by the control plane) is in structuredContent.
const maxTextBody = 8 << 10

// resultText is the text block: the note, then the target's answer when
// there is one, so a client that shows only text still sees the result.
func resultText(note string, v *ResultView) string {
	if v == nil {
		return note
	}
	var b strings.Builder
	b.WriteString(note)
	b.WriteString("\n\n")
	headerAt := b.Len()
	switch k := v.answerKind(); {
	case k == recordv1.AnswerKind_ANSWER_KIND_STATUS:
		fmt.Fprintf(&b, "Target answer (HTTP status %d):", v.Status)
	case k == recordv1.AnswerKind_ANSWER_KIND_TOOL_RESULT:
		b.WriteString("Upstream tool result:")
	case k == recordv1.AnswerKind_ANSWER_KIND_MARKER:
		b.WriteString("Script marker result:")
	case v.Signal != "":
		fmt.Fprintf(&b, "Command output (killed by signal %s):", v.Signal)
	case v.ExitCode != nil:
		fmt.Fprintf(&b, "Command output (exit status %d):", *v.ExitCode)
	default:
		b.WriteString("Command output:")
	}
	// The summary adds what the header does not already say ("exit
	// status 0" after "Command output (exit status 0):" would repeat it).
	if v.Summary != "" && !strings.Contains(b.String()[headerAt:], v.Summary) {
		b.WriteString(" " + v.Summary)
	}
	body := ""
	switch tb := v.Body.(type) {
	case json.RawMessage:
		body = string(tb)
	case string:
		body = tb
	}
	if body == "" {
		b.WriteString("\n(empty body)")
		return b.String()
	}
	b.WriteString("\n")
	if len(body) > maxTextBody {
		cut := maxTextBody
		for cut > 0 && !utf8.RuneStart(body[cut]) {
			cut--
		}
		fmt.Fprintf(&b, "%s\n[%d more bytes in structuredContent.result.body]", body[:cut], len(body)-cut)
	} else {
		b.WriteString(body)
	}
	if v.BodyTruncated {
		b.WriteString("\n[the stored body was truncated by Latch at its size limit]")
	}
	return b.String()
}
