// Package client dials a host agent's HostAgent gRPC service, over its local
// unix socket or any stream the caller opens (the control plane passes an SSH
// direct-streamlocal dialer). It must stay free of control-plane imports: the
// control plane imports it, not the other way round.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/hostagent"
	"github.com/latchhq/latch/internal/tracing"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// ErrUnreachable means no connection to the agent could be established
// (socket missing, connection refused, or this uid not allowed by the agent).
var ErrUnreachable = errors.New("client: host agent not reachable")

// Dial connects to the agent's unix socket and waits until the connection is
// ready or ctx is done. The io.Closer closes the connection.
func Dial(ctx context.Context, socketPath string) (hostagentv1.HostAgentClient, io.Closer, error) {
	return DialConn(ctx, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socketPath)
	})
}

// DialConn connects through dial (called for each new transport) and waits
// until the connection is ready or ctx is done. Failures wrap ErrUnreachable.
func DialConn(ctx context.Context, dial func(ctx context.Context) (net.Conn, error)) (hostagentv1.HostAgentClient, io.Closer, error) {
	var (
		mu      sync.Mutex
		lastErr error
	)
	conn, err := grpc.NewClient("passthrough:///latch-hostagent",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(tracing.UnaryClient()), // the dispatch span's traceparent reaches the command
		grpc.WithChainStreamInterceptor(tracing.StreamClient()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			c, err := dial(ctx)
			if err != nil {
				mu.Lock()
				lastErr = err
				mu.Unlock()
			}
			return c, err
		}),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	conn.Connect()
	for {
		s := conn.GetState()
		if s == connectivity.Ready {
			return hostagentv1.NewHostAgentClient(conn), conn, nil
		}
		if s == connectivity.TransientFailure || s == connectivity.Shutdown {
			_ = conn.Close()
			mu.Lock()
			last := lastErr
			mu.Unlock()
			if last != nil {
				return nil, nil, fmt.Errorf("%w: %v", ErrUnreachable, last)
			}
			return nil, nil, fmt.Errorf("%w: connection refused during handshake (is this uid allowed? see --allow-uid)", ErrUnreachable)
		}
		if !conn.WaitForStateChange(ctx, s) {
			_ = conn.Close()
			return nil, nil, fmt.Errorf("%w: %v", ErrUnreachable, ctx.Err())
		}
	}
}

// Reason returns the errdetails.ErrorInfo reason of a HostAgent refusal
// (hostagent.Reason*), or "" when err carries none.
func Reason(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == hostagent.ErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}
