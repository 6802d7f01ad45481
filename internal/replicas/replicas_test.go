package replicas

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// replica is a fake control plane replica on a loopback port: a standby
// answers NotActive naming active; an active answers, or fails with fail.
type replica struct {
	controlplanev1.UnimplementedControlPlaneServer
	addr string
	srv  *grpc.Server

	mu      sync.Mutex
	standby bool
	active  string // the address a standby names
	fail    error  // an active's answer to every call, when set
	// watchCut: Watch sends one message, then fails Unavailable.
	watchCut bool
	calls    atomic.Int64
}

func startReplica(t *testing.T) *replica {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{addr: lis.Addr().String(), srv: grpc.NewServer()}
	controlplanev1.RegisterControlPlaneServer(r.srv, r)
	go r.srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(r.srv.Stop)
	return r
}

func (r *replica) set(standby bool, active string, fail error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.standby, r.active, r.fail = standby, active, fail
}

func (r *replica) answer() error {
	r.calls.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.standby {
		return NotActive(r.active, "other/1", 3)
	}
	return r.fail
}

func (r *replica) Submit(context.Context, *controlplanev1.SubmitRequest) (*controlplanev1.SubmitResponse, error) {
	if err := r.answer(); err != nil {
		return nil, err
	}
	return &controlplanev1.SubmitResponse{Execution: &recordv1.Execution{Id: "act_" + r.addr}}, nil
}

func (r *replica) Approve(context.Context, *controlplanev1.ApproveRequest) (*controlplanev1.ApproveResponse, error) {
	if err := r.answer(); err != nil {
		return nil, err
	}
	return &controlplanev1.ApproveResponse{}, nil
}

func (r *replica) Watch(req *controlplanev1.WatchRequest, s grpc.ServerStreamingServer[controlplanev1.WatchResponse]) error {
	if err := r.answer(); err != nil {
		return err
	}
	if err := s.Send(&controlplanev1.WatchResponse{Execution: &recordv1.Execution{Id: req.GetExecutionId() + "@" + r.addr}}); err != nil {
		return err
	}
	r.mu.Lock()
	cut := r.watchCut
	r.mu.Unlock()
	if cut {
		return status.Error(codes.Unavailable, "replica going away")
	}
	return nil
}

func dialer(t *testing.T) func(string) (*grpc.ClientConn, error) {
	return func(addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient(canonical(addr), append(DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	}
}

func newConn(t *testing.T, wait time.Duration, addrs ...string) *Conn {
	t.Helper()
	c, err := New(Config{Addrs: addrs, Dial: dialer(t), FailoverWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := lis.Addr().String()
	lis.Close()
	return a
}

func submit(ctx context.Context, c *Conn) (string, error) {
	r, err := controlplanev1.NewControlPlaneClient(c).Submit(ctx, &controlplanev1.SubmitRequest{Tool: "t"})
	return r.GetExecution().GetId(), err
}

func TestSubmitMovesToTheActive(t *testing.T) {
	ctx := t.Context()
	a, b := startReplica(t), startReplica(t)
	tests := []struct {
		name  string
		setup func() []string
		want  string // replica that answers
	}{
		{"standby names the active", func() []string { a.set(true, b.addr, nil); b.set(false, "", nil); return []string{a.addr, b.addr} }, b.addr},
		{"standby names no active: next address", func() []string { a.set(true, "", nil); b.set(false, "", nil); return []string{a.addr, b.addr} }, b.addr},
		{"first address dead", func() []string { b.set(false, "", nil); return []string{deadAddr(t), b.addr} }, b.addr},
		{"active cut a repeat-safe call", func() []string {
			a.set(false, "", status.Error(codes.Unavailable, "shutting down"))
			b.set(false, "", nil)
			return []string{a.addr, b.addr}
		}, b.addr},
		{"one listed standby names an unlisted active", func() []string { a.set(true, b.addr, nil); b.set(false, "", nil); return []string{a.addr} }, b.addr},
		{"comma list in one value", func() []string {
			a.set(true, b.addr, nil)
			b.set(false, "", nil)
			return []string{a.addr + " , " + b.addr}
		}, b.addr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newConn(t, 5*time.Second, tt.setup()...)
			id, err := submit(ctx, c)
			if err != nil {
				t.Fatalf("Submit = %v, want the answer of %s", err, tt.want)
			}
			if diff := cmp.Diff("act_"+tt.want, id); diff != "" {
				t.Errorf("Submit answered by (-want +got):\n%s", diff)
			}
			if got := canonical(c.Current()); got != tt.want {
				t.Errorf("Current() = %s, want %s", got, tt.want)
			}
		})
	}
}

// A call that is not repeat-safe and reached an active that cut it is
// the caller's to decide: never sent to a second replica.
func TestCutCallNotRepeatSafeIsNotResent(t *testing.T) {
	a, b := startReplica(t), startReplica(t)
	a.set(false, "", status.Error(codes.Unavailable, "shutting down"))
	c := newConn(t, 5*time.Second, a.addr, b.addr)
	_, err := controlplanev1.NewControlPlaneClient(c).Approve(t.Context(), &controlplanev1.ApproveRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Approve = %v, want the active's Unavailable", err)
	}
	if n := b.calls.Load(); n != 0 {
		t.Errorf("the second replica got %d Approve calls, want 0", n)
	}
	// A standby's refusal did nothing: any call moves on.
	a.set(true, b.addr, nil)
	if _, err := controlplanev1.NewControlPlaneClient(c).Approve(t.Context(), &controlplanev1.ApproveRequest{}); err != nil {
		t.Fatalf("Approve via a standby = %v, want the active's answer", err)
	}
	if n := b.calls.Load(); n != 1 {
		t.Errorf("the active got %d Approve calls, want 1", n)
	}
}

func TestSingleDeadAddressFailsAtOnce(t *testing.T) {
	c := newConn(t, time.Minute, deadAddr(t))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := submit(ctx, c); status.Code(err) != codes.Unavailable || ctx.Err() != nil {
		t.Fatalf("Submit to one dead address = %v (ctx %v), want Unavailable before the deadline", err, ctx.Err())
	}
}

func TestNoActiveNamesTheAddresses(t *testing.T) {
	a, b := startReplica(t), startReplica(t)
	a.set(true, "", nil)
	b.set(true, "", nil)
	c := newConn(t, 300*time.Millisecond, a.addr, b.addr)
	_, err := submit(t.Context(), c)
	if _, notActive := ActiveOf(err); status.Code(err) != codes.Unavailable || notActive {
		t.Fatalf("Submit with only standbys = %v, want a plain Unavailable summing up", err)
	}
	for _, want := range []string{a.addr, b.addr, "no active control plane replica"} {
		if !strings.Contains(status.Convert(err).Message(), want) {
			t.Errorf("error %q does not name %q", status.Convert(err).Message(), want)
		}
	}
	if a.calls.Load() < 2 || b.calls.Load() < 2 {
		t.Errorf("calls a=%d b=%d, want each replica asked again while waiting", a.calls.Load(), b.calls.Load())
	}
}

// A takeover while a call waits: the call waits for the new active.
func TestCallWaitsThroughTakeover(t *testing.T) {
	a, b := startReplica(t), startReplica(t)
	a.set(true, "", nil)
	b.set(true, "", nil)
	go func() {
		time.Sleep(300 * time.Millisecond)
		b.set(false, "", nil)
		a.set(true, b.addr, nil)
	}()
	c := newConn(t, 10*time.Second, a.addr, b.addr)
	id, err := submit(t.Context(), c)
	if err != nil || id != "act_"+b.addr {
		t.Fatalf("Submit = %q, %v; want the new active's answer", id, err)
	}
}

func TestWatchResumesOnTheNewActive(t *testing.T) {
	a, b := startReplica(t), startReplica(t)
	a.set(false, "", nil)
	a.mu.Lock()
	a.watchCut = true
	a.mu.Unlock()
	b.set(false, "", nil)
	c := newConn(t, 5*time.Second, a.addr, b.addr)
	s, err := controlplanev1.NewControlPlaneClient(c).Watch(t.Context(), &controlplanev1.WatchRequest{ExecutionId: "act_1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		m, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Watch Recv = %v after %q, want the stream to go on on the new active", err, got)
		}
		got = append(got, m.GetExecution().GetId())
	}
	want := []string{"act_1@" + a.addr, "act_1@" + b.addr}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Watch messages (-want +got):\n%s", diff)
	}
}

func TestWaitForReadyWaitsAcrossReplicas(t *testing.T) {
	a := startReplica(t)
	a.set(true, "", nil)
	go func() {
		time.Sleep(200 * time.Millisecond)
		a.set(false, "", nil)
	}()
	// A FailoverWait far shorter than the wait: WaitForReady waits as long
	// as the ctx.
	c := newConn(t, 10*time.Millisecond, a.addr, deadAddr(t))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := controlplanev1.NewControlPlaneClient(c).Submit(ctx, &controlplanev1.SubmitRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("Submit with WaitForReady = %v, want the answer once the replica is active", err)
	}
}

func TestSplit(t *testing.T) {
	got := Split([]string{"a, b", "", "c,a", " "})
	if diff := cmp.Diff([]string{"a", "b", "c"}, got); diff != "" {
		t.Errorf("Split (-want +got):\n%s", diff)
	}
}

func TestActiveOf(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		active     string
		notActive  bool
		msgContain string
	}{
		{"names the active", NotActive("10.0.0.1:7400", "r1/ab", 4), "10.0.0.1:7400", true, "10.0.0.1:7400"},
		{"takeover", NotActive("", "", 0), "", true, "takeover"},
		{"no address advertised", NotActive("", "r1/ab", 4), "", true, "--advertise-addr"},
		{"plain unavailable", status.Error(codes.Unavailable, "x"), "", false, "x"},
		{"other code", status.Error(codes.Internal, "x"), "", false, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			active, notActive := ActiveOf(tt.err)
			if active != tt.active || notActive != tt.notActive {
				t.Errorf("ActiveOf(%v) = %q, %v; want %q, %v", tt.err, active, notActive, tt.active, tt.notActive)
			}
			if !strings.Contains(status.Convert(tt.err).Message(), tt.msgContain) {
				t.Errorf("message %q does not contain %q", status.Convert(tt.err).Message(), tt.msgContain)
			}
		})
	}
}
