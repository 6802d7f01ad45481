package sshdial

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	gliderssh "github.com/gliderlabs/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/latchhq/latch/internal/testing/sshtest"
)

func TestPinnedHostKey(t *testing.T) {
	srv, target := serverWithKey(t, sshtest.Options{})
	p := newPool(t, nil)
	c, err := p.Client(ctxT(t), target)
	if err != nil {
		t.Fatalf("Client: %v", err)
	}
	if got := c.HostKey(); got != srv.HostKey() {
		t.Errorf("HostKey() = %q, want %q", got, srv.HostKey())
	}
	res, err := c.Exec(ctxT(t), []string{"true"}, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec(true) = %+v, %v; want exit 0", res, err)
	}
}

func TestHostKeyRefused(t *testing.T) {
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecSigner, err := ssh.NewSignerFromKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		hostKey  func(srv *sshtest.Server) string
		want     error
		contains []string
	}{
		{
			name:     "changed ed25519 key",
			hostKey:  func(*sshtest.Server) string { return otherKey(t) },
			want:     ErrHostKeyChanged,
			contains: []string{"web-01", "SHA256:", "update host_key in the catalog"},
		},
		{
			name:     "pinned type not offered",
			hostKey:  func(*sshtest.Server) string { return sshtest.AuthorizedKey(ecSigner.PublicKey()) },
			want:     ErrHostKeyChanged,
			contains: []string{"offers no ecdsa-sha2-nistp256 host key", "update host_key"},
		},
		{
			name:     "unknown without trust on first use",
			hostKey:  func(*sshtest.Server) string { return "" },
			want:     ErrHostKeyUnknown,
			contains: []string{"web-01", "SHA256:", "set host_key in the catalog"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, target := serverWithKey(t, sshtest.Options{})
			target.HostKey = tt.hostKey(srv)
			p := newPool(t, nil)
			_, err := p.Client(ctxT(t), target)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Client() error = %v, want %v", err, tt.want)
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if n := srv.Accepted(); n != 1 {
				t.Errorf("server accepted %d connections, want 1 (host key errors are not retried)", n)
			}
		})
	}
}

func TestHostKeyChangedNamesBothFingerprints(t *testing.T) {
	srv, target := serverWithKey(t, sshtest.Options{})
	pinned := otherKey(t)
	target.HostKey = pinned
	_, err := newPool(t, nil).Client(ctxT(t), target)
	for _, key := range []string{pinned, srv.HostKey()} {
		pk, _, _, _, perr := ssh.ParseAuthorizedKey([]byte(key))
		if perr != nil {
			t.Fatal(perr)
		}
		if fp := ssh.FingerprintSHA256(pk); err == nil || !strings.Contains(err.Error(), fp) {
			t.Errorf("error %v does not name fingerprint %s", err, fp)
		}
	}
}

func TestTrustOnFirstUse(t *testing.T) {
	srv, target := serverWithKey(t, sshtest.Options{})
	target.HostKey = ""
	target.TrustOnFirstUse = true
	var recorded []string
	p := newPool(t, func(c *Config) {
		c.RecordHostKey = func(name, key string) error {
			recorded = append(recorded, name+" "+key)
			return nil
		}
	})
	c, err := p.Client(ctxT(t), target)
	if err != nil {
		t.Fatalf("Client: %v", err)
	}
	want := []string{"web-01 " + srv.HostKey()}
	if fmt.Sprint(recorded) != fmt.Sprint(want) {
		t.Fatalf("recorded %q, want %q", recorded, want)
	}

	// A re-dial of the same server trusts the learned key without asking.
	srv.DropAll()
	waitDone(t, c)
	if _, err := p.Client(ctxT(t), target); err != nil {
		t.Fatalf("Client after drop: %v", err)
	}
	if len(recorded) != 1 {
		t.Errorf("RecordHostKey called %d times, want 1", len(recorded))
	}

	// Another key under the same name is a change, not a new first use.
	other, _ := serverWithKey(t, sshtest.Options{AuthorizedKey: target.Signer.PublicKey()})
	target.Address = other.Addr()
	if _, err := p.Client(ctxT(t), target); !errors.Is(err, ErrHostKeyChanged) {
		t.Fatalf("Client(other server) error = %v, want ErrHostKeyChanged", err)
	}
}

func TestTrustOnFirstUseRecordFails(t *testing.T) {
	srv, target := serverWithKey(t, sshtest.Options{})
	target.HostKey = ""
	target.TrustOnFirstUse = true
	boom := errors.New("catalog is read-only")
	p := newPool(t, func(c *Config) {
		c.RecordHostKey = func(string, string) error { return boom }
	})
	if _, err := p.Client(ctxT(t), target); !errors.Is(err, boom) {
		t.Fatalf("Client() error = %v, want %v", err, boom)
	}
	if n := srv.Accepted(); n != 1 {
		t.Errorf("server accepted %d connections, want 1", n)
	}
}

func TestAuthFailed(t *testing.T) {
	srv, target := serverWithKey(t, sshtest.Options{AuthorizedKey: sshtest.NewSigner(t).PublicKey()})
	_, err := newPool(t, nil).Client(ctxT(t), target)
	if !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("Client() error = %v, want ErrAuthFailed", err)
	}
	fp := ssh.FingerprintSHA256(target.Signer.PublicKey())
	for _, s := range []string{"deploy@web-01", fp, "authorized_keys"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if n := srv.Accepted(); n != 1 {
		t.Errorf("server accepted %d connections, want 1 (auth errors are not retried)", n)
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	target := Target{Name: "gone", Address: addr, User: "deploy", HostKey: otherKey(t), Signer: sshtest.NewSigner(t)}
	_, err = newPool(t, nil).Client(ctxT(t), target)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Client() error = %v, want ErrUnreachable naming %s", err, addr)
	}
	if IsDrop(err) {
		t.Errorf("IsDrop(%v) = true, want false (never connected)", err)
	}
}

func TestBadTarget(t *testing.T) {
	signer := sshtest.NewSigner(t)
	good := Target{Name: "a", Address: "127.0.0.1:1", User: "u", Signer: signer, HostKey: otherKey(t)}
	tests := []struct {
		name string
		mod  func(*Target)
	}{
		{"no name", func(t *Target) { t.Name = "" }},
		{"no address", func(t *Target) { t.Address = "" }},
		{"no user", func(t *Target) { t.User = "" }},
		{"no signer", func(t *Target) { t.Signer = nil }},
		{"host key garbage", func(t *Target) { t.HostKey = "ssh-ed25519 not-base64!" }},
	}
	p := newPool(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := good
			tt.mod(&target)
			if _, err := p.Client(ctxT(t), target); !errors.Is(err, ErrBadTarget) {
				t.Errorf("Client() error = %v, want ErrBadTarget", err)
			}
		})
	}
}

func TestDialUnix(t *testing.T) {
	_, target := serverWithKey(t, sshtest.Options{})
	sock := sshtest.EchoSocket(t)
	c, err := newPool(t, nil).Client(ctxT(t), target)
	if err != nil {
		t.Fatalf("Client: %v", err)
	}
	// Two channels over one connection, used at once.
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := c.DialUnix(ctxT(t), sock)
			if err != nil {
				t.Errorf("DialUnix(%s): %v", sock, err)
				return
			}
			defer conn.Close()
			echoRoundTrip(t, conn, fmt.Sprintf("hello %d through the tunnel", i))
		}()
	}
	wg.Wait()
}

func TestDialUnixRefused(t *testing.T) {
	tests := []struct {
		name   string
		opts   sshtest.Options
		socket func(tb testing.TB) string
	}{
		{"forwarding prohibited", sshtest.Options{RefuseStreamLocal: true}, sshtest.EchoSocket},
		{"no socket", sshtest.Options{}, func(testing.TB) string { return "/nonexistent/latch-hostagent.sock" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, target := serverWithKey(t, tt.opts)
			c, err := newPool(t, nil).Client(ctxT(t), target)
			if err != nil {
				t.Fatalf("Client: %v", err)
			}
			_, err = c.DialUnix(ctxT(t), tt.socket(t))
			if !errors.Is(err, ErrStreamLocalRefused) {
				t.Fatalf("DialUnix() error = %v, want ErrStreamLocalRefused", err)
			}
			for _, s := range []string{"AllowTcpForwarding no", "DisableForwarding yes", "AllowStreamLocalForwarding no", "Match User deploy"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not mention %q: %v", s, err)
				}
			}
			// A refused channel leaves the connection usable.
			if c.Err() != nil {
				t.Errorf("connection ended after a refused channel: %v", c.Err())
			}
		})
	}
}

func TestKeepaliveDetectsFrozenPeer(t *testing.T) {
	srv, target := serverWithKey(t, sshtest.Options{})
	p := newPool(t, func(c *Config) {
		c.KeepaliveInterval = 20 * time.Millisecond
		c.KeepaliveTimeout = 100 * time.Millisecond
	})
	c, err := p.Client(ctxT(t), target)
	if err != nil {
		t.Fatalf("Client: %v", err)
	}
	srv.Freeze()
	// An Exec started now waits on a peer that never answers; the keepalive
	// must end the wait, and since the session was never opened, nothing
	// was sent.
	_, execErr := c.Exec(ctxT(t), []string{"touch", "/tmp/never"}, nil)
	waitDone(t, c)
	if err := c.Err(); !errors.Is(err, ErrKeepaliveTimeout) || !errors.Is(err, ErrConnectionLost) || !IsDrop(err) {
		t.Fatalf("Err() = %v, want ErrKeepaliveTimeout (a drop)", err)
	}
	if !errors.Is(execErr, ErrNotSent) || !errors.Is(execErr, ErrKeepaliveTimeout) {
		t.Errorf("Exec() error = %v, want ErrNotSent caused by ErrKeepaliveTimeout", execErr)
	}
	if _, err := c.DialUnix(ctxT(t), "/x.sock"); !errors.Is(err, ErrKeepaliveTimeout) {
		t.Errorf("DialUnix() on a dead client error = %v, want ErrKeepaliveTimeout", err)
	}
}

func TestKeepaliveHealthyPeerStays(t *testing.T) {
	_, target := serverWithKey(t, sshtest.Options{})
	p := newPool(t, func(c *Config) {
		c.KeepaliveInterval = 5 * time.Millisecond
		c.KeepaliveTimeout = 5 * time.Second
	})
	c, err := p.Client(ctxT(t), target)
	if err != nil {
		t.Fatalf("Client: %v", err)
	}
	// Many keepalive rounds happen while these commands run; none may
	// close a peer that answers.
	for i := range 20 {
		if _, err := c.Exec(ctxT(t), []string{"true"}, nil); err != nil {
			t.Fatalf("Exec #%d: %v", i, err)
		}
	}
	if err := c.Err(); err != nil {
		t.Fatalf("Err() = %v, want nil", err)
	}
}

func TestPoolReuseAndRedial(t *testing.T) {
	srv, target := serverWithKey(t, sshtest.Options{})
	p := newPool(t, nil)

	var wg sync.WaitGroup
	clients := make([]*Client, 8)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := p.Client(ctxT(t), target)
			if err != nil {
				t.Errorf("Client: %v", err)
			}
			clients[i] = c
		}()
	}
	wg.Wait()
	for _, c := range clients[1:] {
		if c != clients[0] {
			t.Fatalf("concurrent Client calls returned different connections")
		}
	}
	if n := srv.Accepted(); n != 1 {
		t.Fatalf("server accepted %d connections, want 1", n)
	}

	srv.DropAll()
	waitDone(t, clients[0])
	if !IsDrop(clients[0].Err()) {
		t.Errorf("Err() after drop = %v, want a drop", clients[0].Err())
	}
	c2, err := p.Client(ctxT(t), target)
	if err != nil {
		t.Fatalf("Client after drop: %v", err)
	}
	if c2 == clients[0] {
		t.Fatalf("Client after drop returned the broken connection")
	}
	if n := srv.Accepted(); n != 2 {
		t.Errorf("server accepted %d connections, want 2", n)
	}
	if _, err := c2.Exec(ctxT(t), []string{"true"}, nil); err != nil {
		t.Errorf("Exec on re-dialled connection: %v", err)
	}

	// A changed target (new address) is a new connection too.
	srv2, _ := serverWithKey(t, sshtest.Options{AuthorizedKey: target.Signer.PublicKey()})
	target.Address, target.HostKey = srv2.Addr(), srv2.HostKey()
	c3, err := p.Client(ctxT(t), target)
	if err != nil {
		t.Fatalf("Client(changed target): %v", err)
	}
	if c3 == c2 || srv2.Accepted() != 1 {
		t.Errorf("changed target reused the old connection")
	}
	if c2.Err() == nil {
		t.Errorf("old connection still open after the target changed")
	}
}

func TestPoolClosed(t *testing.T) {
	_, target := serverWithKey(t, sshtest.Options{})
	p := newPool(t, nil)
	c, err := p.Client(ctxT(t), target)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	waitDone(t, c)
	if !errors.Is(c.Err(), ErrClosed) {
		t.Errorf("Err() after Close = %v, want ErrClosed", c.Err())
	}
	if _, err := p.Client(ctxT(t), target); !errors.Is(err, ErrClosed) {
		t.Errorf("Client after Close error = %v, want ErrClosed", err)
	}
}

// TestUnreachableIsOneDial: a Client call that cannot connect dials once
// and returns; the next call dials again (the engine's retry), and a
// permanent error (the host key) is not Retryable.
func TestUnreachableIsOneDial(t *testing.T) {
	srv, target := serverWithKey(t, sshtest.Options{})
	srv.Freeze()
	p := newPool(t, func(c *Config) { c.HandshakeTimeout = 50 * time.Millisecond })
	for call := 1; call <= 2; call++ {
		_, err := p.Client(ctxT(t), target)
		if !errors.Is(err, ErrUnreachable) || !Retryable(err) {
			t.Fatalf("Client call %d error = %v, want a Retryable ErrUnreachable", call, err)
		}
		if n := srv.Accepted(); n != call {
			t.Errorf("after call %d the server accepted %d connections, want %d", call, n, call)
		}
	}
	for _, err := range []error{ErrHostKeyChanged, ErrHostKeyUnknown, ErrAuthFailed, ErrBadTarget, ErrClosed} {
		if Retryable(fmt.Errorf("dial: %w", err)) {
			t.Errorf("Retryable(%v) = true, want false", err)
		}
	}
}

// blockingHandler signals started, then holds the session open until the
// connection ends, never sending an exit status.
func blockingHandler(started chan<- struct{}) gliderssh.Handler {
	return func(s gliderssh.Session) {
		started <- struct{}{}
		<-s.Context().Done()
	}
}

func TestHandshakeDeadline(t *testing.T) {
	srv, target := serverWithKey(t, sshtest.Options{})
	srv.Freeze() // accepts TCP, never speaks SSH
	p := newPool(t, func(c *Config) { c.HandshakeTimeout = 50 * time.Millisecond })
	_, err := p.Client(ctxT(t), target)
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Client(frozen server) error = %v, want ErrUnreachable", err)
	}
	// One dial per call: the engine decides whether to try again
	// (engine.RetryPolicy); this count was 2 (DialAttempts) before.
	if n := srv.Accepted(); n != 1 {
		t.Errorf("server accepted %d connections, want 1 (one dial per call, never retried here)", n)
	}
}

func TestContextEndsWaits(t *testing.T) {
	t.Run("handshake", func(t *testing.T) {
		srv, target := serverWithKey(t, sshtest.Options{})
		srv.Freeze()
		ctx, cancel := context.WithTimeout(ctxT(t), 50*time.Millisecond)
		defer cancel()
		_, err := newPool(t, nil).Client(ctx, target)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Client() error = %v, want context.DeadlineExceeded", err)
		}
		if n := srv.Accepted(); n != 1 {
			t.Errorf("server accepted %d connections, want 1 (no retry after the caller gave up)", n)
		}
	})
	t.Run("exec and dial on a hung peer", func(t *testing.T) {
		srv, target := serverWithKey(t, sshtest.Options{})
		c, err := newPool(t, nil).Client(ctxT(t), target)
		if err != nil {
			t.Fatal(err)
		}
		srv.Freeze()
		ctx, cancel := context.WithTimeout(ctxT(t), 50*time.Millisecond)
		defer cancel()
		_, err = c.Exec(ctx, []string{"true"}, nil)
		if !errors.Is(err, ErrNotSent) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Exec() error = %v, want ErrNotSent caused by the deadline", err)
		}
		if _, err := c.DialUnix(ctx, "/x.sock"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("DialUnix() error = %v, want context.DeadlineExceeded", err)
		}
	})
}

func TestFingerprint(t *testing.T) {
	signer := sshtest.NewSigner(t)
	got, err := Fingerprint(sshtest.AuthorizedKey(signer.PublicKey()) + " comment\n")
	if want := ssh.FingerprintSHA256(signer.PublicKey()); err != nil || got != want {
		t.Errorf("Fingerprint() = %q, %v; want %q", got, err, want)
	}
	if _, err := Fingerprint("not a key"); !errors.Is(err, ErrBadTarget) {
		t.Errorf("Fingerprint(garbage) error = %v, want ErrBadTarget", err)
	}
}

func TestDialUnixUnsupported(t *testing.T) {
	_, target := serverWithKey(t, sshtest.Options{NoStreamLocal: true})
	c, err := newPool(t, nil).Client(ctxT(t), target)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.DialUnix(ctxT(t), sshtest.EchoSocket(t))
	if !errors.Is(err, ErrStreamLocalRefused) || !strings.Contains(err.Error(), "does not support direct-streamlocal") {
		t.Fatalf("DialUnix() error = %v, want ErrStreamLocalRefused saying the server lacks support", err)
	}
}
