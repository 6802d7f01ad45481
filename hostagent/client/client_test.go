package client

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/latchhq/latch/hostagent"
)

func TestDialConnUsesTheGivenDialer(t *testing.T) {
	lis := bufconn.Listen(1 << 16)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := 0
	cl, closer, err := DialConn(ctx, func(ctx context.Context) (net.Conn, error) {
		calls++
		return lis.DialContext(ctx)
	})
	if err != nil {
		t.Fatalf("DialConn = %v", err)
	}
	defer closer.Close()
	if cl == nil || calls == 0 {
		t.Errorf("DialConn returned client %v after %d dials, want a client after at least one", cl, calls)
	}
}

func TestDialUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tests := []struct {
		name string
		dial func() error
	}{
		{"missing socket", func() error {
			_, _, err := Dial(ctx, "/nonexistent/latch-hostagent.sock")
			return err
		}},
		{"failing dialer", func() error {
			_, _, err := DialConn(ctx, func(context.Context) (net.Conn, error) { return nil, errors.New("ssh: channel refused") })
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.dial(); !errors.Is(err, ErrUnreachable) {
				t.Errorf("dial = %v, want ErrUnreachable", err)
			}
		})
	}
}

func TestReason(t *testing.T) {
	st, err := status.New(codes.FailedPrecondition, "done").WithDetails(&errdetails.ErrorInfo{
		Reason: hostagent.ReasonAlreadyCompleted, Domain: hostagent.ErrorDomain,
	})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := status.New(codes.FailedPrecondition, "x").WithDetails(&errdetails.ErrorInfo{Reason: "OTHER", Domain: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"plain", errors.New("x"), ""},
		{"status without details", status.Error(codes.NotFound, "x"), ""},
		{"ours", st.Err(), hostagent.ReasonAlreadyCompleted},
		{"other domain", foreign.Err(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Reason(tt.err); got != tt.want {
				t.Errorf("Reason(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
