package sshtest

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	gliderssh "github.com/gliderlabs/ssh"
	"golang.org/x/crypto/ssh"
)

// streamLocalOpen is the extra data of a direct-streamlocal@openssh.com
// channel open (OpenSSH PROTOCOL, section 2.4): the socket path and two
// reserved fields.
type streamLocalOpen struct {
	SocketPath string
	Reserved0  string
	Reserved1  uint32
}

// StreamLocalHandler serves direct-streamlocal@openssh.com for a
// gliderlabs/ssh server (the tagged release has none): it dials the unix
// socket named in the open request and copies both ways, half-closing each
// side when the other ends. Like OpenSSH it answers a socket it cannot
// reach with "connect failed" / "open failed".
func StreamLocalHandler(_ *gliderssh.Server, _ *ssh.ServerConn, nc ssh.NewChannel, ctx gliderssh.Context) {
	var m streamLocalOpen
	if err := ssh.Unmarshal(nc.ExtraData(), &m); err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, "malformed direct-streamlocal request: "+err.Error())
		return
	}
	var d net.Dialer
	uc, err := d.DialContext(ctx, "unix", m.SocketPath)
	if err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, "open failed")
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		_ = uc.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(uc, ch)
		if u, ok := uc.(*net.UnixConn); ok {
			_ = u.CloseWrite()
		}
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(ch, uc)
		_ = ch.CloseWrite()
	}()
	go func() {
		wg.Wait()
		_ = ch.Close()
		_ = uc.Close()
	}()
	// The channel also ends when the SSH connection does.
	go func() {
		<-ctx.Done()
		_ = uc.Close()
	}()
}

func refuseStreamLocal(_ *gliderssh.Server, _ *ssh.ServerConn, nc ssh.NewChannel, _ gliderssh.Context) {
	_ = nc.Reject(ssh.Prohibited, "administratively prohibited")
}

// EchoSocket serves a unix socket in a temp dir that echoes what it reads,
// and returns its path. It stops at cleanup.
func EchoSocket(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(shortTempDir(tb), "echo.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		tb.Fatalf("sshtest: listen %s: %v", path, err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	tb.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return path
}

// shortTempDir returns a temp dir with a short path: a unix socket path
// must fit in 108 bytes, and t.TempDir() paths grow with the test name.
func shortTempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "sshtest")
	if err != nil {
		tb.Fatalf("sshtest: temp dir: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
