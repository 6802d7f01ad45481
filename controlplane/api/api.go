// Package api serves the ControlPlane gRPC service over the engine. It
// validates every request, maps engine errors to gRPC status codes in one
// place (toStatus), and never lets an internal error text reach a client
// unexamined.
package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/controlplane/transition"
	"github.com/latchhq/latch/internal/errinfo"
	"github.com/latchhq/latch/internal/lifecycle"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	receiptv1 "github.com/latchhq/latch/proto/latch/receipt/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Refusals carry an ErrorInfo (internal/errinfo, controlplanev1.ErrorReason)
// for clients that branch, and the caller-facing problem (errinfo.MetaProblem).

// Config names the service's dependencies.
type Config struct {
	Logger hclog.Logger
	Engine *engine.Engine
	// Observer, when set, is told about each Submit (observe.go).
	Observer SubmitObserver
	// Tokens authenticates agent credentials (AuthenticateAgent, Submit).
	// Nil: no token store; only callers allowed to act as an actor submit.
	Tokens Authenticator
	// FrontActors binds front identities to actors (see FrontActors).
	FrontActors FrontActors
	// Caller tells who made a call (default PeerCaller).
	Caller CallerFunc
	// Receipts issues the receipts Submit and Get are asked for
	// (receipts.Issuer). Nil: none are sent.
	Receipts ReceiptIssuer
}

// ReceiptIssuer issues an execution's receipt; controlplane/receipts'
// Issuer implements it.
type ReceiptIssuer interface {
	Issue(x *recordv1.Execution) (*receiptv1.Receipt, error)
}

// Service implements controlplanev1.ControlPlaneServer.
type Service struct {
	controlplanev1.UnsafeControlPlaneServer
	log    hclog.Logger
	e      *engine.Engine
	tokens Authenticator
	fronts FrontActors
	caller CallerFunc
	obs    SubmitObserver
	rcpt   ReceiptIssuer

	drainOnce sync.Once
	draining  chan struct{}
}

var _ controlplanev1.ControlPlaneServer = (*Service)(nil)

// New builds the service.
func New(cfg Config) (*Service, error) {
	if cfg.Engine == nil {
		return nil, errors.New("api: Config.Engine is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Caller == nil {
		cfg.Caller = PeerCaller
	}
	return &Service{log: cfg.Logger.Named("api"), e: cfg.Engine, tokens: cfg.Tokens, fronts: cfg.FrontActors, caller: cfg.Caller, obs: cfg.Observer, rcpt: cfg.Receipts, draining: make(chan struct{})}, nil
}

// Drain ends the long polls in progress (ListTools answers "unchanged") and
// makes new ones answer at once, so a graceful stop is not held up by them.
func (s *Service) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// Register adds the service to a gRPC server.
func (s *Service) Register(g grpc.ServiceRegistrar) { controlplanev1.RegisterControlPlaneServer(g, s) }

func (s *Service) Submit(ctx context.Context, req *controlplanev1.SubmitRequest) (*controlplanev1.SubmitResponse, error) {
	actor, ev, err := s.submitActor(ctx, req)
	if err != nil {
		return nil, err
	}
	in := engine.SubmitInput{
		Actor: actor, Tool: req.GetTool(), Arguments: req.GetArguments(),
		Scope: req.GetIntentScope(), Evidence: ev,
	}
	ctx, observed := s.observeSubmit(ctx, &in)
	r, err := s.e.Submit(ctx, in)
	observed(r, err)
	if err != nil {
		return nil, s.toStatus(err)
	}
	resp := &controlplanev1.SubmitResponse{Disposition: r.Disposition, Execution: r.Execution, Note: r.Note}
	if w := req.GetWaitMs(); w > 0 && w <= maxWaitMs {
		resp.Execution, resp.Result = s.waitResting(ctx, r.Execution, time.Duration(w)*time.Millisecond)
	} else if w > maxWaitMs {
		return nil, status.Errorf(codes.InvalidArgument, "wait_ms must be at most %d", maxWaitMs)
	}
	if req.GetReceipt() && !lifecycle.Pending(resp.GetExecution().GetState()) {
		resp.Receipt = s.receipt(resp.GetExecution())
	}
	return resp, nil
}

// receipt is x's receipt, or nil when there is no issuer or it fails: the
// answer goes out without one (the caller can ask again with Get), since
// what the execution did does not depend on it.
func (s *Service) receipt(x *recordv1.Execution) *receiptv1.Receipt {
	if s.rcpt == nil || x == nil {
		return nil
	}
	r, err := s.rcpt.Issue(x)
	if err != nil {
		s.log.Warn("receipt not issued", "execution_id", x.GetId(), "error", err)
		return nil
	}
	return r
}

// maxWaitMs bounds a Submit's server-side wait.
const maxWaitMs = 10 * 60 * 1000

// waitResting follows an execution until it rests (lifecycle.Resting, which
// includes awaiting approval: the caller gets the execution ID while it can
// still cancel) or the wait ends, and returns the newest state and its stored
// result. The caller going away only ends the wait.
func (s *Service) waitResting(ctx context.Context, x *recordv1.Execution, d time.Duration) (*recordv1.Execution, *recordv1.Result) {
	wctx, cancel := context.WithTimeout(ctx, d)
	x = s.e.AwaitResting(wctx, x, func(x *recordv1.Execution) bool { return lifecycle.Resting(x.GetState()) })
	cancel()
	if x.GetResultRef() == "" {
		return x, nil
	}
	cur, r, err := s.e.Get(x.GetId(), "")
	if err != nil {
		return x, nil
	}
	// cur may have moved on: a result that failed its hash check sent it
	// to needs_review, and the caller must see that, not "completed".
	return cur, r
}

func (s *Service) Get(ctx context.Context, req *controlplanev1.GetRequest) (*controlplanev1.GetResponse, error) {
	if req.GetExecutionId() == "" {
		return nil, status.Error(codes.InvalidArgument, "execution_id is required")
	}
	actor, err := s.readActor(ctx, "Get", req.GetActor(), req.GetCredential())
	if err != nil {
		return nil, err
	}
	x, r, err := s.e.Get(req.GetExecutionId(), actor)
	if err != nil {
		return nil, s.toStatus(err)
	}
	resp := &controlplanev1.GetResponse{Execution: x, Result: r}
	if req.GetReceipt() {
		resp.Receipt = s.receipt(x)
	}
	return resp, nil
}

func (s *Service) List(ctx context.Context, req *controlplanev1.ListRequest) (*controlplanev1.ListResponse, error) {
	if req.GetLimit() < 0 || req.GetLimit() > 1000 {
		return nil, status.Error(codes.InvalidArgument, "limit must be between 0 (default 100) and 1000")
	}
	actor, err := s.readActor(ctx, "List", req.GetActor(), req.GetCredential())
	if err != nil {
		return nil, err
	}
	xs, err := s.e.List(store.Filter{Actor: actor, Tool: req.GetTool(), State: req.GetState(), Limit: int(req.GetLimit())})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &controlplanev1.ListResponse{Executions: xs}, nil
}

func (s *Service) Watch(req *controlplanev1.WatchRequest, stream grpc.ServerStreamingServer[controlplanev1.WatchResponse]) error {
	if req.GetExecutionId() == "" {
		return status.Error(codes.InvalidArgument, "execution_id is required")
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	actor, err := s.readActor(ctx, "Watch", req.GetActor(), req.GetCredential())
	if err != nil {
		return err
	}
	ch, err := s.e.Watch(ctx, req.GetExecutionId(), actor)
	if err != nil {
		return s.toStatus(err)
	}
	var last uint64
	sent := false
	for x := range ch {
		// States arrive in order, except that the first snapshot may trail
		// a change already queued: never send an older record.
		if sent && x.GetJournalIndex() < last {
			continue
		}
		last, sent = x.GetJournalIndex(), true
		resp := &controlplanev1.WatchResponse{Execution: x}
		if x.GetResultRef() != "" {
			if _, r, err := s.e.Get(x.GetId(), ""); err == nil {
				resp.Result = r
			}
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
		if lifecycle.Terminal(x.GetState()) {
			return nil
		}
	}
	return stream.Context().Err()
}

// maxDeliveredPerCall bounds the executions of one MarkDelivered.
const maxDeliveredPerCall = 1000

// MarkDelivered records delivery of execution_id and of every one in
// more_execution_ids, or, when the request carries reports, what each report
// says (delivered, or the caller left before the answer; the ids are then
// the same deliveries again, for control planes that predate reports, and
// are not read). Each is its own update (engine.MarkDeliveredAt, lazy;
// engine.MarkCallerLeft), made at once, so they join one group commit; the
// answer comes when every one is durable. The response carries the first
// execution; the first failure, if any, is the error (the others are
// recorded still).
func (s *Service) MarkDelivered(ctx context.Context, req *controlplanev1.MarkDeliveredRequest) (*controlplanev1.MarkDeliveredResponse, error) {
	reports := req.GetReports()
	if len(reports) == 0 {
		more := req.GetMoreExecutionIds()
		if len(more) >= maxDeliveredPerCall {
			return nil, status.Errorf(codes.InvalidArgument, "MarkDelivered names %d executions; at most %d per call", len(more)+1, maxDeliveredPerCall)
		}
		reports = make([]*controlplanev1.DeliveryReport, 0, len(more)+1)
		for _, id := range append([]string{req.GetExecutionId()}, more...) {
			reports = append(reports, &controlplanev1.DeliveryReport{ExecutionId: id, Delivery: recordv1.Delivery_DELIVERY_DELIVERED})
		}
	}
	if len(reports) > maxDeliveredPerCall {
		return nil, status.Errorf(codes.InvalidArgument, "MarkDelivered carries %d reports; at most %d per call: send the rest in another call", len(reports), maxDeliveredPerCall)
	}
	for i, r := range reports {
		switch r.GetDelivery() {
		case recordv1.Delivery_DELIVERY_DELIVERED, recordv1.Delivery_DELIVERY_CALLER_LEFT:
		default:
			return nil, status.Errorf(codes.InvalidArgument, "MarkDelivered report %d (execution %q) says %v; a report says DELIVERY_DELIVERED or DELIVERY_CALLER_LEFT", i, r.GetExecutionId(), r.GetDelivery())
		}
	}
	record := func(r *controlplanev1.DeliveryReport) (*recordv1.Execution, error) {
		var observed time.Time
		if r.GetObservedAt() != nil {
			observed = r.GetObservedAt().AsTime()
		}
		if r.GetDelivery() == recordv1.Delivery_DELIVERY_CALLER_LEFT {
			return s.e.MarkCallerLeft(ctx, r.GetExecutionId(), observed)
		}
		return s.e.MarkDeliveredAt(ctx, r.GetExecutionId(), observed)
	}
	if len(reports) == 1 {
		x, err := record(reports[0])
		if err != nil {
			return nil, s.toStatus(err)
		}
		return &controlplanev1.MarkDeliveredResponse{Execution: x}, nil
	}
	xs := make([]*recordv1.Execution, len(reports))
	errs := make([]error, len(reports))
	var wg sync.WaitGroup
	for i, r := range reports {
		wg.Go(func() { xs[i], errs[i] = record(r) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, s.toStatus(fmt.Errorf("delivery report of %s: %w", reports[i].GetExecutionId(), err))
		}
	}
	return &controlplanev1.MarkDeliveredResponse{Execution: xs[0]}, nil
}

func (s *Service) Cancel(ctx context.Context, req *controlplanev1.CancelRequest) (*controlplanev1.CancelResponse, error) {
	actor, err := s.readActor(ctx, "Cancel", req.GetActor(), req.GetCredential())
	if err != nil {
		return nil, err
	}
	reason := req.GetReason()
	if op := req.GetOperator(); op != "" {
		// An operator's decision, journaled as every decision is: under
		// the operator's name (bound to the caller by the interceptor).
		if !s.caller(ctx).Operator {
			return nil, status.Error(codes.PermissionDenied, "Cancel: only an operator caller may name an operator")
		}
		reason = cancelReason(op, reason)
	}
	x, err := s.e.Cancel(ctx, req.GetExecutionId(), actor, reason)
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &controlplanev1.CancelResponse{Execution: x}, nil
}

// cancelReason is an operator's cancellation as the journal records it,
// in the form of every decision ("approved by", "resolved by").
func cancelReason(operator, reason string) string {
	if reason == "" {
		return "cancelled by " + operator
	}
	return "cancelled by " + operator + ": " + reason
}

func (s *Service) Resolve(ctx context.Context, req *controlplanev1.ResolveRequest) (*controlplanev1.ResolveResponse, error) {
	x, err := s.e.Resolve(ctx, engine.ResolveInput{
		ID: req.GetExecutionId(), Completed: req.GetCompleted(), NotExecuted: req.GetNotExecuted(),
		Outcome: req.GetOutcome(), Reason: req.GetReason(), Operator: req.GetOperator(),
	})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &controlplanev1.ResolveResponse{Execution: x}, nil
}

func (s *Service) History(ctx context.Context, req *controlplanev1.HistoryRequest) (*controlplanev1.HistoryResponse, error) {
	if req.GetExecutionId() == "" {
		return nil, status.Error(codes.InvalidArgument, "execution_id is required")
	}
	es, err := s.e.History(req.GetExecutionId(), req.GetActor())
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &controlplanev1.HistoryResponse{Entries: es}, nil
}

func (s *Service) Approve(ctx context.Context, req *controlplanev1.ApproveRequest) (*controlplanev1.ApproveResponse, error) {
	if req.GetExecutionId() == "" || req.GetOperator() == "" {
		return nil, status.Error(codes.InvalidArgument, "execution_id and operator are required")
	}
	x, err := s.e.Approve(ctx, req.GetExecutionId(), req.GetOperator(), req.GetReason())
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &controlplanev1.ApproveResponse{Execution: x}, nil
}

func (s *Service) Deny(ctx context.Context, req *controlplanev1.DenyRequest) (*controlplanev1.DenyResponse, error) {
	if req.GetExecutionId() == "" || req.GetOperator() == "" || req.GetReason() == "" {
		return nil, status.Error(codes.InvalidArgument, "execution_id, operator and reason are required (the reason is shown to the agent)")
	}
	x, err := s.e.Deny(ctx, req.GetExecutionId(), req.GetOperator(), req.GetReason())
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &controlplanev1.DenyResponse{Execution: x}, nil
}

func (s *Service) ListSessions(ctx context.Context, req *controlplanev1.ListSessionsRequest) (*controlplanev1.ListSessionsResponse, error) {
	if req.GetLimit() < 0 {
		return nil, status.Error(codes.InvalidArgument, "limit must not be negative")
	}
	ss, err := s.e.Sessions(int(req.GetLimit()))
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &controlplanev1.ListSessionsResponse{Sessions: ss}, nil
}

func (s *Service) AuthorizeSession(ctx context.Context, req *controlplanev1.AuthorizeSessionRequest) (*controlplanev1.AuthorizeSessionResponse, error) {
	if req.GetSessionId() == "" || req.GetOperator() == "" {
		return nil, status.Error(codes.InvalidArgument, "session_id and operator are required")
	}
	x, err := s.e.AuthorizeSession(ctx, req.GetSessionId(), req.GetOperator())
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &controlplanev1.AuthorizeSessionResponse{Session: x}, nil
}

func (s *Service) RevokeSession(ctx context.Context, req *controlplanev1.RevokeSessionRequest) (*controlplanev1.RevokeSessionResponse, error) {
	if req.GetSessionId() == "" || req.GetOperator() == "" || req.GetReason() == "" {
		return nil, status.Error(codes.InvalidArgument, "session_id, operator and reason are required")
	}
	x, err := s.e.RevokeSession(ctx, req.GetSessionId(), req.GetOperator(), req.GetReason())
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &controlplanev1.RevokeSessionResponse{Session: x}, nil
}

func (s *Service) EndSession(ctx context.Context, req *controlplanev1.EndSessionRequest) (*controlplanev1.EndSessionResponse, error) {
	x, orphans, err := s.e.EndSession(ctx, req.GetActor(), req.GetMcpSessionId())
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &controlplanev1.EndSessionResponse{Session: x, OrphanedExecutions: orphans}, nil
}

// toStatus maps engine errors to gRPC codes. Expected errors keep their
// message (written for the caller); anything else is logged and hidden.
func (s *Service) toStatus(err error) error {
	var te *transition.TransitionError
	switch {
	case errors.Is(err, engine.ErrUnknownTool):
		return withReason(codes.NotFound, controlplanev1.ErrorReason_ERROR_REASON_UNKNOWN_TOOL, err)
	case errors.Is(err, engine.ErrInvalidArguments):
		return withReason(codes.InvalidArgument, controlplanev1.ErrorReason_ERROR_REASON_INVALID_ARGUMENTS, err)
	case errors.Is(err, engine.ErrBadRepeatOf):
		return withReason(codes.InvalidArgument, controlplanev1.ErrorReason_ERROR_REASON_BAD_REPEAT_OF, err)
	case errors.Is(err, engine.ErrInvalidRequest):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, engine.ErrNotFound), errors.Is(err, engine.ErrSessionNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, engine.ErrTooLate):
		return withReason(codes.FailedPrecondition, controlplanev1.ErrorReason_ERROR_REASON_ALREADY_DISPATCHED, err)
	case errors.Is(err, engine.ErrNotResolvable), errors.As(err, &te):
		return withReason(codes.FailedPrecondition, controlplanev1.ErrorReason_ERROR_REASON_NOT_AWAITING_DECISION, err)
	case errors.Is(err, store.ErrStateMismatch):
		// The text names execution IDs, keys and journal indexes (never
		// secrets) and the command that shows every mismatch.
		s.log.Error("state disagrees with the journal", "error", err)
		return withReason(codes.DataLoss, controlplanev1.ErrorReason_ERROR_REASON_STATE_MISMATCH, err)
	case errors.Is(err, engine.ErrClosed), errors.Is(err, store.ErrClosed):
		return status.Error(codes.Unavailable, "control plane is shutting down; retry against the restarted instance")
	case errors.Is(err, backend.ErrFenced), errors.Is(err, backend.ErrCommitUnknown):
		// Nothing of this call was committed here (fenced), or this replica
		// writes nothing more until restarted: another replica serves it,
		// and a Submit sent again there attaches by its fingerprint.
		s.log.Warn("refusing a call: this replica can no longer write", "error", err)
		return status.Error(codes.Unavailable, "this control-plane replica can no longer write to the store (another replica holds the lease, or it must restart); retry against the active replica")
	case errors.Is(err, backend.ErrNotCommitted):
		// Nothing of this call was committed: sending it again (here once
		// the database is back, or to another replica) is safe.
		s.log.Warn("refusing a call: the database is unreachable", "error", err)
		return status.Error(codes.Unavailable, "the control plane cannot reach its database; nothing of this call was recorded; retry")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	s.log.Error("internal error", "error", err)
	return status.Error(codes.Internal, "internal error in the control plane; see its log")
}

// withReason is the status of a refusal the caller can act on: its
// ErrorInfo carries the caller-facing problem (engine.Problem) as
// errinfo.MetaProblem when the error has one.
func withReason(c codes.Code, reason controlplanev1.ErrorReason, err error) error {
	return errinfo.Error(c, err.Error(), reason, errinfo.MetaProblem, engine.Problem(err))
}
