package sshdial

import (
	"context"
	"io"
	"net"
	"os/user"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/internal/testing/sshtest"
	"github.com/latchhq/latch/internal/testing/testlog"
)

// testLogger writes through t.Log until the test's cleanups have run.
func testLogger(tb testing.TB) hclog.Logger {
	return testlog.New(tb, hclog.Debug)
}

// newPool returns a pool, closed at cleanup.
func newPool(tb testing.TB, mod func(*Config)) *Pool {
	tb.Helper()
	cfg := Config{Logger: testLogger(tb)}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// serverWithKey starts an in-process server that accepts one fresh client
// key and returns it with a target pinned to the server's host key.
func serverWithKey(tb testing.TB, opts sshtest.Options) (*sshtest.Server, Target) {
	tb.Helper()
	signer := sshtest.NewSigner(tb)
	if opts.AuthorizedKey == nil {
		opts.AuthorizedKey = signer.PublicKey()
	}
	srv := sshtest.Start(tb, opts)
	return srv, Target{Name: "web-01", Address: srv.Addr(), User: "deploy", HostKey: srv.HostKey(), Signer: signer}
}

// waitDone waits for c's connection to end, failing the test after a
// generous bound (a hang is the bug, not slowness).
func waitDone(tb testing.TB, c *Client) {
	tb.Helper()
	select {
	case <-c.Done():
	case <-time.After(30 * time.Second):
		tb.Fatalf("connection to %s did not end", c.Target())
	}
}

// echoRoundTrip writes msg through conn and reads it back.
func echoRoundTrip(tb testing.TB, conn net.Conn, msg string) {
	tb.Helper()
	if _, err := io.WriteString(conn, msg); err != nil {
		tb.Fatalf("write through tunnel: %v", err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, got); err != nil {
		tb.Fatalf("read through tunnel: %v", err)
	}
	if string(got) != msg {
		tb.Fatalf("echo = %q, want %q", got, msg)
	}
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func otherKey(tb testing.TB) string {
	return sshtest.AuthorizedKey(sshtest.NewSigner(tb).PublicKey())
}

func currentUser(tb testing.TB) string {
	tb.Helper()
	u, err := user.Current()
	if err != nil {
		tb.Fatal(err)
	}
	return u.Username
}
