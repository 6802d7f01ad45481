package shim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/latchhq/latch/hostagent/execdir"
	"github.com/latchhq/latch/hostagent/proc"
	"github.com/latchhq/latch/internal/redact"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

// Timeouts of the shim's side of the control protocol.
const (
	specTimeout = 30 * time.Second
	openTimeout = 2 * time.Minute
	// drainTimeout bounds how long output is read after the command exits
	// (a background descendant may hold the pipe open forever).
	drainTimeout = 2 * time.Second
	// killGrace separates SIGTERM and SIGKILL on a timeout.
	killGrace = 2 * time.Second
)

// Main is the body of the hidden `latch-hostagent shim --dir DIR` subcommand.
// fd 3 is the control channel. It returns the shim's exit code.
func Main(dir string, log hclog.Logger) int {
	if err := run(dir, log); err != nil {
		log.Error("shim failed", "dir", dir, "error", err)
		return 1
	}
	return 0
}

func run(dir string, log hclog.Logger) error {
	ctl := os.NewFile(3, "control")
	if ctl == nil {
		return errors.New("shim: fd 3 (control channel) is not open")
	}
	syscall.CloseOnExec(3)
	c, err := net.FileConn(ctl)
	_ = ctl.Close()
	if err != nil {
		return fmt.Errorf("shim: control channel: %w", err)
	}
	defer c.Close()
	ch := newChannel(c)

	if self, err := proc.Self(); err == nil {
		if err := execdir.WriteIdentity(dir, execdir.ShimFile, self, false); err != nil {
			log.Warn("cannot record shim identity", "error", err)
		}
	}

	_ = c.SetReadDeadline(time.Now().Add(specTimeout))
	msg, err := ch.recv()
	if err != nil || msg.Spec == nil {
		// The agent died before it sent the spec: nothing was started.
		return notStarted(dir, nil, fmt.Sprintf("no spec from the agent: %v", errOr(err, ErrProtocol)))
	}
	spec := msg.Spec
	log = log.With("execution_id", spec.ExecutionID)
	// The secret values live in this process's memory for the run only:
	// never in a file, a log line or the status file.
	red := spec.Redactor()

	out, err := os.OpenFile(filepath.Join(dir, execdir.OutputFile), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return notStarted(dir, ch, red.String(fmt.Sprintf("create output file: %v", err)))
	}
	defer out.Close()

	gateR, gateW, err := os.Pipe()
	if err != nil {
		return notStarted(dir, ch, red.String(fmt.Sprintf("gate pipe: %v", err)))
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return notStarted(dir, ch, red.String(fmt.Sprintf("output pipe: %v", err)))
	}
	cmd := exec.Command("/proc/self/exe", append([]string{"gate", "--"}, spec.Argv...)...)
	cmd.Dir = spec.Cwd
	cmd.Env = spec.Env
	cmd.Stdout = outW
	cmd.Stderr = outW
	cmd.ExtraFiles = []*os.File{gateR}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = gateR.Close()
		_ = gateW.Close()
		_ = outR.Close()
		_ = outW.Close()
		return notStarted(dir, ch, red.String(fmt.Sprintf("start command: %v", err)))
	}
	_ = gateR.Close()
	_ = outW.Close()
	pid := cmd.Process.Pid

	copied := make(chan copyResult, 1)
	go func() { copied <- copyCapped(out, outR, spec.OutputCap, red) }()

	opened := false
	var reason string
	id, err := proc.Of(pid)
	if err == nil {
		err = execdir.WriteIdentity(dir, execdir.CommandFile, id, true)
	}
	if err != nil {
		reason = fmt.Sprintf("identify command: %v", err)
	} else {
		testPause(log)
		err = ch.send(message{Started: &Started{PID: id.PID, StartTicks: id.StartTicks, BootID: id.BootID}})
		if err != nil {
			reason = fmt.Sprintf("agent unreachable before the gate opened: %v", err)
		} else {
			_ = c.SetReadDeadline(time.Now().Add(openTimeout))
			msg, err := ch.recv()
			switch {
			case err != nil:
				reason = fmt.Sprintf("agent gone before the gate opened: %v", err)
			case msg.Open:
				if _, err := gateW.Write([]byte{'g'}); err != nil {
					reason = fmt.Sprintf("open gate: %v", err)
				} else {
					opened = true
				}
			default:
				reason = "agent aborted: " + msg.Abort
			}
		}
	}
	_ = gateW.Close()

	var timedOut atomic.Bool
	if opened && spec.Timeout > 0 {
		timer := time.AfterFunc(spec.Timeout, func() {
			timedOut.Store(true)
			log.Warn("command timed out, killing its process group", "timeout", spec.Timeout)
			_ = unix.Kill(-pid, unix.SIGTERM)
			time.AfterFunc(killGrace, func() { _ = unix.Kill(-pid, unix.SIGKILL) })
		})
		defer timer.Stop()
	}
	waitErr := cmd.Wait()

	var res copyResult
	select {
	case res = <-copied:
	case <-time.After(drainTimeout):
		_ = outR.Close()
		res = <-copied
	}
	_ = outR.Close()
	if err := out.Sync(); err != nil {
		log.Warn("fsync output", "error", err)
	}

	status := &hostagentv1.Marker{
		ExecutionId:     spec.ExecutionID,
		OutputSize:      res.written,
		OutputTruncated: res.truncated,
		UpdatedUnixNano: time.Now().UnixNano(),
	}
	if !opened {
		status.State = hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED
		status.Reason = "gate never opened: " + reason
	} else {
		status.State = hostagentv1.MarkerState_MARKER_STATE_EXITED
		fillExit(status, cmd.ProcessState, waitErr)
		if timedOut.Load() {
			status.Reason = fmt.Sprintf("timed out after %s; process group killed", spec.Timeout)
		}
	}
	status.Reason = red.String(status.Reason)
	if err := execdir.WriteStatus(dir, status); err != nil {
		// Without a status file the outcome is unknown: the agent will say lost.
		return fmt.Errorf("shim: write status: %w", err)
	}
	log.Debug("status written", "state", status.GetState().String(), "exit_code", status.GetExitCode(), "signal", status.GetSignal())
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_ = ch.send(message{Done: true}) // the agent may be gone: the status file is the record
	return nil
}

func errOr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}

// notStarted records that nothing ran and tells the agent when it can.
func notStarted(dir string, ch *channel, reason string) error {
	status := &hostagentv1.Marker{
		State:           hostagentv1.MarkerState_MARKER_STATE_NOT_STARTED,
		Reason:          reason,
		UpdatedUnixNano: time.Now().UnixNano(),
	}
	werr := execdir.WriteStatus(dir, status)
	if ch != nil {
		_ = ch.send(message{Error: reason})
	}
	if werr != nil {
		return werr
	}
	return nil
}

func fillExit(m *hostagentv1.Marker, ps *os.ProcessState, waitErr error) {
	if ps == nil {
		m.ExitCode = -1
		m.Reason = fmt.Sprintf("wait: %v", waitErr)
		return
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		m.ExitCode = -1
		m.Signal = unix.SignalName(ws.Signal())
		if m.Signal == "" {
			m.Signal = fmt.Sprintf("signal %d", int(ws.Signal()))
		}
		return
	}
	m.ExitCode = int32(ps.ExitCode())
}

type copyResult struct {
	written   int64
	truncated bool
}

// copyCapped copies r to w through red until r ends, keeping at most limit
// bytes (of redacted output) and draining the rest so the command never
// blocks on a full pipe. A secret split over two reads is still redacted
// (red holds back a tail that may be the start of one); when the output was
// cut (the cap, or the pipe closed before EOF) a held-back start of a
// secret is dropped, never written.
func copyCapped(w io.Writer, r io.Reader, limit int64, red *redact.Redactor) copyResult {
	cw := &cappedWriter{w: w, limit: limit}
	rw := redact.NewWriter(cw, red)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if cw.res.written >= limit {
				cw.res.truncated = true // drain only: nothing more is kept
			} else {
				_, _ = rw.Write(buf[:n]) // cappedWriter never fails
			}
		}
		if err != nil {
			// What is held back is cut too when it does not fit under the
			// cap (the output is then truncated, and says so).
			held := rw.Held()
			cut := cw.res.truncated || !errors.Is(err, io.EOF) || int64(held) > limit-cw.res.written
			if cut && held > 0 {
				cw.res.truncated = true
			}
			_ = rw.Flush(cut)
			return cw.res
		}
	}
}

// cappedWriter writes at most limit bytes to w and counts what it kept. A
// failed write marks the output truncated; it never returns an error, so
// the command's output is drained to the end either way.
type cappedWriter struct {
	w     io.Writer
	limit int64
	res   copyResult
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	keep := int64(len(p))
	if room := c.limit - c.res.written; keep > room {
		keep = max(room, 0)
		c.res.truncated = true
	}
	if keep > 0 {
		if _, err := c.w.Write(p[:keep]); err != nil {
			c.res.truncated = true
		} else {
			c.res.written += keep
		}
	}
	return len(p), nil
}

// channel is one end of the control socketpair.
type channel struct {
	c   net.Conn
	mu  sync.Mutex
	enc *json.Encoder
	dec *json.Decoder
}

func newChannel(c net.Conn) *channel {
	return &channel{c: c, enc: json.NewEncoder(c), dec: json.NewDecoder(bufio.NewReader(c))}
}

func (ch *channel) send(m message) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if err := ch.enc.Encode(m); err != nil {
		return fmt.Errorf("shim: send: %w", err)
	}
	return nil
}

func (ch *channel) recv() (message, error) {
	var m message
	if err := ch.dec.Decode(&m); err != nil {
		if errors.Is(err, io.EOF) {
			return m, ErrShimGone
		}
		return m, fmt.Errorf("shim: receive: %w", err)
	}
	return m, nil
}
