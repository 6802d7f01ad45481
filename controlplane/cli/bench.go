package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/latchhq/latch/controlplane/bench"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
)

// runBench is `latch bench`: its flags make a bench.Config, and the
// harness (controlplane/bench) measures and reports.
func runBench(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "bench", "bench [--concurrency N] [--count N] [--rounds N] [--data DIR] [--profile DIR] [flags]")
	data := fs.String("data", "", "data dir of a running latch dev to measure (default: start one in this process on a temp dir)")
	conc := fs.Int("concurrency", 1, fmt.Sprintf("calls in flight at once, 1-%d", bench.MaxConcurrency))
	count := fs.Int("count", bench.DefaultCount, fmt.Sprintf("calls per path and round, 1-%d", bench.MaxCount))
	rounds := fs.Int("rounds", 1, fmt.Sprintf("rounds of all paths, interleaved, 1-%d", bench.MaxRounds))
	profile := fs.String("profile", "", "write CPU and allocation profiles of this process per path and round into this directory")
	traced := fs.Bool("trace", false, "with --profile, also write block profiles and execution traces (they cost CPU themselves and skew the CPU profile)")
	maxDur := fs.Duration("max-duration", bench.DefaultDuration, fmt.Sprintf("stop each path's round after this long (at most %s)", bench.MaxDuration))
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("bench takes no arguments (got %q)", pos)
	}
	// Zero is a value the flags give, not "unset": New's defaults must
	// not turn --count 0 into the default count.
	switch {
	case *conc == 0:
		return usagef("--concurrency 0: must be 1-%d", bench.MaxConcurrency)
	case *count == 0:
		return usagef("--count 0: must be 1-%d", bench.MaxCount)
	case *rounds == 0:
		return usagef("--rounds 0: must be 1-%d", bench.MaxRounds)
	case *maxDur == 0:
		return usagef("--max-duration 0s: must be above 0 and at most %s", bench.MaxDuration)
	}
	b, err := bench.New(bench.Config{
		Out: env.Stdout, Data: *data, Concurrency: *conc, Count: *count, Rounds: *rounds,
		Profile: *profile, Trace: *traced, MaxDuration: *maxDur,
		StartDev: func(ctx context.Context, dir string, logs io.Writer) error {
			devEnv := &Env{Stdout: io.Discard, Stderr: logs, Getenv: func(string) string { return "" }}
			return runDev(ctx, devEnv, []string{"--data", dir, "--listen", "127.0.0.1:0", "--demo-listen", "127.0.0.1:0", "--ops-listen", "127.0.0.1:0", "--log-level", "warn"})
		},
		Dial: func(ctx context.Context, dir string) (controlplanev1.ControlPlaneClient, func(), error) {
			return (&target{data: dir}).dial(ctx)
		},
	})
	if errors.Is(err, bench.ErrBadOption) {
		return usagef("%v", err)
	}
	if err != nil {
		return err
	}
	return b.Run(ctx)
}
