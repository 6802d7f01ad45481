package hostchannel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
	argv = wrapPlain(argv, cwd, env)
	dctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	sc, err := c.sshClient(dctx, t)
	cancel()
	if err != nil {
		return engine.Attempt{Class: engine.NotSent, Reason: err.Error()}
	}
	maxWait := c.cfg.MaxWait
	if d := commandTimeout(call); d > 0 {
		maxWait = d + time.Minute
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
	}
	body := append(append([]byte{}, res.Stdout...), res.Stderr...)
	total := res.StdoutBytes + res.StderrBytes
	truncated := res.StdoutTruncated || res.StderrTruncated || total > int64(c.cfg.OutputCap)
	return engine.Attempt{
		Class: engine.Observed, Outcome: outcome, Reason: summary,
		Result: &recordv1.Result{
			ExitCode: int32(res.ExitCode), Signal: res.Signal, Summary: summary,
			Body: capBytes(body, c.cfg.OutputCap), BodyTruncated: truncated,
		},
	}
}

// wrapPlain applies cwd and env to argv for a plain SSH exec, which has
// neither: env(1) sets the variables and sh changes directory, with every
// value passed as its own argument (sshdial quotes each one), never spliced
// into shell syntax.
func wrapPlain(argv []string, cwd string, env map[string]string) []string {
	if cwd == "" && len(env) == 0 {
		return argv
	}
	var out []string
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
