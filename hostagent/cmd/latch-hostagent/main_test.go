package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/testbin"

	"github.com/latchhq/latch/hostagent/client"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// binPath is the latch-hostagent binary built once for all tests.
var binPath string

func TestMain(m *testing.M) {
	testbin.Main(m, []string{"github.com/latchhq/latch/hostagent/cmd/latch-hostagent"}, []*string{&binPath})
}

// agentProc is a real latch-hostagent serve process.
type agentProc struct {
	tb     testing.TB
	data   string
	socket string
	cmd    *exec.Cmd
	logBuf *testbin.Buffer
	client hostagentv1.HostAgentClient
	closer interface{ Close() error }
	done   chan struct{}
}

type agentOpts struct {
	data  string
	env   []string
	flags []string
}

// shortDir returns a short temporary directory (unix socket paths are
// limited to 108 bytes).
func shortDir(tb testing.TB) string {
	tb.Helper()
	d, err := os.MkdirTemp("", "lh")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func startAgent(tb testing.TB, o agentOpts) *agentProc {
	tb.Helper()
	if o.data == "" {
		o.data = filepath.Join(tb.TempDir(), "data")
	}
	socket := filepath.Join(shortDir(tb), "agent.sock")
	a := &agentProc{tb: tb, data: o.data, socket: socket, logBuf: &testbin.Buffer{}, done: make(chan struct{})}
	args := append([]string{"serve", "--data", o.data, "--socket", socket, "--log-level", "debug"}, o.flags...)
	a.cmd = exec.Command(binPath, args...)
	a.cmd.Env = append(os.Environ(), o.env...)
	a.cmd.Stderr = a.logBuf
	a.cmd.Stdout = a.logBuf
	if err := a.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { _ = a.cmd.Wait(); close(a.done) }()
	tb.Cleanup(func() {
		a.stop()
		if tb.Failed() {
			tb.Logf("agent log:\n%s", a.logBuf.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		cl, closer, err := client.Dial(ctx, socket)
		if err == nil {
			a.client, a.closer = cl, closer
			return a
		}
		select {
		case <-a.done:
			tb.Fatalf("agent exited before serving:\n%s", a.logBuf.String())
		case <-ctx.Done():
			tb.Fatalf("agent did not serve on %s: %v\n%s", socket, err, a.logBuf.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits (bounded), then SIGKILL.
func (a *agentProc) stop() {
	if a.closer != nil {
		_ = a.closer.Close()
		a.closer = nil
	}
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

// kill SIGKILLs the agent (its shims live on: they are in their own sessions).
func (a *agentProc) kill() {
	if a.closer != nil {
		_ = a.closer.Close()
		a.closer = nil
	}
	_ = a.cmd.Process.Kill()
	<-a.done
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func (a *agentProc) run(req *hostagentv1.RunRequest) *hostagentv1.RunResponse {
	a.tb.Helper()
	resp, err := a.client.Run(ctxT(a.tb), req)
	if err != nil {
		a.tb.Fatalf("Run(%s) = %v", req.GetExecutionId(), err)
	}
	return resp
}

// wait blocks until the marker is settled (bounded by 60s).
func (a *agentProc) wait(id string) *hostagentv1.Marker {
	a.tb.Helper()
	ctx := ctxT(a.tb)
	for range 10 {
		resp, err := a.client.Wait(ctx, &hostagentv1.WaitRequest{ExecutionId: id, TimeoutMs: 10_000})
		if err != nil {
			a.tb.Fatalf("Wait(%s) = %v", id, err)
		}
		if waitingState(resp.GetMarker().GetState()) {
			continue
		}
		return resp.GetMarker()
	}
	a.tb.Fatalf("Wait(%s): marker never settled", id)
	return nil
}

func waitingState(s hostagentv1.MarkerState) bool {
	return s == hostagentv1.MarkerState_MARKER_STATE_STARTING || s == hostagentv1.MarkerState_MARKER_STATE_RUNNING ||
		s == hostagentv1.MarkerState_MARKER_STATE_BEGUN
}

// eventually polls cond every 20ms for at most 30s.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for range 1500 {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("timed out waiting for %s", what)
}

func readLines(tb testing.TB, path string) []string {
	tb.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func appendCmd(file, line string) []string {
	return []string{"/bin/sh", "-c", `echo "` + line + `" >> "` + file + `"`}
}
