package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

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
	serveBare := fs.String("serve-bare", "", "serve only the bare MCP server, for the demo target at this loopback URL, print its URL and run until stopped (latch bench --data runs one so, to measure its CPU apart)")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("bench takes no arguments (got %q)", pos)
	}
	if *serveBare != "" {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("bench --serve-bare: %w", err)
		}
		return bench.ServeBare(ctx, *serveBare, lis, env.Stdout)
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
		StartBare: startBareProcess,
	})
	if errors.Is(err, bench.ErrBadOption) {
		return usagef("%v", err)
	}
	if err != nil {
		return err
	}
	return b.Run(ctx)
}

// bareStartWait bounds how long the bare server's process has to print its
// URL.
const bareStartWait = 10 * time.Second

// startBareProcess is bench.Config.StartBare: this binary's `latch bench
// --serve-bare demoURL` in a process of its own, stopped by SIGINT (killed
// if it has not stopped 5 seconds later).
func startBareProcess(ctx context.Context, demoURL string) (string, int, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command(exe, "bench", "--serve-bare", demoURL) //nolint:gosec // this binary, with the URL it was given
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	exited := make(chan struct{})
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(l)
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case u := <-line:
		if u == "" {
			stop()
			return "", 0, nil, fmt.Errorf("%s bench --serve-bare printed no URL: %s", exe, strings.TrimSpace(stderr.String()))
		}
		return u, cmd.Process.Pid, stop, nil
	case <-time.After(bareStartWait):
		stop()
		return "", 0, nil, fmt.Errorf("%s bench --serve-bare printed no URL within %s", exe, bareStartWait)
	case <-ctx.Done():
		stop()
		return "", 0, nil, ctx.Err()
	}
}
