package sshdial

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/latchhq/latch/internal/shellword"
)

// ExecResult is what was observed of a command that ran to completion.
type ExecResult struct {
	// ExitCode is the exit status; -1 when the command died of a signal.
	ExitCode int
	// Signal names the signal ("TERM", "KILL", ...) when ExitCode is -1.
	Signal string
	// Stdout and Stderr hold at most Config.MaxOutput bytes each.
	Stdout, Stderr []byte
	// StdoutBytes and StderrBytes count everything the command wrote.
	StdoutBytes, StderrBytes int64
	// StdoutTruncated and StderrTruncated say the cap was hit.
	StdoutTruncated, StderrTruncated bool
}

// Exec runs argv on the host (for targets without a host agent) and waits
// for its exit status. Each element is quoted for a POSIX shell (the remote
// login shell runs the command line), so arguments never become shell
// syntax. stdin may be nil.
//
// A non-zero exit is an answer, not an error: err is nil and ExitCode says
// it. Errors wrap ErrNotSent when the command provably did not reach the
// host, ErrOutcomeUnknown when it may have run and no exit status was seen
// (the caller must not retry), and ErrBadCommand for an unusable argv.
//
// Without a PTY a remote command survives a dropped connection unless it
// writes to its stdout afterwards (then SIGPIPE kills it): Exec cannot
// tell which happened, which is why the host agent exists.
func (c *Client) Exec(ctx context.Context, argv []string, stdin io.Reader) (ExecResult, error) {
	cmd, err := ShellJoin(argv)
	if err != nil {
		return ExecResult{}, err
	}
	if err := c.Err(); err != nil {
		return ExecResult{}, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	if err := ctx.Err(); err != nil {
		return ExecResult{}, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	c.acquire()
	defer c.release()
	log := c.log.With("argv0", argv[0])

	// Session is not used: its Start folds "the server refused exec" and
	// "the connection broke while asking" into one untyped error, and that
	// difference is the difference between ErrNotSent and ErrOutcomeUnknown.
	ch, reqs, err := c.openSession(ctx)
	if err != nil {
		// No exec request was written: nothing can have run.
		return ExecResult{}, fmt.Errorf("%w: %s: opening a session: %w", ErrNotSent, c.target, c.cause(err))
	}
	defer ch.Close()

	exit := make(chan exitStatus, 1)
	go readExit(reqs, exit)

	// The request leaves in one packet; from here on it may have run.
	ok, err := sendExec(ctx, ch, cmd)
	if err != nil {
		return ExecResult{}, c.unknown("sending the command", err)
	}
	if !ok {
		return ExecResult{}, fmt.Errorf("%w: %s refused to run the command (exec request denied)", ErrNotSent, c.target)
	}
	log.Debug("command sent")

	var res ExecResult
	stdout := &capped{max: c.maxOut}
	stderr := &capped{max: c.maxOut}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(stdout, ch) }()
	go func() { defer wg.Done(); _, _ = io.Copy(stderr, ch.Stderr()) }()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(ch, stdin)
			_ = ch.CloseWrite()
		}()
	} else {
		_ = ch.CloseWrite()
	}
	outDone := make(chan struct{})
	go func() { wg.Wait(); close(outDone) }()

	var st exitStatus
	select {
	case st = <-exit:
	case <-ctx.Done():
		return ExecResult{}, c.unknown("waiting for the exit status", ctx.Err())
	}
	// Output ends with EOF before the channel closes; the reads finish on
	// their own once the server closes the channel.
	select {
	case <-outDone:
	case <-ctx.Done():
		return ExecResult{}, c.unknown("reading the output", ctx.Err())
	}
	if !st.seen {
		return ExecResult{}, c.unknown("waiting for the exit status", &ssh.ExitMissingError{})
	}
	res.ExitCode, res.Signal = st.code, st.signal
	res.Stdout, res.StdoutBytes, res.StdoutTruncated = stdout.buf, stdout.n, stdout.truncated
	res.Stderr, res.StderrBytes, res.StderrTruncated = stderr.buf, stderr.n, stderr.truncated
	log.Debug("command exited", "exit_code", res.ExitCode, "signal", res.Signal)
	return res, nil
}

// unknown builds an ErrOutcomeUnknown error, naming the connection's end
// when that is the cause.
func (c *Client) unknown(step string, err error) error {
	err = c.cause(err)
	c.log.Warn("command outcome unknown", "step", step, "error", err)
	return fmt.Errorf("%w: %s: %s: %w; the command may have run: do not retry, check the host", ErrOutcomeUnknown, c.target, step, err)
}

// cause prefers the connection's end reason over the error a call saw, and
// names a bare transport error as a lost connection (the watcher may not
// have recorded the end yet).
func (c *Client) cause(err error) error {
	if cerr := c.Err(); cerr != nil {
		return cerr
	}
	if isNetErr(err) {
		return fmt.Errorf("%w: %s: %w", ErrConnectionLost, c.target, err)
	}
	return err
}

// openSession opens a session channel, giving up when ctx ends (a channel
// that opens later is closed unused).
func (c *Client) openSession(ctx context.Context) (ssh.Channel, <-chan *ssh.Request, error) {
	type opened struct {
		ch   ssh.Channel
		reqs <-chan *ssh.Request
		err  error
	}
	done := make(chan opened, 1)
	go func() {
		ch, reqs, err := c.ssh.OpenChannel("session", nil)
		done <- opened{ch, reqs, err}
	}()
	select {
	case o := <-done:
		return o.ch, o.reqs, o.err
	case <-ctx.Done():
		go func() {
			if o := <-done; o.err == nil {
				_ = o.ch.Close()
				go ssh.DiscardRequests(o.reqs)
			}
		}()
		return nil, nil, ctx.Err()
	}
}

func sendExec(ctx context.Context, ch ssh.Channel, cmd string) (bool, error) {
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		ok, err := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{cmd}))
		done <- result{ok, err}
	}()
	select {
	case r := <-done:
		return r.ok, r.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

type exitStatus struct {
	seen   bool
	code   int
	signal string
}

// readExit collects exit-status / exit-signal (RFC 4254 §6.10) until the
// channel's requests end, then reports what it saw.
func readExit(reqs <-chan *ssh.Request, out chan<- exitStatus) {
	var st exitStatus
	for req := range reqs {
		switch req.Type {
		case "exit-status":
			var m struct{ Status uint32 }
			if ssh.Unmarshal(req.Payload, &m) == nil {
				st = exitStatus{seen: true, code: int(m.Status)}
			}
		case "exit-signal":
			var m struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}
			if ssh.Unmarshal(req.Payload, &m) == nil {
				st = exitStatus{seen: true, code: -1, signal: m.Signal}
			}
		}
		if req.WantReply {
			_ = req.Reply(false, nil)
		}
	}
	out <- st
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	max       int
	buf       []byte
	n         int64
	truncated bool
}

func (w *capped) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	room := max(w.max-len(w.buf), 0)
	if len(p) > room {
		w.truncated = true
	}
	w.buf = append(w.buf, p[:min(room, len(p))]...)
	return len(p), nil
}

// ShellJoin quotes argv for a POSIX shell (sh, bash, dash, ksh, zsh): the
// login shell sshd starts parses the result back into exactly argv. Words
// made only of safe characters stay bare; others are single-quoted, with
// each ' written as '\”. It refuses an empty argv, an empty program name
// and NUL bytes (no exec argument can hold one).
func ShellJoin(argv []string) (string, error) {
	if len(argv) == 0 || argv[0] == "" {
		return "", fmt.Errorf("%w: empty command", ErrBadCommand)
	}
	var b strings.Builder
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", fmt.Errorf("%w: argument %d contains a NUL byte", ErrBadCommand, i)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(ShellQuote(a))
	}
	return b.String(), nil
}

// ShellQuote quotes one word for a POSIX shell (shellword.Quote).
func ShellQuote(s string) string { return shellword.Quote(s) }
