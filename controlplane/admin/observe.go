package admin

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/observation"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

func (s *Service) ObserveReport(_ context.Context, req *controlplanev1.ObserveReportRequest) (*controlplanev1.ObserveReportResponse, error) {
	if s.st == nil {
		return nil, status.Error(codes.FailedPrecondition, "this control plane serves no observe report (no store)")
	}
	opt := observation.Options{MaxPairs: int(req.GetMaxPairs()), Now: time.Now()}
	if req.GetSince() != nil {
		if err := req.GetSince().CheckValid(); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "since: %v", err)
		}
		opt.Since = req.GetSince().AsTime()
	}
	resp, err := observation.Build(s.st, s.catalog.Current().Catalog, opt)
	switch {
	case errors.Is(err, observation.ErrBadOptions):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case err != nil:
		s.log.Error("observe report failed", "error", err)
		return nil, status.Error(codes.Unavailable, "the observe report could not be read from the store; see the control plane's log")
	}
	return resp, nil
}
