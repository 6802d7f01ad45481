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
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/internal/errinfo"
	"github.com/latchhq/latch/internal/loopback"
	"github.com/latchhq/latch/internal/replicas"
	"github.com/latchhq/latch/internal/shellword"
	"github.com/latchhq/latch/internal/tlsfiles"
	"github.com/latchhq/latch/internal/tracing"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// defaultDataDir is where `latch dev` keeps its data when --data is not given.
const defaultDataDir = ".latch-dev"

// target is how an admin command finds a running control plane: its unix
// socket (the default, from --data), or TCP with mutual TLS for an operator
// on another host. With several replicas (--addr repeated or a comma list)
// every call goes to the active one (internal/replicas).
type target struct {
	data    string
	addrs   addrList
	tlsCA   string
	tlsCert string
	tlsKey  string
}

// addrList is --addr: repeatable, each value a comma list; LATCH_ADDR is
// its default until the flag is given.
type addrList struct {
	values []string
	set    bool
}

func (l *addrList) String() string { return strings.Join(l.values, ",") }
func (l *addrList) Set(v string) error {
	if !l.set {
		l.values, l.set = nil, true
	}
	l.values = append(l.values, v)
	return nil
}

func (t *target) flags(fs *flag.FlagSet, env *Env) {
	fs.StringVar(&t.data, "data", defaultDataDir, "data dir of the running control plane (its socket is DATA/control.sock)")
	if v := env.Getenv("LATCH_ADDR"); v != "" {
		t.addrs.values = []string{v}
	}
	fs.Var(&t.addrs, "addr", "address of the control plane API: unix:///path.sock or tcp://host:port; several replicas as a comma list or by repeating the flag, calls go to the active one (default: the socket in --data; env LATCH_ADDR)")
	fs.StringVar(&t.tlsCA, "tls-ca", env.Getenv("LATCH_TLS_CA"), "with --addr tcp://: the CA bundle that signed the control plane's certificate (env LATCH_TLS_CA)")
	fs.StringVar(&t.tlsCert, "tls-cert", env.Getenv("LATCH_TLS_CERT"), "with --addr tcp://: your operator client certificate (env LATCH_TLS_CERT)")
	fs.StringVar(&t.tlsKey, "tls-key", env.Getenv("LATCH_TLS_KEY"), "with --addr tcp://: the key of --tls-cert (env LATCH_TLS_KEY)")
}

// operatorArgs is what an operator adds to a latch command to reach the
// control plane whose data dir is data: "--data DIR" (shell-quoted) unless
// DIR is the admin commands' default. The control plane appends it to the
// operator commands it logs and the front shows, so they work when pasted.
func operatorArgs(data string) string {
	if data == "" || data == defaultDataDir {
		return ""
	}
	return "--data " + shellword.Quote(data)
}

// list is the addresses to call: --addr's, or the socket in --data.
func (t *target) list() []string {
	if l := replicas.Split(t.addrs.values); len(l) > 0 {
		return l
	}
	return []string{"unix://" + datadir.Socket(t.data)}
}

func (t *target) remote() bool {
	for _, a := range t.list() {
		if !strings.HasPrefix(a, "unix://") {
			return true
		}
	}
	return false
}

// where names the control plane for messages.
func (t *target) where() string {
	l := t.list()
	for i, a := range l {
		l[i] = strings.TrimPrefix(a, "unix://")
	}
	return strings.Join(l, ", ")
}

// open makes a client connection over every address (lazy: nothing is
// dialed yet). A single socket must exist.
func (t *target) open() (*replicas.Conn, error) {
	list := t.list()
	for _, a := range list {
		if err := t.check(a); err != nil {
			return nil, err
		}
	}
	if len(list) == 1 && strings.HasPrefix(list[0], "unix://") {
		if sock := strings.TrimPrefix(list[0], "unix://"); !exists(sock) {
			return nil, fmt.Errorf("no control plane runs at %s (no socket): start `latch dev` or `latch serve`, or pass --data DIR / --addr unix:///path of a running one", sock)
		}
	}
	conn, err := replicas.New(replicas.Config{Addrs: list, Dial: t.dialOne})
	if err != nil {
		return nil, err
	}
	return conn, nil
}

// check validates one --addr value.
func (t *target) check(a string) error {
	switch {
	case strings.HasPrefix(a, "unix://"):
		return nil
	case strings.HasPrefix(a, "tcp://"):
		if _, _, err := net.SplitHostPort(strings.TrimPrefix(a, "tcp://")); err != nil {
			return usagef("--addr %q: want tcp://host:port", a)
		}
		_, err := t.tlsCreds(strings.TrimPrefix(a, "tcp://"))
		return err
	}
	return usagef("--addr %q: want unix:///path.sock or tcp://host:port", a)
}

// dialOne connects to one address: unix:///path, tcp://host:port, or the
// host:port an active replica advertises (a standby names it).
func (t *target) dialOne(a string) (*grpc.ClientConn, error) {
	if sock, ok := strings.CutPrefix(a, "unix://"); ok {
		return dialSocket(sock)
	}
	hostport := strings.TrimPrefix(a, "tcp://")
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		return nil, fmt.Errorf("%q is not host:port", a)
	}
	creds, err := t.tlsCreds(hostport)
	if err != nil {
		return nil, err
	}
	return grpc.NewClient("dns:///"+hostport, append(replicas.DialOptions(), grpc.WithTransportCredentials(creds),
		grpc.WithChainUnaryInterceptor(explainUnary), grpc.WithChainStreamInterceptor(explainStream))...)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// tlsCreds are the client credentials for a TCP control plane: TLS 1.3
// with --tls-ca, a client certificate with --tls-cert/--tls-key;
// plaintext only to a loopback address without --tls-ca.
func (t *target) tlsCreds(hostport string) (credentials.TransportCredentials, error) {
	if (t.tlsCert == "") != (t.tlsKey == "") {
		return nil, usagef("--tls-cert and --tls-key go together (or LATCH_TLS_CERT and LATCH_TLS_KEY)")
	}
	if t.tlsCA == "" {
		if t.tlsCert != "" || !loopback.HostPort(hostport) {
			return nil, usagef("--addr tcp://%s needs --tls-ca (the CA of the control plane's certificate), and --tls-cert/--tls-key for operator commands", hostport)
		}
		return insecure.NewCredentials(), nil
	}
	cfg, err := tlsfiles.Client(t.tlsCA, t.tlsCert, t.tlsKey, nil)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca/--tls-cert/--tls-key: %w", err)
	}
	return credentials.NewTLS(cfg), nil
}

// connect opens a connection and checks that the control plane answers.
func (t *target) connect(ctx context.Context) (*replicas.Conn, error) {
	conn, err := t.open()
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(pctx, &healthpb.HealthCheckRequest{}); err != nil && isUnavailable(err) {
		conn.Close()
		if t.remote() {
			return nil, fmt.Errorf("no control plane answers at %s, or it refused the TLS handshake (check --tls-ca, and that --tls-cert/--tls-key are a client certificate signed by its --tls-client-ca; its log says why): %v", t.where(), status.Convert(err).Message())
		}
		return nil, fmt.Errorf("no control plane answers at %s (a stale socket?): start `latch dev` or `latch serve`", t.where())
	}
	return conn, nil
}

// dial connects to the running control plane and checks that it answers.
func (t *target) dial(ctx context.Context) (controlplanev1.ControlPlaneClient, func(), error) {
	conn, err := t.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	return controlplanev1.NewControlPlaneClient(conn), func() { conn.Close() }, nil
}

func isUnavailable(err error) bool {
	c := status.Code(err)
	return c == codes.Unavailable || c == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded)
}

// adminCommand splits an admin command's subcommand from its arguments and
// makes its flag set with the flags that find the running control plane.
// usage lists the subcommands ("list | show ID"); -h prints it.
func adminCommand(env *Env, cmd, usage string, args []string) (sub string, rest []string, fs *flag.FlagSet, t *target, err error) {
	sub, rest, err = splitSubcommand(env, cmd, usage, args)
	if err != nil {
		return "", nil, nil, nil, err
	}
	t = &target{}
	fs = newFlagSet(env, cmd+" "+sub, subcommandSynopsis(cmd, sub, usage))
	t.flags(fs, env)
	return sub, rest, fs, t, nil
}

// dialSocket is a gRPC client of the control plane on its unix socket.
func dialSocket(sock string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///latch-control-plane",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(tracing.UnaryClient(), explainUnary), grpc.WithChainStreamInterceptor(tracing.StreamClient(), explainStream),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}))
}

func explainUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return explainDenied(invoker(ctx, method, req, reply, cc, opts...))
}

func explainStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	return s, explainDenied(err)
}

// explainDenied rewrites the control plane's authorization refusals into
// what the operator should do; other errors pass unchanged.
func explainDenied(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.PermissionDenied {
		return err
	}
	reason, md, ok := errinfo.Of(err)
	if !ok || reason != controlplanev1.ErrorReason_ERROR_REASON_ACCESS_DENIED {
		return err
	}
	var hint string
	switch authz.Class(md["class"]) {
	case authz.ClassLocal:
		hint = "it is allowed only on the control plane's unix socket: run the command on the control plane's host, as its uid, root or an --operator-uid"
	case "":
		hint = "the control plane has no authorization entry for it (is this latch newer than the control plane?)"
	default:
		hint = "operator commands need an operator certificate (--tls-cert/--tls-key of an identity `latch serve` lists with --operator-identity) or the unix socket as the control plane's uid, root or an --operator-uid"
	}
	return status.Errorf(codes.PermissionDenied, "the control plane refused %s for %s %s; %s", md["rpc"], md["role"], md["identity"], hint)
}
