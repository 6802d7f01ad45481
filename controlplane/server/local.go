package server

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/internal/tracing"
)

// The in-process connection: a client in this process (latch dev's MCP
// front) calls the API without gRPC's transport. A call through the unix
// socket costs both sides an HTTP/2 exchange and a protobuf encoding each
// way, about a sixth of a Submit's CPU at 32 callers (BenchmarkSubmitConn,
// docs/contributing/benchmarks.md); here the handler runs behind the
// socket's own interceptor chain, on one of streamWorkers long-lived
// goroutines as the socket's calls do (their stacks have grown to what a
// Submit needs; the MCP front calls from a new goroutine per request, whose
// stack grew from 8 KiB on every call), or, when all are busy, on the
// caller's.

// localStopWait bounds how long Run's shutdown waits for in-process calls
// in flight, as it does for the listeners' GracefulStop.
const localStopWait = 5 * time.Second

// localConn is the grpc.ClientConnInterface LocalConn returns.
type localConn struct {
	methods  localMethods
	unary    grpc.UnaryServerInterceptor // the socket listener's chain
	client   grpc.UnaryClientInterceptor // what a socket client sends besides the message (trace context)
	peer     *peer.Peer
	fallback grpc.ClientConnInterface

	mu       sync.Mutex
	serving  bool
	stopped  bool
	ready    chan struct{} // closed when serving starts
	inFlight sync.WaitGroup

	jobs chan func()   // to the workers, while serving
	quit chan struct{} // closed by stop: the workers end
}

// localMethods maps a full method name to its handler: the
// grpc.ServiceRegistrar registerOn fills, as it fills a grpc.Server.
type localMethods map[string]grpc.MethodHandler

func (m localMethods) RegisterService(d *grpc.ServiceDesc, _ any) {
	for _, md := range d.Methods {
		m["/"+d.ServiceName+"/"+md.MethodName] = md.Handler
	}
}

// LocalConn is a connection to this control plane's API for a client in
// the same process. Its unary calls run the API's handler directly, behind
// the interceptor chain the unix socket runs (the standby gate, panic
// recovery, trace context, authorization with its refusal journal, the
// credential stamp, the request log), the caller identified as a socket
// caller of this process's uid would be. Messages are copied, not encoded:
// neither side sees the other's later changes, as over a wire. Two things a
// socket call does are not done: gRPC's message size limits, and headers
// and trailers (no handler sets any). grpc.WaitForReady waits for Run to
// serve; without it a call before then, or after Run stops, is
// Unavailable, as on a socket nobody serves. Streaming calls, and methods
// outside the API's services, go to fallback (a client of the socket).
// Call it after New; the connection serves while Run does.
func (s *Server) LocalConn(fallback grpc.ClientConnInterface) (grpc.ClientConnInterface, error) {
	if fallback == nil {
		return nil, errors.New("server: LocalConn needs a connection for streaming calls")
	}
	return &localClient{localConn: s.local, fallback: fallback}, nil
}

// newLocalConn is the in-process connection of a server whose socket
// listener runs the interceptors unary (buildListeners).
func (s *Server) newLocalConn(unary []grpc.UnaryServerInterceptor) *localConn {
	l := &localConn{
		methods: localMethods{},
		unary:   chainUnary(unary),
		client:  tracing.UnaryClient(),
		peer: &peer.Peer{
			Addr: &net.UnixAddr{Name: s.cfg.Socket, Net: "unix"},
			AuthInfo: authz.PeerInfo{
				CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity},
				UID:            uint32(os.Getuid()), GID: uint32(os.Getgid()), PID: int32(os.Getpid()), //nolint:gosec // the ids of this process fit
			},
		},
		ready: make(chan struct{}),
		jobs:  make(chan func()),
		quit:  make(chan struct{}),
	}
	s.services.registerOn(l.methods, s.Active, s.notActive)
	return l
}

// localClient is one caller's view of the in-process connection: its own
// fallback for streams.
type localClient struct {
	*localConn
	fallback grpc.ClientConnInterface
}

// Invoke implements grpc.ClientConnInterface.
func (c *localClient) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	h, ok := c.methods[method]
	if !ok {
		return c.fallback.Invoke(ctx, method, args, reply, opts...)
	}
	return c.client(ctx, method, args, reply, nil, func(ctx context.Context, method string, args, reply any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
		return c.call(ctx, h, method, args, reply, opts)
	}, opts...)
}

// NewStream implements grpc.ClientConnInterface: streams go over the
// fallback connection.
func (c *localClient) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.fallback.NewStream(ctx, desc, method, opts...)
}

func (c *localConn) call(ctx context.Context, h grpc.MethodHandler, method string, args, reply any, opts []grpc.CallOption) error {
	in, ok := args.(proto.Message)
	out, ok2 := reply.(proto.Message)
	if !ok || !ok2 {
		return status.Errorf(codes.Internal, "server: in-process call %s with %T and %T, want protobuf messages", method, args, reply)
	}
	if err := c.enter(ctx, waitForReady(opts)); err != nil {
		return err
	}
	defer c.inFlight.Done()
	// The handler's context: the caller's deadline and cancellation, ended
	// when the call returns (as a server stream's is), the metadata the
	// caller sent as incoming, none outgoing, and the socket peer.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if md, ok := metadata.FromOutgoingContext(sctx); ok {
		sctx = metadata.NewOutgoingContext(metadata.NewIncomingContext(sctx, md), nil)
	}
	sctx = grpc.NewContextWithServerTransportStream(peer.NewContext(sctx, c.peer), localStream{method: method})
	dec := func(m any) error {
		pm, ok := m.(proto.Message)
		if !ok || pm.ProtoReflect().Descriptor() != in.ProtoReflect().Descriptor() {
			return status.Errorf(codes.Internal, "server: in-process call %s sent %T for %T", method, in, m)
		}
		proto.Merge(pm, in)
		return nil
	}
	var resp any
	var err error
	c.run(func() { resp, err = h(nil, sctx, dec, c.unary) })
	if err != nil {
		return asStatus(err)
	}
	pr, ok := resp.(proto.Message)
	if !ok || pr.ProtoReflect().Descriptor() != out.ProtoReflect().Descriptor() {
		return status.Errorf(codes.Internal, "server: in-process call %s answered %T for %T", method, resp, reply)
	}
	proto.Reset(out)
	proto.Merge(out, pr)
	return nil
}

// run runs f on an idle worker and waits for it, or runs it here when
// every worker is busy (or they have ended).
func (c *localConn) run(f func()) {
	done := make(chan struct{})
	select {
	case c.jobs <- func() { f(); close(done) }:
		<-done
	default:
		f()
	}
}

// work is one worker: it runs jobs until stop.
func (c *localConn) work() {
	for {
		select {
		case job := <-c.jobs:
			job()
		case <-c.quit:
			return
		}
	}
}

// enter admits a call: once serving, or, with wait, when serving starts.
func (c *localConn) enter(ctx context.Context, wait bool) error {
	for {
		c.mu.Lock()
		switch {
		case c.stopped:
			c.mu.Unlock()
			return status.Error(codes.Unavailable, "the control plane has stopped")
		case c.serving:
			c.inFlight.Add(1)
			c.mu.Unlock()
			return nil
		case !wait:
			c.mu.Unlock()
			return status.Error(codes.Unavailable, "the control plane is not serving yet")
		}
		ready := c.ready
		c.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// serve admits calls (Run, as it starts its listeners).
func (c *localConn) serve() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.serving && !c.stopped {
		c.serving = true
		close(c.ready)
		for range streamWorkers {
			go c.work()
		}
	}
}

// stop refuses new calls and waits, at most localStopWait, for those in
// flight (Run, as it stops its listeners).
func (c *localConn) stop() {
	c.mu.Lock()
	if !c.stopped {
		close(c.quit)
	}
	c.stopped = true
	if !c.serving {
		close(c.ready) // waiters see stopped
		c.serving = true
	}
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.inFlight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(localStopWait):
	}
}

// waitForReady reports whether opts ask a call to wait for the server.
func waitForReady(opts []grpc.CallOption) bool {
	wait := false
	for _, o := range opts {
		if f, ok := o.(grpc.FailFastCallOption); ok {
			wait = !f.FailFast
		}
	}
	return wait
}

// asStatus is err as the caller of a socket call would see it: a status
// error as it is, a context's error as Canceled or DeadlineExceeded,
// anything else Unknown with its text.
func asStatus(err error) error {
	if s, ok := status.FromError(err); ok {
		return s.Err()
	}
	return status.FromContextError(err).Err()
}

// chainUnary is the interceptors in order around a handler, as
// grpc.ChainUnaryInterceptor makes them for a grpc.Server.
func chainUnary(ics []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		var next func(i int) grpc.UnaryHandler
		next = func(i int) grpc.UnaryHandler {
			if i == len(ics) {
				return h
			}
			return func(ctx context.Context, req any) (any, error) { return ics[i](ctx, req, info, next(i+1)) }
		}
		return next(0)(ctx, req)
	}
}

// localStream is the grpc.ServerTransportStream of an in-process call: it
// names the method (grpc.Method) and refuses headers and trailers.
type localStream struct{ method string }

var errLocalHeaders = errors.New("server: an in-process call carries no headers or trailers")

func (s localStream) Method() string               { return s.method }
func (s localStream) SetHeader(metadata.MD) error  { return errLocalHeaders }
func (s localStream) SendHeader(metadata.MD) error { return errLocalHeaders }
func (s localStream) SetTrailer(metadata.MD) error { return errLocalHeaders }
