package mcpfront

import (
	"context"
	"net"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/latchhq/latch/controlplane/api"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/httpchannel"
	"github.com/latchhq/latch/controlplane/httpdispatch"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/internal/mcpwire"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	"github.com/latchhq/latch/tools"
)

// restartableCP is the real control plane on Badger in dir, served over a
// bufconn listener that a restart replaces; the front's gRPC client
// reconnects to the new one by itself.
type restartableCP struct {
	t    *testing.T
	dir  string
	cat  *tools.Catalog
	key  []byte
	lis  atomic.Pointer[bufconn.Listener]
	stop func()
}

func (r *restartableCP) start() {
	r.t.Helper()
	kv, err := badgerkv.Open(r.dir, badgerkv.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	s, err := store.New(store.Config{KV: kv})
	if err != nil {
		r.t.Fatal(err)
	}
	d, err := httpdispatch.New(httpdispatch.Config{})
	if err != nil {
		r.t.Fatal(err)
	}
	hc, err := httpchannel.New(httpchannel.Config{Dispatcher: d})
	if err != nil {
		r.t.Fatal(err)
	}
	fp, _ := fingerprint.New(r.key)
	e, err := engine.New(engine.Config{Store: s, Catalog: r.cat, Fingerprinter: fp, Logger: testLogger(r.t),
		Channels: map[tools.Channel]engine.Channel{tools.ChannelHTTP: hc}})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	svc, err := api.New(api.Config{Engine: e, Caller: func(context.Context) api.Caller { return api.Caller{Identity: "unix", Operator: true} }})
	if err != nil {
		r.t.Fatal(err)
	}
	gs := grpc.NewServer()
	svc.Register(gs)
	lis := bufconn.Listen(1 << 20)
	r.lis.Store(lis)
	go func() { _ = gs.Serve(lis) }()
	r.stop = func() {
		gs.Stop()
		e.Close()
		s.Close()
		d.Close()
	}
}

// Tasks open across a control-plane restart are still pollable: one waits
// for an approval (approved after the restart, then completes), one had
// completed before it (its result is still there).
func TestTasksSurviveControlPlaneRestart(t *testing.T) {
	effect := newEffectServer(t)
	cat := testCatalog()
	cat.Targets["effect"].BaseURL = effect.srv.URL
	key, _ := fingerprint.GenerateKey()
	cp := &restartableCP{t: t, dir: t.TempDir(), cat: cat, key: key}
	cp.start()
	t.Cleanup(func() { cp.stop() })
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return cp.lis.Load().DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := controlplanev1.NewControlPlaneClient(conn)
	front, err := New(Config{Logger: testLogger(t), ControlPlane: client}) // loopback actor "local"
	if err != nil {
		t.Fatal(err)
	}
	if err := front.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(front.HTTPHandler())
	t.Cleanup(func() { hs.Close(); _ = front.Close() })
	st := &testStack{URL: hs.URL + "/mcp", tokens: map[string]string{}}

	c := st.rpc(t, "local", eraModern)
	waiting := c.callTask("approved_job", map[string]any{"job": "across-restart"})["taskId"].(string)
	done := c.callTask("deploy_release", map[string]any{"service": "api", "version": "9"})["taskId"].(string)
	c.pollUntil(done, mcpwire.TaskCompleted)

	cp.stop()
	cp.start()
	// The front answers "could not reach its control plane; poll again"
	// until its connection is back (a client polls again); wait for that
	// here rather than in every poll below.
	waitReady(t, conn)

	if m := c.get(waiting); m["status"] != "working" || !strings.Contains(m["statusMessage"].(string), "latch approvals approve "+waiting) {
		t.Errorf("task awaiting approval after the restart = %v, want working with the approve command", m)
	}
	again := c.get(done)
	if r, _ := again["result"].(map[string]any); again["status"] != "completed" || r["isError"] == true {
		t.Errorf("completed task after the restart = %v, want completed with its result", again)
	}
	if _, err := client.Approve(t.Context(), &controlplanev1.ApproveRequest{ExecutionId: waiting, Operator: "ops"}); err != nil {
		t.Fatalf("Approve after the restart: %v", err)
	}
	c.pollUntil(waiting, mcpwire.TaskCompleted)
	if n := effect.count("/approved"); n != 1 {
		t.Errorf("effect count = %d, want 1", n)
	}
	if n := effect.count("/v1/releases"); n != 1 {
		t.Errorf("deploy effect count = %d, want 1", n)
	}
}

// waitReady waits (at most 30 s: gRPC's reconnect backoff grows while the
// control plane restarts on a loaded machine) until conn is connected again.
func waitReady(t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn.Connect()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			t.Fatalf("the front's connection to the restarted control plane is still %v after 30 s", st)
		}
		conn.Connect()
	}
}
