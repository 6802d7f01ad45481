package agent

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/latchhq/latch/hostagent"
	"github.com/latchhq/latch/hostagent/execdir"
	"github.com/latchhq/latch/hostagent/markers"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// Limits of the read APIs.
const (
	defaultWait     = 30 * time.Second
	maxWait         = 10 * time.Minute
	defaultOutput   = 64 << 10
	maxOutput       = 1 << 20
	maxListMarkers  = 10000
	maxReasonLength = 4096
	maxResultLength = 64 << 10
)

// stateError is a marker API refusal: the marker is in the wrong state.
type stateError struct {
	reason string
	marker *hostagentv1.Marker
}

func (e *stateError) Error() string {
	return fmt.Sprintf("agent: marker %s is %s", e.marker.GetExecutionId(), e.marker.GetState())
}

func refusal(m *hostagentv1.Marker) *stateError {
	switch m.GetState() {
	case hostagentv1.MarkerState_MARKER_STATE_COMPLETED:
		return &stateError{reason: hostagent.ReasonAlreadyCompleted, marker: m}
	case hostagentv1.MarkerState_MARKER_STATE_FAILED:
		return &stateError{reason: hostagent.ReasonFailedBefore, marker: m}
	default:
		return &stateError{reason: hostagent.ReasonInProgress, marker: m}
	}
}

func validID(id string) error {
	if err := execdir.ValidID(id); err != nil {
		return fmt.Errorf("%w: %v", errInvalid, err)
	}
	return nil
}

// lookup returns the run marker of id, else its script marker.
func (a *Agent) lookup(id string) (*hostagentv1.Marker, error) {
	m, err := a.store.Get(markers.Runs, id)
	if errors.Is(err, markers.ErrNotFound) {
		m, err = a.store.Get(markers.Scripts, id)
	}
	return m, err
}

// Status implements HostAgent.Status: the run marker of the ID if there is
// one, else its script marker.
func (a *Agent) Status(_ context.Context, req *hostagentv1.StatusRequest) (*hostagentv1.StatusResponse, error) {
	if err := validID(req.GetExecutionId()); err != nil {
		return nil, a.toStatus(err)
	}
	m, err := a.lookup(req.GetExecutionId())
	if err != nil {
		return nil, a.toStatus(err)
	}
	return &hostagentv1.StatusResponse{Marker: m}, nil
}

// Wait implements HostAgent.Wait: it returns when the marker is no longer
// starting, running or begun, or at the deadline (timeout_ms, default 30s,
// at most 10 min) with the marker as it is then.
func (a *Agent) Wait(ctx context.Context, req *hostagentv1.WaitRequest) (*hostagentv1.WaitResponse, error) {
	id := req.GetExecutionId()
	if err := validID(id); err != nil {
		return nil, a.toStatus(err)
	}
	d := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if d <= 0 {
		d = defaultWait
	}
	d = min(d, maxWait)
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		changed := a.notify.changed(id)
		m, err := a.lookup(id)
		if err != nil {
			return nil, a.toStatus(err)
		}
		if !hostagent.MarkerOpen(m.GetState()) {
			return &hostagentv1.WaitResponse{Marker: m}, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return &hostagentv1.WaitResponse{Marker: m}, nil
		case <-ctx.Done():
			return nil, a.toStatus(ctx.Err())
		}
	}
}

// Output implements HostAgent.Output.
func (a *Agent) Output(_ context.Context, req *hostagentv1.OutputRequest) (*hostagentv1.OutputResponse, error) {
	id := req.GetExecutionId()
	if err := validID(id); err != nil {
		return nil, a.toStatus(err)
	}
	if req.GetOffset() < 0 || req.GetLimit() < 0 {
		return nil, a.toStatus(fmt.Errorf("%w: negative offset or limit", errInvalid))
	}
	m, err := a.store.Get(markers.Runs, id)
	if err != nil {
		return nil, a.toStatus(err)
	}
	limit := int64(req.GetLimit())
	if limit == 0 {
		limit = defaultOutput
	}
	limit = min(limit, maxOutput)
	final := hostagent.MarkerFinal(m.GetState())
	resp := &hostagentv1.OutputResponse{NextOffset: req.GetOffset()}
	f, err := os.Open(filepath.Join(execdir.Path(a.cfg.DataDir, id), execdir.OutputFile))
	if errors.Is(err, os.ErrNotExist) {
		resp.Eof = final
		resp.Truncated = m.GetOutputTruncated()
		return resp, nil
	}
	if err != nil {
		return nil, a.toStatus(fmt.Errorf("agent: open output: %w", err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, a.toStatus(fmt.Errorf("agent: stat output: %w", err))
	}
	size := fi.Size()
	if req.GetOffset() < size {
		buf := make([]byte, min(limit, size-req.GetOffset()))
		n, err := f.ReadAt(buf, req.GetOffset())
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, a.toStatus(fmt.Errorf("agent: read output: %w", err))
		}
		resp.Data = buf[:n]
		resp.NextOffset = req.GetOffset() + int64(n)
	}
	resp.Eof = final && resp.NextOffset >= size
	resp.Truncated = m.GetOutputTruncated() || (!final && size >= a.cfg.OutputCap)
	return resp, nil
}

// MarkerBegin implements HostAgent.MarkerBegin: create-if-absent of a script
// marker in state begun. An existing marker is returned with begun=false.
//
// A script marker written by a command the agent runs under the same
// execution ID (the default ID of the marker CLI) has that command's secret
// env values redacted from its op, result and reason, as its output has.
func (a *Agent) MarkerBegin(ctx context.Context, req *hostagentv1.MarkerBeginRequest) (*hostagentv1.MarkerBeginResponse, error) {
	if err := validID(req.GetExecutionId()); err != nil {
		return nil, a.toStatus(err)
	}
	if len(req.GetOp()) > 256 {
		return nil, a.toStatus(fmt.Errorf("%w: op longer than 256 bytes", errInvalid))
	}
	uid, _ := PeerUID(ctx)
	now := a.cfg.Now().UnixNano()
	unlock := a.lockScript(req.GetExecutionId())
	defer unlock()
	m, created, err := a.store.Create(markers.Scripts, &hostagentv1.Marker{
		ExecutionId:     req.GetExecutionId(),
		State:           hostagentv1.MarkerState_MARKER_STATE_BEGUN,
		Op:              a.redactorOf(req.GetExecutionId()).String(req.GetOp()),
		PeerUid:         uid,
		CreatedUnixNano: now,
		UpdatedUnixNano: now,
	})
	if err != nil {
		return nil, a.toStatus(err)
	}
	if created {
		a.notify.fire(req.GetExecutionId())
		a.log.Debug("marker begun", "execution_id", req.GetExecutionId(), "op", m.GetOp(), "peer_uid", uid)
	}
	return &hostagentv1.MarkerBeginResponse{Marker: m, Begun: created}, nil
}

func (a *Agent) finishScript(id string, to hostagentv1.MarkerState, set func(*hostagentv1.Marker)) (*hostagentv1.Marker, error) {
	unlock := a.lockScript(id)
	defer unlock()
	m, err := a.store.Update(markers.Scripts, id, func(m *hostagentv1.Marker) error {
		if hostagent.CheckMarker(m.GetState(), to) != nil {
			return refusal(m)
		}
		m.State = to
		set(m)
		m.UpdatedUnixNano = a.cfg.Now().UnixNano()
		return nil
	})
	if err == nil {
		a.notify.fire(id)
	}
	return m, err
}

// lockScript serialises changes of one script marker (begin, complete and
// fail of one ID answer in the order the store applied them).
func (a *Agent) lockScript(id string) (unlock func()) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	mu := &a.scriptLocks[h.Sum32()%uint32(len(a.scriptLocks))]
	mu.Lock()
	return mu.Unlock
}

// MarkerComplete implements HostAgent.MarkerComplete: begun → completed.
func (a *Agent) MarkerComplete(_ context.Context, req *hostagentv1.MarkerCompleteRequest) (*hostagentv1.MarkerCompleteResponse, error) {
	if err := validID(req.GetExecutionId()); err != nil {
		return nil, a.toStatus(err)
	}
	if len(req.GetResultJson()) > maxResultLength {
		return nil, a.toStatus(fmt.Errorf("%w: result longer than %d bytes", errInvalid, maxResultLength))
	}
	m, err := a.finishScript(req.GetExecutionId(), hostagentv1.MarkerState_MARKER_STATE_COMPLETED, func(m *hostagentv1.Marker) {
		m.ResultJson = a.redactorOf(req.GetExecutionId()).JSON(req.GetResultJson()) // still JSON: a bare secret number becomes "[REDACTED]"
	})
	if err != nil {
		return nil, a.toStatus(err)
	}
	return &hostagentv1.MarkerCompleteResponse{Marker: m}, nil
}

// MarkerFail implements HostAgent.MarkerFail: begun → failed, with a reason.
func (a *Agent) MarkerFail(_ context.Context, req *hostagentv1.MarkerFailRequest) (*hostagentv1.MarkerFailResponse, error) {
	if err := validID(req.GetExecutionId()); err != nil {
		return nil, a.toStatus(err)
	}
	if req.GetReason() == "" || len(req.GetReason()) > maxReasonLength {
		return nil, a.toStatus(fmt.Errorf("%w: a reason of 1-%d bytes is required", errInvalid, maxReasonLength))
	}
	m, err := a.finishScript(req.GetExecutionId(), hostagentv1.MarkerState_MARKER_STATE_FAILED, func(m *hostagentv1.Marker) {
		m.Reason = a.redactorOf(req.GetExecutionId()).String(req.GetReason())
	})
	if err != nil {
		return nil, a.toStatus(err)
	}
	return &hostagentv1.MarkerFailResponse{Marker: m}, nil
}

// ListMarkers implements HostAgent.ListMarkers: run markers then script
// markers, each in ID order, at most limit (default and maximum 10000).
func (a *Agent) ListMarkers(_ context.Context, req *hostagentv1.ListMarkersRequest) (*hostagentv1.ListMarkersResponse, error) {
	limit := int(req.GetLimit())
	if limit <= 0 || limit > maxListMarkers {
		limit = maxListMarkers
	}
	ms, err := a.store.List(markers.Runs, limit)
	if err != nil {
		return nil, a.toStatus(err)
	}
	if rest := limit - len(ms); rest > 0 {
		more, err := a.store.List(markers.Scripts, rest)
		if err != nil {
			return nil, a.toStatus(err)
		}
		ms = append(ms, more...)
	}
	return &hostagentv1.ListMarkersResponse{Markers: ms}, nil
}
