package hostchannel

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/internal/testing/hostagenttest"
	"github.com/latchhq/latch/internal/testing/sshtest"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// scriptedAgent is a HostAgent server whose Status answers as scripted; it
// stands for an agent this control plane cannot fully trust or understand.
type scriptedAgent struct {
	hostagentv1.UnimplementedHostAgentServer
	marker *hostagentv1.Marker
	err    error
}

func (s *scriptedAgent) Status(context.Context, *hostagentv1.StatusRequest) (*hostagentv1.StatusResponse, error) {
	if s.err != nil {
		return nil, s.err
	}
	return &hostagentv1.StatusResponse{Marker: s.marker}, nil
}

func startScriptedAgent(t *testing.T, s *scriptedAgent) string {
	t.Helper()
	sock := filepath.Join(hostagenttest.ShortDir(t), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hostagentv1.RegisterHostAgentServer(srv, s)
	go srv.Serve(l) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	return sock
}

// TestRecoveryQueryWithoutTheAgentsMarker checks that a recovery query
// concludes "nothing ran" only from the agent's marker: a missing socket, a
// failed dial, a refused streamlocal channel, an RPC error or a marker state
// this control plane does not know is no evidence (Unknown), and even a
// missing marker counts only after the settle point (Absent, not Durable).
func TestRecoveryQueryWithoutTheAgentsMarker(t *testing.T) {
	missing := filepath.Join(hostagenttest.ShortDir(t), "missing.sock")
	internal := startScriptedAgent(t, &scriptedAgent{err: status.Error(codes.Internal, "marker store: read failed")})
	unavailable := startScriptedAgent(t, &scriptedAgent{err: status.Error(codes.Unavailable, "shutting down")})
	oddState := startScriptedAgent(t, &scriptedAgent{marker: &hostagentv1.Marker{ExecutionId: "act_rq", State: hostagentv1.MarkerState(99)}})
	notStarted := startScriptedAgent(t, &scriptedAgent{marker: &hostagentv1.Marker{ExecutionId: "act_rq", State: hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED}})
	noMarker := startScriptedAgent(t, &scriptedAgent{err: status.Error(codes.NotFound, "no marker for this execution id")})

	deadPort := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}()

	tests := []struct {
		name    string
		ssh     *sshtest.Options // nil: a local target on sock
		sock    string
		change  func(*sshEnv)
		want    engine.AttemptClass
		durable bool
	}{
		{name: "local socket missing", sock: missing, want: engine.Unknown},
		{name: "agent status error", sock: internal, want: engine.Unknown},
		{name: "agent unavailable", sock: unavailable, want: engine.Unknown},
		{name: "unknown marker state", sock: oddState, want: engine.Unknown},
		{name: "ssh streamlocal refused", ssh: &sshtest.Options{RefuseStreamLocal: true}, want: engine.Unknown},
		{name: "ssh agent socket missing", ssh: &sshtest.Options{}, change: func(e *sshEnv) { e.target.HostagentSocket = "/nonexistent/agent.sock" }, want: engine.Unknown},
		{name: "ssh dial refused", ssh: &sshtest.Options{}, change: func(e *sshEnv) { e.target.Address = deadPort }, want: engine.Unknown},
		{name: "ssh vault locked", ssh: &sshtest.Options{}, change: func(e *sshEnv) { e.creds.locked = true }, want: engine.Unknown},
		{name: "no marker", sock: noMarker, want: engine.Absent},
		{name: "not_started marker", sock: notStarted, want: engine.Absent, durable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ch *Channel
			var call engine.Call
			if tt.ssh == nil {
				ch = newChannel(t, Config{})
				call = newCall("act_rq", localTarget(tt.sock), "/bin/true")
			} else {
				e := newSSHEnv(t, *tt.ssh, nil)
				if tt.change != nil {
					tt.change(e)
				}
				ch, call = e.ch, newCall("act_rq", e.target, "/bin/true")
			}
			call.Recovery = true
			got := ch.Query(ctxT(t), call)
			if got.Class != tt.want || got.Durable != tt.durable {
				t.Fatalf("recovery Query() = %s durable=%v (%s), want %s durable=%v", className(got.Class), got.Durable, got.Reason, className(tt.want), tt.durable)
			}
			if got.Class == engine.Absent && !got.Durable && got.InFlight < DefaultCallTimeout {
				t.Errorf("a missing marker's in-flight bound = %s, want at least the Run deadline", got.InFlight)
			}
			if got.Reason == "" || strings.Contains(got.Reason, "nothing ran under it") && !tt.durable {
				t.Errorf("reason %q claims nothing ran without the agent's marker", got.Reason)
			}
		})
	}
}
