package agent

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/latchhq/latch/hostagent/client"
	"github.com/latchhq/latch/internal/testing/hostagenttest"
)

func TestPolicyCheck(t *testing.T) {
	self := uint32(os.Getuid())
	foreign := self + 4242
	tests := []struct {
		name   string
		policy Policy
		uid    uint32
		ok     bool
	}{
		{"default allows self", DefaultPolicy(), self, true},
		{"default allows root", DefaultPolicy(), 0, true},
		{"default refuses a foreign uid", DefaultPolicy(), foreign, false},
		{"allow-uid admits it", DefaultPolicy(foreign), foreign, true},
		{"explicit policy refuses root", NewPolicy(foreign), 0, false},
		{"empty policy refuses all", NewPolicy(), self, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.Check(tt.uid)
			if (err == nil) != tt.ok {
				t.Fatalf("Check(%d) = %v, want ok=%v", tt.uid, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrPeerRefused) {
				t.Errorf("Check(%d) = %v, want ErrPeerRefused", tt.uid, err)
			}
		})
	}
}

// handshake runs a server handshake on a real unix socket connection from
// this process.
func handshake(t *testing.T, policy Policy) (PeerInfo, error) {
	t.Helper()
	path := filepath.Join(hostagenttest.ShortDir(t), "s.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, info, err := NewPeerCredentials(policy).ServerHandshake(s)
	if err != nil {
		return PeerInfo{}, err
	}
	return info.(PeerInfo), nil
}

func TestServerHandshakeChecksPeerUID(t *testing.T) {
	self := uint32(os.Getuid())
	info, err := handshake(t, NewPolicy(self))
	if err != nil {
		t.Fatalf("handshake with own uid allowed = %v", err)
	}
	if info.UID != self || info.PID != int32(os.Getpid()) {
		t.Errorf("PeerInfo = %+v, want uid %d pid %d", info, self, os.Getpid())
	}
	if _, err := handshake(t, NewPolicy(self+4242)); !errors.Is(err, ErrPeerRefused) {
		t.Errorf("handshake with own uid not allowed = %v, want ErrPeerRefused", err)
	}
}

func TestRefusedPeerCannotDial(t *testing.T) {
	path := filepath.Join(hostagenttest.ShortDir(t), "s.sock")
	lis, err := Listen(path, DefaultSocketMode)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(NewPeerCredentials(NewPolicy(uint32(os.Getuid()) + 4242))))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, closer, err := client.Dial(ctx, path)
	if err == nil {
		_ = closer.Close()
		t.Fatal("Dial by a refused uid succeeded")
	}
	if !errors.Is(err, client.ErrUnreachable) {
		t.Errorf("Dial = %v, want ErrUnreachable", err)
	}
}

func TestListen(t *testing.T) {
	dir := hostagenttest.ShortDir(t)
	path := filepath.Join(dir, "a.sock")
	lis, err := Listen(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want 0600", fi.Mode().Perm())
	}
	if _, err := Listen(path, 0o600); !errors.Is(err, ErrSocketInUse) {
		t.Errorf("Listen on a live socket = %v, want ErrSocketInUse", err)
	}
	// A stale socket file (nobody listening) is replaced.
	if ul, ok := lis.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false)
	}
	_ = lis.Close()
	lis2, err := Listen(path, 0o660)
	if err != nil {
		t.Fatalf("Listen over a stale socket = %v", err)
	}
	_ = lis2.Close()
	file := filepath.Join(dir, "plain")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(file, 0o660); err == nil {
		t.Errorf("Listen on a regular file succeeded, want an error")
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no data", Config{SocketPath: "/tmp/x.sock"}},
		{"no socket", Config{DataDir: "/tmp/x"}},
		{"world-writable socket", Config{DataDir: "/tmp/x", SocketPath: "/tmp/x.sock", SocketMode: 0o666}},
		{"negative cap", Config{DataDir: "/tmp/x", SocketPath: "/tmp/x.sock", OutputCap: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); !errors.Is(err, ErrConfig) {
				t.Errorf("New(%+v) = %v, want ErrConfig", tt.cfg, err)
			}
		})
	}
}
