// Package hostagenttest runs a real `latch-hostagent serve` process for
// tests: the host agent's own end-to-end tests and the control plane's host
// channel tests. Test code only.
package hostagenttest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/latchhq/latch/hostagent/client"
	"github.com/latchhq/latch/internal/testing/testbin"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// ShimPauseEnv, set in an agent's environment to a Go duration, makes each
// shim pause that long (at most a minute) with its command waiting at the gate
// before it tells the agent, so a test can kill a shim before the gate opens.
// Only binaries built by testbin.Main (with testbin.TestHooksTag) have the
// hook: hostagent/shim/testhook_on.go.
const ShimPauseEnv = "LATCH_HOSTAGENT_TEST_SHIM_PAUSE"

// Options says how to start an agent. Empty Data and Socket pick fresh ones.
type Options struct {
	Bin    string // the latch-hostagent binary (testbin.Main builds it)
	Data   string
	Socket string
	Env    []string // added to the environment
	Flags  []string // added after serve --data --socket
}

// Process is a running agent with a connected client. It is stopped when
// the test ends; its log is printed when the test failed.
type Process struct {
	TB     testing.TB
	Data   string
	Socket string
	Cmd    *exec.Cmd
	Log    *testbin.Buffer
	Client hostagentv1.HostAgentClient
	// Done is closed when the process has exited.
	Done   chan struct{}
	closer interface{ Close() error }
}

// ShortDir returns a short temporary directory: unix socket paths are
// limited to 108 bytes and t.TempDir paths grow with the test name.
func ShortDir(tb testing.TB) string {
	tb.Helper()
	d, err := os.MkdirTemp("", "ha")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// Start runs the agent and waits (bounded) until it serves.
func Start(tb testing.TB, o Options) *Process {
	tb.Helper()
	if o.Data == "" {
		o.Data = filepath.Join(tb.TempDir(), "data")
	}
	if o.Socket == "" {
		o.Socket = filepath.Join(ShortDir(tb), "agent.sock")
	}
	p := &Process{TB: tb, Data: o.Data, Socket: o.Socket, Log: &testbin.Buffer{}, Done: make(chan struct{})}
	args := append([]string{"serve", "--data", o.Data, "--socket", o.Socket, "--log-level", "debug"}, o.Flags...)
	p.Cmd = exec.Command(o.Bin, args...)
	p.Cmd.Env = append(os.Environ(), o.Env...)
	p.Cmd.Stdout, p.Cmd.Stderr = p.Log, p.Log
	if err := p.Cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { _ = p.Cmd.Wait(); close(p.Done) }()
	tb.Cleanup(func() {
		p.Stop()
		if tb.Failed() {
			tb.Logf("agent log:\n%s", p.Log.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		cl, closer, err := client.Dial(ctx, o.Socket)
		if err == nil {
			p.Client, p.closer = cl, closer
			return p
		}
		select {
		case <-p.Done:
			tb.Fatalf("agent exited before serving:\n%s", p.Log.String())
		case <-ctx.Done():
			tb.Fatalf("agent did not serve on %s: %v\n%s", o.Socket, err, p.Log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *Process) closeClient() {
	if p.closer != nil {
		_ = p.closer.Close()
		p.closer = nil
	}
}

// Stop sends SIGTERM and waits (bounded), then SIGKILL.
func (p *Process) Stop() {
	p.closeClient()
	select {
	case <-p.Done:
		return
	default:
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done:
	case <-time.After(10 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-p.Done
	}
}

// Kill SIGKILLs the agent; the commands it started live on (own sessions).
func (p *Process) Kill() {
	p.closeClient()
	_ = p.Cmd.Process.Kill()
	<-p.Done
}
