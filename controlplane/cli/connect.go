package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/server"
	"github.com/latchhq/latch/internal/tracing"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// defaultDataDir is where `latch dev` keeps its data when --data is not given.
const defaultDataDir = ".latch-dev"

// target is how an admin command finds a running control plane.
type target struct {
	data string
	addr string
}

func (t *target) flags(fs *flag.FlagSet, env *Env) {
	fs.StringVar(&t.data, "data", defaultDataDir, "data dir of the running control plane (its socket is DATA/control.sock)")
	fs.StringVar(&t.addr, "addr", env.Getenv("LATCH_ADDR"), "address of the control plane API: unix:///path.sock (default: from --data; env LATCH_ADDR)")
}

func (t *target) socket() string {
	if strings.HasPrefix(t.addr, "unix://") {
		return strings.TrimPrefix(t.addr, "unix://")
	}
	return server.SocketPath(t.data)
}

// dial connects to the running control plane and checks that it answers.
func (t *target) dial(ctx context.Context) (controlplanev1.ControlPlaneClient, func(), error) {
	if t.addr != "" && !strings.HasPrefix(t.addr, "unix://") {
		return nil, nil, usagef("--addr %q: only unix:///path.sock addresses are supported by the admin commands", t.addr)
	}
	sock := t.socket()
	if _, err := os.Stat(sock); err != nil {
		return nil, nil, fmt.Errorf("no control plane runs at %s (no socket): start `latch dev` or `latch serve`, or pass --data DIR / --addr unix:///path of a running one", sock)
	}
	conn, err := dialSocket(sock)
	if err != nil {
		return nil, nil, err
	}
	c := controlplanev1.NewControlPlaneClient(conn)
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := c.List(pctx, &controlplanev1.ListRequest{Limit: 1}); err != nil && isUnavailable(err) {
		conn.Close()
		return nil, nil, fmt.Errorf("no control plane answers at %s (a stale socket?): start `latch dev` or `latch serve`", sock)
	}
	return c, func() { conn.Close() }, nil
}

func isUnavailable(err error) bool {
	c := status.Code(err)
	return c == codes.Unavailable || c == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded)
}

// adminCommand splits an admin command's subcommand from its arguments and
// makes its flag set with the flags that find the running control plane.
// usage is what to print when no subcommand is given.
func adminCommand(env *Env, cmd, usage string, args []string) (sub string, rest []string, fs *flag.FlagSet, t *target, err error) {
	if len(args) == 0 {
		return "", nil, nil, nil, usagef("%s needs a subcommand: %s", cmd, usage)
	}
	t = &target{}
	fs = flag.NewFlagSet(cmd+" "+args[0], flag.ContinueOnError)
	t.flags(fs, env)
	return args[0], args[1:], fs, t, nil
}

// dialSocket is a gRPC client of the control plane on its unix socket.
func dialSocket(sock string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///latch-control-plane",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(tracing.UnaryClient()), grpc.WithChainStreamInterceptor(tracing.StreamClient()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}))
}
