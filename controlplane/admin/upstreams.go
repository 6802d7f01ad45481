package admin

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/mcpchannel"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// Upstreams lists what an upstream MCP server offers. Implemented by
// *mcpchannel.Channel.
type Upstreams interface {
	ListUpstreamTools(ctx context.Context, name string) (*controlplanev1.ListUpstreamToolsResponse, error)
	AcceptUpstreamTool(ctx context.Context, tool, actor, hash string) (*controlplanev1.AcceptUpstreamToolResponse, error)
}

// AcceptUpstreamTool pins an upstream tool as the upstream offers it now,
// releasing a held change.
func (s *Service) AcceptUpstreamTool(ctx context.Context, req *controlplanev1.AcceptUpstreamToolRequest) (*controlplanev1.AcceptUpstreamToolResponse, error) {
	if req.GetTool() == "" {
		return nil, status.Error(codes.InvalidArgument, "name the catalog tool (<upstream>.<tool>)")
	}
	if s.ups == nil {
		return nil, status.Error(codes.FailedPrecondition, "this control plane has no upstream MCP channel")
	}
	// The admin API's callers are operators (authz); the name is what the
	// client says, and the journal says so.
	actor := "operator"
	if a := req.GetActor(); a != "" {
		actor = "operator " + a + " (as the client names itself)"
	}
	resp, err := s.ups.AcceptUpstreamTool(ctx, req.GetTool(), actor, req.GetHash())
	switch {
	case errors.Is(err, mcpchannel.ErrUnknownTool), errors.Is(err, mcpchannel.ErrUnknownUpstream):
		return nil, status.Error(codes.NotFound, err.Error())
	case errors.Is(err, mcpchannel.ErrStaleOffer):
		return nil, status.Error(codes.Aborted, err.Error())
	case err != nil:
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return resp, nil
}

func (s *Service) ListUpstreamTools(ctx context.Context, req *controlplanev1.ListUpstreamToolsRequest) (*controlplanev1.ListUpstreamToolsResponse, error) {
	if req.GetUpstream() == "" {
		return nil, status.Error(codes.InvalidArgument, "name the upstream (an entry under upstreams: in the catalog)")
	}
	if s.ups == nil {
		return nil, status.Error(codes.FailedPrecondition, "this control plane has no upstream MCP channel")
	}
	resp, err := s.ups.ListUpstreamTools(ctx, req.GetUpstream())
	switch {
	case errors.Is(err, mcpchannel.ErrUnknownUpstream):
		return nil, status.Error(codes.NotFound, err.Error())
	case err != nil:
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return resp, nil
}
