package shim

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/latchhq/latch/hostagent/execdir"
)

// Handle is the agent's side of one running shim.
type Handle struct {
	cmd    *exec.Cmd
	ch     *channel
	c      net.Conn
	exited chan struct{}
}

// Spawn starts a shim for spec in the execution directory dir and sends it
// the spec. The shim runs in its own session with stdio on dir/shim.log; the
// returned Handle reaps it.
func Spawn(dir string, spec Spec) (*Handle, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shim: socketpair: %w", err)
	}
	mine := os.NewFile(uintptr(fds[0]), "shim-control")
	theirs := os.NewFile(uintptr(fds[1]), "shim-control-child")
	defer theirs.Close()
	c, err := net.FileConn(mine)
	_ = mine.Close()
	if err != nil {
		return nil, fmt.Errorf("shim: control conn: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, execdir.LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("shim: open shim log: %w", err)
	}
	defer logf.Close()
	// /proc/self/exe rather than os.Executable(): it still works after the
	// binary on disk was replaced by an upgrade.
	cmd := exec.Command("/proc/self/exe", "shim", "--dir", dir)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("shim: start: %w", err)
	}
	h := &Handle{cmd: cmd, ch: newChannel(c), c: c, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // reap; the outcome is in the status file
		close(h.exited)
	}()
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := h.ch.send(message{Spec: &spec}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("shim: send spec: %w", err)
	}
	_ = c.SetWriteDeadline(time.Time{})
	return h, nil
}

// PID returns the shim's pid.
func (h *Handle) PID() int { return h.cmd.Process.Pid }

// AwaitStarted waits for the shim to report the command waiting at the gate.
func (h *Handle) AwaitStarted(timeout time.Duration) (Started, error) {
	_ = h.c.SetReadDeadline(time.Now().Add(timeout))
	defer func() { _ = h.c.SetReadDeadline(time.Time{}) }()
	m, err := h.ch.recv()
	switch {
	case err != nil:
		return Started{}, err
	case m.Error != "":
		return Started{}, fmt.Errorf("%w: %s", ErrNotStarted, m.Error)
	case m.Started == nil:
		return Started{}, ErrProtocol
	}
	return *m.Started, nil
}

// Open tells the shim to open the gate. Call it only after `running` is durable.
func (h *Handle) Open() error {
	_ = h.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return h.ch.send(message{Open: true})
}

// Abort tells the shim to close the gate: the command exits 125 unrun.
func (h *Handle) Abort(reason string) {
	_ = h.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_ = h.ch.send(message{Abort: reason})
}

// AwaitDone blocks until the shim reports the status file written (nil) or
// the channel closes without it (an error: read the status file to know more).
func (h *Handle) AwaitDone() error {
	m, err := h.ch.recv()
	if err != nil {
		return err
	}
	if !m.Done {
		return ErrProtocol
	}
	return nil
}

// Exited is closed when the shim process has exited and been reaped.
func (h *Handle) Exited() <-chan struct{} { return h.exited }

// Close closes the agent's end of the control channel.
func (h *Handle) Close() error { return h.c.Close() }
