package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"
)

// FrontURL matches the line latch-mcp logs when it serves, with its MCP
// URL as the first submatch (it serves on a free loopback port given
// --listen 127.0.0.1:0).
var FrontURL = regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+/mcp)`)

// Proc is one process a test started: its output goes to a log file, it
// is waited on exactly once, and it is stopped by its PID, never by name.
type Proc struct {
	Name string
	Log  string // the file its stdout and stderr go to
	cmd  *exec.Cmd
	done chan struct{}
	// Started is when Start returned.
	Started time.Time
}

// StartProc runs bin with args, appending its output to logPath, with env
// added to this process's environment.
func StartProc(bin string, args []string, logPath string, env ...string) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	p := &Proc{Name: filepath.Base(bin), Log: logPath, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p.Started = time.Now()
	go func() { _ = p.cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

// PID is the process's id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and been waited on.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitCode is the process's exit code once it has exited (-1 when killed
// by a signal or still running).
func (p *Proc) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Kill SIGKILLs the process and waits for it.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM, waits up to 10s, then SIGKILLs.
func (p *Proc) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.Kill()
	}
}

// ReadLog returns what the process has logged so far.
func (p *Proc) ReadLog() string {
	b, _ := os.ReadFile(p.Log)
	return string(b)
}

// WaitLog polls the process's log every 20ms until re matches and returns
// the match's submatches (the whole match first). It fails when the
// process exits first or after bound.
func (p *Proc) WaitLog(re *regexp.Regexp, bound time.Duration) ([]string, error) {
	deadline := time.Now().Add(bound)
	for {
		exited := p.Exited() // before reading: what it logged before exiting is read
		log := p.ReadLog()
		if m := re.FindStringSubmatch(log); m != nil {
			return m, nil
		}
		if exited {
			return nil, fmt.Errorf("%s exited (code %d) before logging %q:\n%s", p.Name, p.ExitCode(), re, log)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s did not log %q within %s; see %s", p.Name, re, bound, p.Log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
