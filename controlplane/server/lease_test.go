package server

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/authz"
	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/internal/replicas"
	"github.com/latchhq/latch/internal/testing/pgtest"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestLeaseLostStopsTheActive: while a control plane on PostgreSQL is
// active, another replica takes its lease (as after a partition that
// outlasted it). The old active's next commit is fenced, and Run stops
// with ErrLeaseLost at its next renewal instead of serving on.
func TestLeaseLostStopsTheActive(t *testing.T) {
	url := pgtest.URL(t)
	srv, err := New(Config{DataDir: t.TempDir(), CatalogSource: catalog.Bytes("c.yaml", []byte(catalogYAML)), Store: url, Replica: "a", LeaseTTL: 1500 * time.Millisecond, KeySealer: testKeySealer(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	waitActive(t, srv, done)
	put := func() error {
		return srv.Store.Update(ctx, func(tx *store.Tx) error {
			_, err := tx.PutResult("probe", &recordv1.Result{Status: 200})
			return err
		})
	}
	if err := put(); err != nil {
		t.Fatalf("the active's commit: %v", err)
	}

	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	// Another replica takes the lease, in one statement: the active
	// renews every ttl/8 and would extend a lease merely expired here.
	if _, err := c.Exec(ctx, "UPDATE latch_lease SET holder = 'b/test', epoch = epoch + 1, expires_at = now() + interval '1 minute'"); err != nil {
		t.Fatal(err)
	}
	if err := put(); !errors.Is(err, backend.ErrFenced) {
		t.Errorf("the stale active's commit = %v, want ErrFenced", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Run = %v, want ErrLeaseLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stale active still runs 30s after losing its lease")
	}
}

type countingChannel struct{ sent int }

func (c *countingChannel) Dispatch(context.Context, engine.Call) engine.Attempt {
	c.sent++
	return engine.Attempt{Class: engine.Observed}
}
func (c *countingChannel) Identity(_ *tools.Tool, t *tools.Target) engine.Identity {
	return engine.Identity{Target: t.BaseURL}
}

func (c *countingChannel) Query(context.Context, engine.Call) engine.Attempt {
	return engine.Attempt{Class: engine.Unsupported}
}

// TestNothingIsSentPastTheLeaseDeadline: the check before every dispatch
// asks the lease (lease.Keeper.Holds: the local deadline; its own test is
// in controlplane/lease); when it no longer holds, the channel is not
// called.
func TestNothingIsSentPastTheLeaseDeadline(t *testing.T) {
	inner := &countingChannel{}
	k := &switchHolder{holds: true}
	ch := engine.Fenced(inner, k)
	if a := ch.Dispatch(context.Background(), engine.Call{}); a.Class != engine.Observed || inner.sent != 1 {
		t.Fatalf("within the deadline: %v, sent %d", a.Class, inner.sent)
	}
	k.holds = false
	if a := ch.Dispatch(context.Background(), engine.Call{}); a.Class != engine.NotSent || a.Final || inner.sent != 1 {
		t.Errorf("past the deadline: %+v, sent %d; want NotSent without a send", a, inner.sent)
	}
}

// switchHolder is a lease that holds while holds is set.
type switchHolder struct{ holds bool }

func (h *switchHolder) Holds() bool { return h.holds }

// waitActive waits until srv (running, its Run's result on done) serves
// as the active replica.
func waitActive(t *testing.T, srv *Server, done <-chan error) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !srv.Active(); {
		select {
		case err := <-done:
			t.Fatalf("Run = %v before the replica became active", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not active after 30s: role %+v", srv.Role())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStandbyAnswersNotActiveAndTakesOver: two replicas on one database
// (keys sealed in the store, one vault key file). The second serves as a
// standby at once: health answers, every API call is Unavailable naming
// the active's address, /readyz's role check fails saying who is active.
// When the active stops cleanly (releasing the lease) the standby takes
// over: it loads the state, serves, and reports itself active with the
// next epoch.
func TestStandbyAnswersNotActiveAndTakesOver(t *testing.T) {
	url := pgtest.URL(t)
	keyFile := filepath.Join(t.TempDir(), "vault.key")
	newReplica := func(name string) *Server {
		cfg := openReplica(t, url, keyFile).config(t, name)
		cfg.Socket, cfg.LeaseTTL = filepath.Join(t.TempDir(), name+".sock"), time.Second
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Debug, Name: name})
		srv, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	run := func(srv *Server) (context.CancelFunc, <-chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		done, stopped := make(chan error, 1), make(chan struct{})
		go func() { done <- srv.Run(ctx); close(stopped) }()
		t.Cleanup(func() { cancel(); <-stopped })
		return cancel, done
	}
	a := newReplica("a")
	stopA, doneA := run(a)
	waitActive(t, a, doneA)
	b := newReplica("b")
	_, doneB := run(b)
	aAddr := "unix://" + a.cfg.Socket
	for deadline := time.Now().Add(30 * time.Second); b.Role().Active != aAddr; {
		if time.Now().After(deadline) {
			t.Fatalf("standby role = %+v, want it to name the active at %s", b.Role(), aAddr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b.Active() {
		t.Fatal("the second replica is active while the first holds the lease")
	}
	// The standby's console sends browsers to the console the active
	// published (none yet: the standby does not know where it is).
	if got := b.ActiveConsole(); got != "" {
		t.Errorf("standby ActiveConsole before the active published one = %q, want none", got)
	}
	if err := a.PublishConsole(t.Context(), "https://ops-a.example:7410"); err != nil {
		t.Fatal(err)
	}
	if got := b.ActiveConsole(); got != "https://ops-a.example:7410" {
		t.Errorf("standby ActiveConsole = %q, want the active's https://ops-a.example:7410", got)
	}
	if got := a.ActiveConsole(); got != "" {
		t.Errorf("the active's ActiveConsole = %q, want none (it serves the console itself)", got)
	}

	conn, err := grpc.NewClient("unix://"+b.cfg.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := t.Context()
	hc := healthpb.NewHealthClient(conn)
	healthOf := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("health check %q on the standby: %v", service, err)
		}
		return r.GetStatus()
	}
	if got := healthOf(""); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("standby health \"\" = %v, want SERVING (the process serves)", got)
	}
	if got := healthOf(HealthService); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("standby health %q = %v, want NOT_SERVING", HealthService, got)
	}
	cp := controlplanev1.NewControlPlaneClient(conn)
	_, err = cp.Submit(ctx, &controlplanev1.SubmitRequest{Actor: "alice", Tool: "look"})
	if active, ok := replicas.ActiveOf(err); !ok || active != aAddr {
		t.Errorf("Submit on the standby = %v; want Unavailable naming %s", err, aAddr)
	}
	_, err = controlplanev1.NewAdminClient(conn).VaultStatus(ctx, &controlplanev1.VaultStatusRequest{})
	if _, ok := replicas.ActiveOf(err); !ok {
		t.Errorf("an Admin RPC on the standby = %v; want NotActive", err)
	}
	// The console's connection runs the same gate: a console decision on
	// a standby is answered NotActive, with the active's address.
	console, err := b.ConsoleConn(func(context.Context, string) (*recordv1.OperatorCredential, error) {
		return &recordv1.OperatorCredential{Operator: "erin", Kind: "operator_token", TokenId: "tok_1"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer console.(*grpc.ClientConn).Close()
	_, err = controlplanev1.NewControlPlaneClient(console).Approve(metadata.AppendToOutgoingContext(ctx, authz.ConsoleSessionKey, "session"),
		&controlplanev1.ApproveRequest{ExecutionId: "act_1", Operator: "erin"})
	if active, ok := replicas.ActiveOf(err); !ok || active != aAddr {
		t.Errorf("a console Approve on the standby = %v; want Unavailable naming %s", err, aAddr)
	}
	readiness := map[string]error{}
	for _, c := range b.ReadyChecks() {
		readiness[c.Name] = c.Ready(ctx)
	}
	if err := readiness["role"]; err == nil || !strings.Contains(err.Error(), "standby: a/") || !strings.Contains(err.Error(), aAddr) {
		t.Errorf("standby role readiness = %v, want it to name the active and its address", err)
	}
	if readiness["store"] != nil || readiness["journal"] != nil {
		t.Errorf("standby store/journal readiness = %v / %v, want both to pass (the database answers)", readiness["store"], readiness["journal"])
	}
	if diff := cmp.Diff(map[string]string{"role": RoleStandby, "replica": b.holder, "address": "unix://" + b.cfg.Socket, "holder": a.holder, "epoch": "1", "active_address": aAddr}, b.Status()); diff != "" {
		t.Errorf("standby Status (-want +got):\n%s", diff)
	}

	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("the active's clean stop: %v", err)
	}
	waitActive(t, b, doneB)
	if got := healthOf(HealthService); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("new active health %q = %v, want SERVING", HealthService, got)
	}
	if r := b.Role(); r.Role != RoleActive || r.Epoch != 2 || r.Holder != b.holder || r.Active != "unix://"+b.cfg.Socket {
		t.Errorf("new active role = %+v, want active with epoch 2", r)
	}
	if _, err := cp.Submit(ctx, &controlplanev1.SubmitRequest{Actor: "alice", Tool: "look"}); err != nil {
		t.Errorf("Submit on the new active: %v", err)
	}
	_, err = controlplanev1.NewControlPlaneClient(console).Approve(metadata.AppendToOutgoingContext(ctx, authz.ConsoleSessionKey, "session"),
		&controlplanev1.ApproveRequest{ExecutionId: "act_1", Operator: "erin"})
	if c := status.Code(err); c != codes.NotFound {
		t.Errorf("a console Approve of an unknown execution on the new active = %v, want NotFound (past the gate and authorization)", err)
	}
}

func TestLateServicesRefuseUnknownServices(t *testing.T) {
	l := &lateServices{}
	l.RegisterService(&healthpb.Health_ServiceDesc, health.NewServer())
	l.RegisterService(&controlplanev1.ControlPlane_ServiceDesc, struct{}{})
	err := l.err()
	for _, want := range []string{"grpc.health.v1.Health is not one of the API's services", "does not implement service latch.controlplane.v1.ControlPlane"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err() = %v, want it to say %q", err, want)
		}
	}
}

// TestStandbyRole: a standby names the active's address only while the
// lease it read runs (by the database's clock, counted from the read), so
// callers are not sent to a killed active; the readiness message says so.
func TestStandbyRole(t *testing.T) {
	now := time.Now()
	db := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		seen       *backend.Lease
		readAgo    time.Duration
		wantActive string
		wantReady  string
	}{
		{"not read yet", nil, 0, "", "has not read the store lease yet"},
		{"lease runs", &backend.Lease{Holder: "a/1", Epoch: 3, Address: "cp1:7400", Now: db, Expires: db.Add(2 * time.Second)}, 100 * time.Millisecond, "cp1:7400", "a/1 is the active replica (epoch 3) at cp1:7400"},
		{"lease ran out since the read", &backend.Lease{Holder: "a/1", Epoch: 3, Address: "cp1:7400", Now: db, Expires: db.Add(2 * time.Second)}, 3 * time.Second, "", "a/1 is the active replica (epoch 3) at an address it does not advertise, or its lease is expiring"},
		{"no address advertised", &backend.Lease{Holder: "a/1", Epoch: 3, Now: db, Expires: db.Add(2 * time.Second)}, 0, "", "at an address it does not advertise"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{holder: "b/2"}
			s.role.set(RoleStandby, 0)
			s.role.observe(tt.seen, now.Add(-tt.readAgo))
			r := s.Role()
			if r.Active != tt.wantActive {
				t.Errorf("Role().Active = %q, want %q", r.Active, tt.wantActive)
			}
			if err := roleReady(r); err == nil || !strings.Contains(err.Error(), tt.wantReady) {
				t.Errorf("roleReady = %v, want it to say %q", err, tt.wantReady)
			}
			if active, ok := replicas.ActiveOf(s.notActive()); !ok || active != tt.wantActive {
				t.Errorf("notActive names %q (%v), want %q", active, ok, tt.wantActive)
			}
		})
	}
}
