package agent

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/hostagent"
	"github.com/latchhq/latch/hostagent/markers"
)

// toStatus maps an error to the gRPC status the service returns. Internal
// causes are logged here and never sent to the client.
func (a *Agent) toStatus(err error) error {
	var se *stateError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		st := status.New(codes.FailedPrecondition, se.Error())
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{
			Reason:   se.reason,
			Domain:   hostagent.ErrorDomain,
			Metadata: map[string]string{"execution_id": se.marker.GetExecutionId(), "state": se.marker.GetState().String()},
		}); derr == nil {
			st = d
		}
		return st.Err()
	case errors.Is(err, errInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, markers.ErrNotFound):
		return status.Error(codes.NotFound, "no marker for this execution id")
	case errors.Is(err, markers.ErrContention), errors.Is(err, markers.ErrClosed):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	default:
		a.log.Error("request failed", "error", err)
		return status.Error(codes.Internal, "internal error; see the host agent's log")
	}
}

// recoverInterceptor turns a panic in a handler into Internal and logs
// every call at debug level.
func (a *Agent) recoverInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("handler panicked", "method", info.FullMethod, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = status.Error(codes.Internal, "internal error; see the host agent's log")
		}
	}()
	resp, err = handler(ctx, req)
	if a.log.IsDebug() {
		uid, _ := PeerUID(ctx)
		a.log.Debug("rpc", "method", info.FullMethod, "peer_uid", uid, "code", status.Code(err).String())
	}
	return resp, err
}
