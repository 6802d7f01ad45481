package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/internal/cputime"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestLocalConnAnswersAsTheSocket: the in-process connection waits for Run
// as a socket client does (WaitForReady) and is Unavailable without it,
// answers what the socket answers (results, errors with their details),
// copies messages both ways, and is Unavailable once Run has stopped.
func TestLocalConnAnswersAsTheSocket(t *testing.T) {
	srv, conn, local := localAndSocket(t)
	lc, sc := controlplanev1.NewControlPlaneClient(local), controlplanev1.NewControlPlaneClient(conn)
	ctx := t.Context()

	if _, err := lc.ListTools(ctx, &controlplanev1.ListToolsRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("ListTools before Run = %v, want Unavailable", err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := lc.ListTools(ctx, &controlplanev1.ListToolsRequest{}, grpc.WaitForReady(true))
		waited <- err
	}()
	select {
	case err := <-waited:
		t.Fatalf("ListTools with WaitForReady before Run returned %v, want it to wait", err)
	case <-time.After(50 * time.Millisecond):
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(rctx) }()
	if err := <-waited; err != nil {
		t.Fatalf("ListTools with WaitForReady once Run serves: %v", err)
	}

	// The same calls, both ways. The socket caller and the in-process one
	// are the same operator: both may submit as alice.
	submit := func(c controlplanev1.ControlPlaneClient, version string) *controlplanev1.SubmitResponse {
		t.Helper()
		req := &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy", Arguments: []byte(`{"version":"` + version + `"}`), WaitMs: 10_000}
		r, err := c.Submit(ctx, req)
		if err != nil {
			t.Fatalf("Submit(%s): %v", version, err)
		}
		req.Tool = "changed after the call"
		return r
	}
	byLocal, bySocket := submit(lc, "1"), submit(sc, "2")
	for _, r := range []*controlplanev1.SubmitResponse{byLocal, bySocket} {
		if got := r.GetExecution().GetState(); got != recordv1.State_STATE_COMPLETED {
			t.Errorf("Submit answered %s in state %v, want completed", r.GetExecution().GetId(), got)
		}
	}
	for _, id := range []string{byLocal.GetExecution().GetId(), bySocket.GetExecution().GetId()} {
		l, lerr := lc.Get(ctx, &controlplanev1.GetRequest{ExecutionId: id})
		s, serr := sc.Get(ctx, &controlplanev1.GetRequest{ExecutionId: id})
		if lerr != nil || serr != nil || !proto.Equal(l, s) {
			t.Errorf("Get(%s) in process = %v, %v; over the socket = %v, %v; want the same answer", id, l, lerr, s, serr)
		}
	}
	_, lerr := lc.Get(ctx, &controlplanev1.GetRequest{ExecutionId: "act_unknown"})
	_, serr := sc.Get(ctx, &controlplanev1.GetRequest{ExecutionId: "act_unknown"})
	if ls, ss := status.Convert(lerr), status.Convert(serr); ls.Code() != codes.NotFound || !proto.Equal(ls.Proto(), ss.Proto()) {
		t.Errorf("Get(unknown) in process = %v (details %v); over the socket = %v (details %v); want the same NotFound", lerr, ls.Details(), serr, ss.Details())
	}
	// An answer is the caller's own: changing it changes no later one.
	first, err := lc.ListTools(ctx, &controlplanev1.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := proto.Clone(first)
	if len(first.GetTools()) == 0 || len(first.GetTools()[0].GetInputSchema()) == 0 {
		t.Fatalf("ListTools = %v, want the deploy tool with its schema", first)
	}
	first.CatalogVersion = "changed by the caller"
	first.Tools[0].Description = "changed by the caller"
	first.Tools[0].InputSchema[0] = 'X'
	if again, err := lc.ListTools(ctx, &controlplanev1.ListToolsRequest{}); err != nil || !proto.Equal(again, want) {
		t.Errorf("ListTools after the caller changed an earlier answer = %v, %v; want the catalog as before", again, err)
	}

	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := lc.ListTools(ctx, &controlplanev1.ListToolsRequest{}, grpc.WaitForReady(true)); status.Code(err) != codes.Unavailable {
		t.Errorf("ListTools after Run stopped = %v, want Unavailable", err)
	}
}

// localAndSocket is a control plane on a fresh data dir (not running yet)
// with a client of its socket and its in-process connection; the client is
// closed at the end of the test.
func localAndSocket(tb testing.TB) (*Server, *grpc.ClientConn, grpc.ClientConnInterface) {
	tb.Helper()
	cfg := stateConfig(tb, tb.TempDir(), 0)
	cfg.Socket = filepath.Join(shortDir(tb), "c.sock")
	srv, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := grpc.NewClient("unix://"+cfg.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	local, err := srv.LocalConn(conn)
	if err != nil {
		tb.Fatal(err)
	}
	return srv, conn, local
}

// TestChainUnaryOrder: the in-process chain runs the interceptors in the
// order grpc.ChainUnaryInterceptor does, each around the next.
func TestChainUnaryOrder(t *testing.T) {
	var trail []string
	ic := func(name string) grpc.UnaryServerInterceptor {
		return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			trail = append(trail, name+" in")
			resp, err := h(ctx, req)
			trail = append(trail, name+" out")
			return resp, err
		}
	}
	chain := chainUnary([]grpc.UnaryServerInterceptor{ic("a"), ic("b")})
	resp, err := chain(context.Background(), "req", &grpc.UnaryServerInfo{}, func(_ context.Context, req any) (any, error) {
		trail = append(trail, "handler "+req.(string))
		return "resp", nil
	})
	want := "a in, b in, handler req, b out, a out"
	if got := strings.Join(trail, ", "); resp != "resp" || err != nil || got != want {
		t.Errorf("chain = %v, %v with trail %q; want resp with trail %q", resp, err, got, want)
	}
}

// BenchmarkSubmitConn: one Submit (journaled, dispatched to a target that
// answers at once, result stored, both commits synced) through the unix
// socket and through the in-process connection, 32 callers at once;
// cpu-ns/op is this process's CPU per call (server and client alike).
func BenchmarkSubmitConn(b *testing.B) {
	srv, conn, local := localAndSocket(b)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		stop()
		<-done
	}()
	var seq atomic.Int64
	for _, c := range []struct {
		name string
		conn grpc.ClientConnInterface
		// fresh: each call from a goroutine of its own, as the MCP front
		// makes them (the go-sdk runs each request on a new goroutine).
		fresh bool
		// receipt: ask for the receipt, as the MCP front does by default.
		receipt bool
	}{{"socket", conn, false, false}, {"local", local, false, false}, {"local-fresh", local, true, false}, {"local-fresh-receipt", local, true, true}} {
		cp := controlplanev1.NewControlPlaneClient(c.conn)
		submit := func() error {
			v := strconv.FormatInt(seq.Add(1), 10)
			r, err := cp.Submit(ctx, &controlplanev1.SubmitRequest{Actor: "alice", Tool: "deploy", Arguments: []byte(`{"version":"` + v + `"}`), WaitMs: 10_000, Receipt: c.receipt}, grpc.WaitForReady(true))
			switch {
			case err != nil:
			case r.GetExecution().GetState() != recordv1.State_STATE_COMPLETED:
				err = fmt.Errorf("state %v, want completed", r.GetExecution().GetState())
			case c.receipt && r.GetReceipt() == nil:
				err = errors.New("no receipt in the answer")
			}
			return err
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetParallelism(16) // 32 callers on 2 cores
			start := cputime.Self()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var err error
					if c.fresh {
						done := make(chan struct{})
						go func() { err = submit(); close(done) }()
						<-done
					} else {
						err = submit()
					}
					if err != nil {
						b.Errorf("Submit: %v", err)
						return
					}
				}
			})
			b.ReportMetric(float64((cputime.Self()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// TestLocalWorkersOverflow: calls beyond the workers run on their callers'
// goroutines, so a burst wider than streamWorkers neither waits for a
// worker nor deadlocks, and calls after stop still run.
func TestLocalWorkersOverflow(t *testing.T) {
	c := &localConn{jobs: make(chan func()), quit: make(chan struct{}), ready: make(chan struct{})}
	c.serve()
	n := 2 * streamWorkers
	var entered sync.WaitGroup
	entered.Add(n)
	release := make(chan struct{})
	var ran atomic.Int64
	var callers sync.WaitGroup
	for range n {
		callers.Go(func() {
			c.run(func() {
				entered.Done()
				<-release // every call is in flight at once
				ran.Add(1)
			})
		})
	}
	entered.Wait()
	close(release)
	callers.Wait()
	if ran.Load() != int64(n) {
		t.Fatalf("%d of %d calls ran", ran.Load(), n)
	}
	c.stop()
	done := false
	c.run(func() { done = true })
	if !done {
		t.Error("a call after stop did not run")
	}
}
