package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// fakeControlPlane is an in-memory ControlPlane that behaves like the real
// one where the front can tell: it validates arguments against the tool's
// schema (InvalidArgument), matches a request to a prior execution by
// (actor, intent scope or actor, tool, canonical arguments) atomically, runs
// each new execution once against the effect server, keeps approvals
// (every_call) pending until cancelled, and scopes Get/List/Watch/Cancel by
// actor. It has no durability, fingerprints or recovery.
type fakeControlPlane struct {
	controlplanev1.UnimplementedControlPlaneServer

	catalog *tools.Catalog
	effect  string // base URL of the effect server
	client  *http.Client

	mu    sync.Mutex
	seq   int
	execs map[string]*fakeExec
	order []string // ids, oldest first
	// cancels counts Cancel calls (explicit cancels reach the control plane).
	cancels atomic.Int64
}

type fakeExec struct {
	e       *recordv1.Execution
	key     string
	result  *recordv1.Result
	changed chan struct{} // closed and replaced on every transition
}

func newFakeControlPlane(cat *tools.Catalog, effectURL string) *fakeControlPlane {
	return &fakeControlPlane{catalog: cat, effect: effectURL, client: &http.Client{Timeout: time.Minute}, execs: map[string]*fakeExec{}}
}

var _ controlplanev1.ControlPlaneServer = (*fakeControlPlane)(nil)

// attachable are the states a matching request attaches to (DESIGN §5;
// completed means completed-not-delivered).
func attachable(s recordv1.State) bool {
	switch s {
	case recordv1.State_STATE_CANCELLED, recordv1.State_STATE_NOT_EXECUTED, recordv1.State_STATE_DELIVERED:
		return false
	}
	return true
}

func (f *fakeControlPlane) Submit(ctx context.Context, req *controlplanev1.SubmitRequest) (*controlplanev1.SubmitResponse, error) {
	tool, ok := f.catalog.Tools[req.GetTool()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "unknown tool %q", req.GetTool())
	}
	if req.GetActor() == "" {
		return nil, status.Error(codes.InvalidArgument, "actor is required")
	}
	// The real argument rules (schema, defaults, repeat_of), as the
	// control plane applies them.
	args, err := tool.PrepareArguments(req.GetArguments())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%v", err)
	}
	scope := req.GetIntentScope()
	if scope == "" {
		scope = "actor:" + req.GetActor()
	}
	canon, _ := json.Marshal(args) // map keys sorted: canonical enough here
	key := fmt.Sprintf("%s\x00%s\x00%s\x00%s", req.GetActor(), scope, req.GetTool(), canon)

	f.mu.Lock()
	defer f.mu.Unlock()
	repeatOf, _ := args[tools.RepeatOfArgument].(string)
	if repeatOf != "" {
		prior, ok := f.execs[repeatOf]
		if !ok || prior.e.GetActor() != req.GetActor() {
			return nil, status.Errorf(codes.FailedPrecondition, "repeat_of %s is not one of your executions", repeatOf)
		}
	}
	if tool.SideEffecting() {
		for i := len(f.order) - 1; i >= 0; i-- {
			prior := f.execs[f.order[i]]
			if prior.key == key && attachable(prior.e.GetState()) {
				return &controlplanev1.SubmitResponse{
					Disposition: recordv1.Disposition_DISPOSITION_ATTACHED,
					Execution:   proto.Clone(prior.e).(*recordv1.Execution),
					Note:        "same intent as " + prior.e.GetId() + "; not re-sent",
				}, nil
			}
		}
	}
	f.seq++
	now := timestamppb.Now()
	e := &recordv1.Execution{
		Id:          fmt.Sprintf("act_01J%023d", f.seq),
		Actor:       req.GetActor(),
		IntentScope: req.GetIntentScope(),
		Tool:        req.GetTool(),
		Channel:     "http",
		Replay:      string(tool.Replay),
		RepeatOf:    repeatOf,
		State:       recordv1.State_STATE_ACCEPTED,
		AcceptedAt:  now,
		UpdatedAt:   now,
		Evidence:    req.GetEvidence(),
		Arguments:   canon,
	}
	fe := &fakeExec{e: e, key: key, changed: make(chan struct{})}
	f.execs[e.Id] = fe
	f.order = append(f.order, e.Id)
	if tool.Approval == tools.ApprovalEveryCall {
		f.setLocked(fe, func(e *recordv1.Execution) { e.State = recordv1.State_STATE_AWAITING_APPROVAL })
	} else {
		go f.run(fe.e.GetId(), tool, args)
	}
	return &controlplanev1.SubmitResponse{
		Disposition: recordv1.Disposition_DISPOSITION_NEW,
		Execution:   proto.Clone(e).(*recordv1.Execution),
	}, nil
}

// setLocked applies one transition and wakes the watchers.
func (f *fakeControlPlane) setLocked(fe *fakeExec, change func(*recordv1.Execution)) {
	change(fe.e)
	fe.e.UpdatedAt = timestamppb.Now()
	close(fe.changed)
	fe.changed = make(chan struct{})
}

func (f *fakeControlPlane) set(id string, change func(*recordv1.Execution)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(f.execs[id], change)
}

// run dispatches a new execution once: authorized, dispatched, the HTTP call,
// completed (or not_executed when the request could not be sent).
func (f *fakeControlPlane) run(id string, tool *tools.Tool, args map[string]any) {
	f.mu.Lock()
	fe := f.execs[id]
	if fe.e.GetState() != recordv1.State_STATE_ACCEPTED {
		f.mu.Unlock()
		return
	}
	f.setLocked(fe, func(e *recordv1.Execution) { e.State = recordv1.State_STATE_AUTHORIZED; e.AuthorizedAt = timestamppb.Now() })
	f.setLocked(fe, func(e *recordv1.Execution) {
		e.State = recordv1.State_STATE_DISPATCHED
		e.DispatchedAt = timestamppb.Now()
		e.Attempts++
	})
	f.mu.Unlock()

	body, _ := json.Marshal(args)
	method, path := http.MethodPost, "/"
	if tool.Request != nil {
		method, path = tool.Request.Method, tool.Request.Path
	}
	hreq, _ := http.NewRequest(method, f.effect+path, bytes.NewReader(body))
	hreq.Header.Set("Idempotency-Key", id)
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(hreq)
	if err != nil {
		f.set(id, func(e *recordv1.Execution) { e.State = recordv1.State_STATE_OUTCOME_UNKNOWN; e.Reason = err.Error() })
		return
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	f.set(id, func(e *recordv1.Execution) {
		e.State = recordv1.State_STATE_COMPLETED
		e.CompletedAt = timestamppb.Now()
		e.TargetStatus = int32(resp.StatusCode)
		e.Outcome = recordv1.Outcome_OUTCOME_SUCCEEDED
		if resp.StatusCode >= 400 {
			e.Outcome = recordv1.Outcome_OUTCOME_FAILED_AT_TARGET
		}
		e.ResultRef = "result/" + id
		f.execs[id].result = &recordv1.Result{Status: int32(resp.StatusCode), Body: rb}
	})
}

func (f *fakeControlPlane) lookup(id, actor string) (*fakeExec, error) {
	fe, ok := f.execs[id]
	if !ok || (actor != "" && fe.e.GetActor() != actor) {
		return nil, status.Errorf(codes.NotFound, "no execution %s", id)
	}
	return fe, nil
}

func (f *fakeControlPlane) Get(_ context.Context, req *controlplanev1.GetRequest) (*controlplanev1.GetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fe, err := f.lookup(req.GetExecutionId(), req.GetActor())
	if err != nil {
		return nil, err
	}
	out := &controlplanev1.GetResponse{Execution: proto.Clone(fe.e).(*recordv1.Execution)}
	if fe.result != nil {
		out.Result = proto.Clone(fe.result).(*recordv1.Result)
	}
	return out, nil
}

func (f *fakeControlPlane) List(_ context.Context, req *controlplanev1.ListRequest) (*controlplanev1.ListResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	limit := int(req.GetLimit())
	if limit <= 0 {
		limit = 100
	}
	var out []*recordv1.Execution
	for i := len(f.order) - 1; i >= 0 && len(out) < limit; i-- {
		e := f.execs[f.order[i]].e
		if (req.GetActor() == "" || e.GetActor() == req.GetActor()) && (req.GetTool() == "" || e.GetTool() == req.GetTool()) &&
			(req.GetState() == recordv1.State_STATE_UNSPECIFIED || e.GetState() == req.GetState()) {
			out = append(out, proto.Clone(e).(*recordv1.Execution))
		}
	}
	return &controlplanev1.ListResponse{Executions: out}, nil
}

// terminal: Watch ends here (outcome_unknown is not terminal in the real
// control plane either: recovery moves it on).
func terminal(s recordv1.State) bool {
	switch s {
	case recordv1.State_STATE_COMPLETED, recordv1.State_STATE_DELIVERED, recordv1.State_STATE_NOT_EXECUTED,
		recordv1.State_STATE_NEEDS_REVIEW, recordv1.State_STATE_REJECTED, recordv1.State_STATE_CANCELLED:
		return true
	}
	return false
}

func (f *fakeControlPlane) Watch(req *controlplanev1.WatchRequest, stream grpc.ServerStreamingServer[controlplanev1.WatchResponse]) error {
	for {
		f.mu.Lock()
		fe, err := f.lookup(req.GetExecutionId(), req.GetActor())
		if err != nil {
			f.mu.Unlock()
			return err
		}
		snap := proto.Clone(fe.e).(*recordv1.Execution)
		changed := fe.changed
		f.mu.Unlock()
		if err := stream.Send(&controlplanev1.WatchResponse{Execution: snap}); err != nil {
			return err
		}
		if terminal(snap.GetState()) {
			return nil
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

func (f *fakeControlPlane) MarkDelivered(_ context.Context, req *controlplanev1.MarkDeliveredRequest) (*controlplanev1.MarkDeliveredResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fe, err := f.lookup(req.GetExecutionId(), "")
	if err != nil {
		return nil, err
	}
	if fe.e.GetState() == recordv1.State_STATE_COMPLETED {
		f.setLocked(fe, func(e *recordv1.Execution) { e.State = recordv1.State_STATE_DELIVERED; e.DeliveredAt = timestamppb.Now() })
	}
	return &controlplanev1.MarkDeliveredResponse{Execution: proto.Clone(fe.e).(*recordv1.Execution)}, nil
}

func (f *fakeControlPlane) Cancel(_ context.Context, req *controlplanev1.CancelRequest) (*controlplanev1.CancelResponse, error) {
	f.cancels.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	fe, err := f.lookup(req.GetExecutionId(), req.GetActor())
	if err != nil {
		return nil, err
	}
	switch fe.e.GetState() {
	case recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AWAITING_APPROVAL, recordv1.State_STATE_AUTHORIZED:
		f.setLocked(fe, func(e *recordv1.Execution) { e.State = recordv1.State_STATE_CANCELLED; e.Reason = req.GetReason() })
	case recordv1.State_STATE_CANCELLED:
	default:
		return nil, status.Errorf(codes.FailedPrecondition, "execution %s is %s; only an undispatched execution can be cancelled", fe.e.GetId(), fe.e.GetState())
	}
	return &controlplanev1.CancelResponse{Execution: proto.Clone(fe.e).(*recordv1.Execution)}, nil
}

// sortedIDs is for failure messages.
func (f *fakeControlPlane) sortedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := append([]string(nil), f.order...)
	sort.Strings(ids)
	return ids
}
