package hostchannel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/sshdial"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// execPlain runs the command on a plain SSH target (no host agent). Nothing
// on the host remembers it: an interrupted command's outcome is Unknown and
// Query cannot help (the catalog forces replay review for these targets).
func (c *Channel) execPlain(ctx context.Context, call engine.Call) engine.Attempt {
	t := call.Target
	log := c.log.With("execution_id", call.Execution.GetId(), "target", t.Name)
	argv, cwd, env, err := call.Tool.RenderCommand(call.Arguments)
	if err != nil {
		return engine.Attempt{Class: engine.NotSent, Reason: "command template: " + err.Error()}
	}
	timeout := commandTimeout(call)
	argv = wrapPlain(argv, cwd, env, timeout)
	dctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	sc, err := c.sshClient(dctx, t)
	cancel()
	if err != nil {
		return notConnected(err)
	}
	maxWait := c.cfg.MaxWait
	if timeout > 0 {
		maxWait = timeout + plainKillAfter + time.Minute
	}
	ectx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	res, err := sc.Exec(ectx, argv, nil)
	switch {
	case err == nil:
	case errors.Is(err, sshdial.ErrNotSent), errors.Is(err, sshdial.ErrBadCommand):
		return engine.Attempt{Class: engine.NotSent, Reason: err.Error()}
	default: // ErrOutcomeUnknown, a drop, or anything else after the send
		log.Warn("plain ssh command outcome unknown", "error", err)
		return engine.Attempt{Class: engine.Unknown, Reason: err.Error() +
			" (plain SSH keeps no marker: an operator decides what became of it)"}
	}
	outcome := recordv1.Outcome_OUTCOME_FAILED_AT_TARGET
	summary := fmt.Sprintf("exit status %d", res.ExitCode)
	switch {
	case res.Signal != "":
		summary = "killed by signal " + res.Signal
	case res.ExitCode == 0:
		outcome = recordv1.Outcome_OUTCOME_SUCCEEDED
	case timeout > 0 && (res.ExitCode == exitTimedOut || res.ExitCode == exitTimedOutKilled):
		summary = fmt.Sprintf("exit status %d: timed out after %s (timeout(1) stopped the command)", res.ExitCode, timeout)
	}
	body := append(append([]byte{}, res.Stdout...), res.Stderr...)
	total := res.StdoutBytes + res.StderrBytes
	truncated := res.StdoutTruncated || res.StderrTruncated || total > int64(c.cfg.OutputCap)
	return engine.Attempt{
		Class: engine.Observed, Outcome: outcome, Reason: summary,
		Result: &recordv1.Result{
			Answer: recordv1.AnswerKind_ANSWER_KIND_PROCESS, Exited: true, ExitCode: int32(res.ExitCode), Signal: res.Signal, Summary: summary,
			Body: capBytes(body, c.cfg.OutputCap), BodyTruncated: truncated,
		},
	}
}

// On a plain SSH target the command's timeout is enforced on the host by
// timeout(1) (GNU coreutils or BusyBox): it runs the command in its own
// process group, sends SIGTERM to the group when the time is up and SIGKILL
// plainKillAfter later, and exits 124 (137 after SIGKILL).
const (
	plainKillAfter     = 10 * time.Second
	exitTimedOut       = 124
	exitTimedOutKilled = 128 + 9
)

// wrapPlain applies the timeout, cwd and env to argv for a plain SSH exec,
// which has none of them: timeout(1) bounds the run, env(1) sets the
// variables and sh changes directory, with every value passed as its own
// argument (sshdial quotes each one), never spliced into shell syntax.
func wrapPlain(argv []string, cwd string, env map[string]string, timeout time.Duration) []string {
	var out []string
	if timeout > 0 {
		out = append(out, "timeout", "-k", seconds(plainKillAfter), seconds(timeout))
	}
	if len(env) > 0 {
		out = append(out, "env")
		for _, k := range slices.Sorted(maps.Keys(env)) {
			out = append(out, k+"="+env[k])
		}
	}
	if cwd != "" {
		out = append(out, "/bin/sh", "-c", `cd -- "$0" && exec "$@"`, cwd)
	}
	return append(out, argv...)
}

// seconds formats d for timeout(1), rounded up to whole seconds.
func seconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10) + "s"
}
