package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/events"
	"github.com/latchhq/latch/controlplane/store"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Events are the event outbox's store and drainer (nil Outbox: no sinks).
type Events struct {
	Store  *store.Store
	Outbox *events.Outbox
}

func (s *Service) ListEvents(_ context.Context, req *controlplanev1.ListEventsRequest) (*controlplanev1.ListEventsResponse, error) {
	if s.events.Store == nil {
		return nil, status.Error(codes.FailedPrecondition, "this control plane has no event outbox")
	}
	evs, err := s.events.Store.Events(store.EventFilter{Pending: req.GetPending(), Dead: req.GetDead(), Limit: int(req.GetLimit())})
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp := &controlplanev1.ListEventsResponse{Events: evs}
	if s.events.Outbox != nil {
		for _, k := range s.events.Outbox.Sinks() {
			resp.Sinks = append(resp.Sinks, k.Name)
		}
	}
	return resp, nil
}

func (s *Service) ReplayEvents(ctx context.Context, req *controlplanev1.ReplayEventsRequest) (*controlplanev1.ReplayEventsResponse, error) {
	if s.events.Outbox == nil {
		return nil, status.Error(codes.FailedPrecondition, "no event sink is configured (latch serve --event-sink)")
	}
	n, err := s.events.Outbox.Replay(ctx, req.GetIds())
	switch {
	case errors.Is(err, events.ErrUnknownEvent):
		return nil, status.Error(codes.NotFound, err.Error())
	case err != nil:
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &controlplanev1.ReplayEventsResponse{Requeued: int32(n)}, nil
}

func (s *Service) TestEventSink(ctx context.Context, req *controlplanev1.TestEventSinkRequest) (*controlplanev1.TestEventSinkResponse, error) {
	if s.events.Outbox == nil {
		return nil, status.Error(codes.FailedPrecondition, "no event sink is configured (latch serve --event-sink)")
	}
	for _, k := range s.events.Outbox.Sinks() {
		if k.Name != req.GetSink() {
			continue
		}
		now := time.Now()
		ev := &recordv1.OutboxEvent{Id: "evt_test_" + ulid.Make().String(), Kind: recordv1.EventKind_EVENT_KIND_APPROVAL_REQUESTED,
			Time: timestamppb.New(now), Actor: "latch", Tool: "latch_events_test", Reason: "a test event sent by latch events test " + k.Name}
		code, err := s.events.Outbox.Send(ctx, k, ev)
		resp := &controlplanev1.TestEventSinkResponse{EventId: ev.GetId(), Status: int32(code)}
		if err != nil {
			resp.Error = err.Error()
		}
		return resp, nil
	}
	return nil, status.Error(codes.NotFound, fmt.Sprintf("no event sink is named %q (latch events list names them)", req.GetSink()))
}
