// Package sshtest provides SSH servers for tests: an in-process server
// (gliderlabs/ssh) that can refuse, cut and freeze connections, and a
// harness that runs Debian's real OpenSSH sshd unprivileged on loopback.
// Both serve direct-streamlocal@openssh.com, so a test can reach a unix
// socket "on the host" the way the control plane reaches the host agent.
//
// Test code only: it imports testing. Any package's tests may import it.
package sshtest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os/exec"
	"sync"
	"testing"
	"time"

	gliderssh "github.com/gliderlabs/ssh"
	"golang.org/x/crypto/ssh"
)

// Options configures the in-process server.
type Options struct {
	// AuthorizedKey is the only client key accepted. Nil accepts any key.
	AuthorizedKey ssh.PublicKey
	// HostSigner is the server's host key. Nil generates an ed25519 key.
	HostSigner ssh.Signer
	// Handler runs each session. Nil runs the exec'd command line with
	// /bin/sh -c, wiring stdin, stdout, stderr and the exit status.
	Handler gliderssh.Handler
	// RefuseStreamLocal rejects direct-streamlocal@openssh.com channels
	// with "administratively prohibited", like a hardened sshd.
	RefuseStreamLocal bool
	// NoStreamLocal leaves direct-streamlocal@openssh.com unsupported
	// (rejected as an unknown channel type), like a non-OpenSSH server.
	NoStreamLocal bool
	// RefuseExec answers exec requests with failure (nothing runs).
	RefuseExec bool
	// RefuseSessions rejects session channels.
	RefuseSessions bool
}

// Server is a running in-process SSH server on 127.0.0.1.
type Server struct {
	tb      testing.TB
	srv     *gliderssh.Server
	ln      net.Listener
	hostKey ssh.PublicKey

	mu       sync.Mutex
	conns    map[*gateConn]struct{}
	accepted int
	gate     chan struct{} // non-nil while frozen; closed by Thaw
}

// Start starts a server on 127.0.0.1:0; t.Cleanup stops it.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	host := opts.HostSigner
	if host == nil {
		host = NewSigner(tb)
	}
	s := &Server{tb: tb, hostKey: host.PublicKey(), conns: map[*gateConn]struct{}{}}

	handler := opts.Handler
	if handler == nil {
		handler = runShell
	}
	channels := map[string]gliderssh.ChannelHandler{
		"session":                        gliderssh.DefaultSessionHandler,
		"direct-streamlocal@openssh.com": StreamLocalHandler,
	}
	if opts.RefuseStreamLocal {
		channels["direct-streamlocal@openssh.com"] = refuseStreamLocal
	}
	if opts.NoStreamLocal {
		delete(channels, "direct-streamlocal@openssh.com")
	}
	if opts.RefuseSessions {
		channels["session"] = func(_ *gliderssh.Server, _ *ssh.ServerConn, nc ssh.NewChannel, _ gliderssh.Context) {
			_ = nc.Reject(ssh.Prohibited, "sessions are disabled")
		}
	}
	s.srv = &gliderssh.Server{
		Handler:         handler,
		HostSigners:     []gliderssh.Signer{host},
		ChannelHandlers: channels,
		ConnCallback: func(_ gliderssh.Context, c net.Conn) net.Conn {
			gc := &gateConn{Conn: c, srv: s, closed: make(chan struct{})}
			s.mu.Lock()
			s.conns[gc] = struct{}{}
			s.accepted++
			s.mu.Unlock()
			return gc
		},
		PublicKeyHandler: func(_ gliderssh.Context, key gliderssh.PublicKey) bool {
			return opts.AuthorizedKey == nil || bytes.Equal(key.Marshal(), opts.AuthorizedKey.Marshal())
		},
	}
	if opts.RefuseExec {
		s.srv.SessionRequestCallback = func(gliderssh.Session, string) bool { return false }
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("sshtest: listen: %v", err)
	}
	s.ln = ln
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.srv.Serve(ln)
	}()
	tb.Cleanup(func() {
		s.Thaw()
		_ = s.srv.Close()
		<-served
	})
	return s
}

// Addr returns host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// HostKey returns the host key in authorized_keys form, ready to pin.
func (s *Server) HostKey() string { return AuthorizedKey(s.hostKey) }

// Accepted returns how many TCP connections the server has accepted.
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// DropAll cuts every open connection at the TCP level, as a network failure
// would: no SSH disconnect message, no exit status.
func (s *Server) DropAll() {
	s.mu.Lock()
	conns := make([]*gateConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Freeze makes every connection, open or new, stop reading and writing
// (bytes already received are held, not processed), like a hung peer or a
// black-holed route. Keepalives go unanswered. Thaw undoes it.
func (s *Server) Freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
}

// Thaw releases a Freeze.
func (s *Server) Thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

func (s *Server) frozen() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gate
}

// gateConn is a server-side connection that DropAll can cut and Freeze can
// stall.
type gateConn struct {
	net.Conn
	srv    *Server
	once   sync.Once
	closed chan struct{}
}

func (c *gateConn) wait() error {
	if g := c.srv.frozen(); g != nil {
		select {
		case <-g:
		case <-c.closed:
			return net.ErrClosed
		}
	}
	return nil
}

func (c *gateConn) Read(p []byte) (int, error) {
	if err := c.wait(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	// Bytes that arrived while frozen are held until Thaw.
	if werr := c.wait(); werr != nil {
		return 0, werr
	}
	return n, err
}

func (c *gateConn) Write(p []byte) (int, error) {
	if err := c.wait(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (c *gateConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.srv.mu.Lock()
		delete(c.srv.conns, c)
		c.srv.mu.Unlock()
	})
	return c.Conn.Close()
}

// runShell is the default session handler: /bin/sh -c with the raw command.
func runShell(s gliderssh.Session) {
	if s.RawCommand() == "" {
		_, _ = io.WriteString(s.Stderr(), "sshtest: interactive shells are not supported\n")
		_ = s.Exit(255)
		return
	}
	cmd := exec.CommandContext(s.Context(), "/bin/sh", "-c", s.RawCommand())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s.Stderr()
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		_ = s.Exit(0)
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		_ = s.Exit(ee.ExitCode())
	default:
		_, _ = io.WriteString(s.Stderr(), "sshtest: "+err.Error()+"\n")
		_ = s.Exit(255)
	}
}

// NewSigner returns a fresh ed25519 signer.
func NewSigner(tb testing.TB) ssh.Signer {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatalf("sshtest: generate key: %v", err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		tb.Fatalf("sshtest: signer: %v", err)
	}
	return s
}

// AuthorizedKey formats a public key in authorized_keys form, without the
// trailing newline.
func AuthorizedKey(k ssh.PublicKey) string {
	return string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(k)))
}
