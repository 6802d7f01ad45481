// Package bench is the harness of latch bench: what a call costs on this
// machine on the direct, bare-MCP, durable and MCP paths against the demo
// target of a latch dev, with the durability floor of the data dir's disk.
// Only the command (controlplane/cli) imports it.
package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/devstack"
	"github.com/latchhq/latch/internal/loadgen"
	"github.com/latchhq/latch/internal/loopback"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Bounds of `latch bench`: it measures, it is not a load test.
const (
	DefaultCount     = 1000
	MaxCount         = 100_000
	MaxConcurrency   = 256
	DefaultDuration  = 2 * time.Minute
	MaxDuration      = 10 * time.Minute
	MaxRounds        = 10
	benchCallTimeout = 30 * time.Second
	benchTool        = "deploy_release"
)

// benchPath is one way of making the same deploy: op makes call i.
type benchPath struct {
	name, what string
	op         func(ctx context.Context, i int64) error
}

// ErrBadOption is returned by New for an option out of its bounds (the
// command reports it as a usage error).
var ErrBadOption = errors.New("bench: bad option")

// Config is what one run measures and where it writes its report.
type Config struct {
	// Out receives the report.
	Out io.Writer
	// Data is the data dir of a running latch dev to measure ("": start one
	// in this process with StartDev on a temp dir).
	Data string
	// Concurrency is the calls in flight at once (0: 1).
	Concurrency int
	// Count is the calls per path and round (0: DefaultCount).
	Count int
	// Rounds of all paths, interleaved (0: 1).
	Rounds int
	// Profile, when set, is the directory of this process's profiles per
	// path and round; Trace adds block profiles and execution traces.
	Profile string
	Trace   bool
	// MaxDuration stops each path's round after this long (0: DefaultDuration).
	MaxDuration time.Duration
	// StartDev runs `latch dev` in this process on data dir dir, on
	// loopback ports, logging to logs, until ctx ends. Required without Data.
	StartDev func(ctx context.Context, dir string, logs io.Writer) error
	// Dial is a client of the control plane serving data dir dir.
	Dial func(ctx context.Context, dir string) (controlplanev1.ControlPlaneClient, func(), error)
	// StartBare, optional, runs the bare MCP server for the demo target at
	// demoURL in a process of its own (ServeBare) until stop: its URL and
	// pid. With Data, the bare path then runs there, and the report gives
	// each server's CPU per call apart from the clients'. Without it, or
	// without Data, the bare server runs in this process.
	StartBare func(ctx context.Context, demoURL string) (url string, pid int, stop func(), err error)
}

// Bench is one validated run of the harness.
type Bench struct{ cfg Config }

// New fills cfg's defaults and validates it; an option out of bounds is an
// ErrBadOption.
func New(cfg Config) (*Bench, error) {
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 1
	}
	if cfg.Count == 0 {
		cfg.Count = DefaultCount
	}
	if cfg.Rounds == 0 {
		cfg.Rounds = 1
	}
	if cfg.MaxDuration == 0 {
		cfg.MaxDuration = DefaultDuration
	}
	switch {
	case cfg.Concurrency < 1 || cfg.Concurrency > MaxConcurrency:
		return nil, fmt.Errorf("%w: --concurrency %d: must be 1-%d", ErrBadOption, cfg.Concurrency, MaxConcurrency)
	case cfg.Count < 1 || cfg.Count > MaxCount:
		return nil, fmt.Errorf("%w: --count %d: must be 1-%d", ErrBadOption, cfg.Count, MaxCount)
	case cfg.Rounds < 1 || cfg.Rounds > MaxRounds:
		return nil, fmt.Errorf("%w: --rounds %d: must be 1-%d", ErrBadOption, cfg.Rounds, MaxRounds)
	case cfg.MaxDuration <= 0 || cfg.MaxDuration > MaxDuration:
		return nil, fmt.Errorf("%w: --max-duration %s: must be above 0 and at most %s", ErrBadOption, cfg.MaxDuration, MaxDuration)
	case cfg.Trace && cfg.Profile == "":
		return nil, fmt.Errorf("%w: --trace needs --profile DIR (where to write the traces)", ErrBadOption)
	case cfg.Out == nil || cfg.Dial == nil || (cfg.Data == "" && cfg.StartDev == nil):
		return nil, errors.New("bench: Out, Dial and (without Data) StartDev are required")
	}
	return &Bench{cfg: cfg}, nil
}

// Run measures what a call costs on this machine: the same deploy to
// the demo target made directly (one HTTP POST with an idempotency key),
// through a bare go-sdk MCP server in this process whose tool makes that POST
// (MCP, no durability, no dedupe), on the durable path (the control plane's
// Submit, waiting until it is completed: journaled, dispatched once, result
// stored, each write synced) and on the MCP path (a go-sdk client through
// the MCP front), in one run, with rates, p50/p99 and the ratio to the
// direct call, then the MCP path against the bare MCP server.
//
// --rounds N runs the four paths N times, interleaved (direct, bare, durable,
// mcp, direct, ...), and reports each path over all its rounds, so a noisy
// neighbour spreads over every path instead of one. --profile DIR writes CPU
// and block profiles and an execution trace of this process for each path
// and round (with its own
// `latch dev` that is the whole stack: front, control plane, demo target;
// the block profile is cumulative, see runBenchPath).
//
// Without --data it starts its own `latch dev` in this process on a fresh
// temp data dir (removed afterwards) on loopback ports; with --data it
// measures the `latch dev` running on that dir (its dev.json). Either way
// every call is a new execution, and only loopback targets are accepted.
func (bn *Bench) Run(ctx context.Context) error {
	cfg := bn.cfg
	out := cfg.Out
	if cfg.Profile != "" {
		if err := os.MkdirAll(cfg.Profile, 0o755); err != nil { //nolint:gosec // profiles are the user's own output, read with go tool pprof like any other
			return fmt.Errorf("bench: --profile directory: %w", err)
		}
	}

	where := "a `latch dev` started in this process on a temp data dir"
	dir := cfg.Data
	if dir == "" {
		var stop func()
		var err error
		if dir, stop, err = startBenchDev(ctx, cfg.StartDev); err != nil {
			return err
		}
		defer stop()
	} else {
		where = "the `latch dev` running on " + dir
	}
	info, err := readBenchInfo(dir)
	if err != nil {
		return err
	}
	clock := cpuClock{store: newWritesMeter(info.OpsURL)}
	if cfg.Data != "" {
		clock.devPID = info.PID
	}
	cp, closeFn, err := cfg.Dial(ctx, dir)
	if err != nil {
		return err
	}
	defer closeFn()
	rcpts := newReceiptStats()
	startBare := func(context.Context) (string, func(), error) { return bareMCPServer(info.DemoURL, cfg.Concurrency) }
	if cfg.Data != "" && cfg.StartBare != nil {
		startBare = func(ctx context.Context) (string, func(), error) {
			u, pid, stop, err := cfg.StartBare(ctx, info.DemoURL)
			if err != nil {
				return "", nil, fmt.Errorf("bench: the bare MCP server's process: %w", err)
			}
			if err := loopbackURL("bare MCP server", u); err != nil {
				stop()
				return "", nil, err
			}
			clock.barePID = pid
			return u, stop, nil
		}
	}
	paths, closePaths, err := benchPaths(ctx, info, cp, cfg.Concurrency, rcpts, startBare)
	if err != nil {
		return err
	}
	defer closePaths()

	// A data dir this user cannot write to (another user's latch dev) only
	// costs the floor lines.
	floor, ferr := measureFloor(ctx, dir)
	if ctx.Err() != nil {
		return ctx.Err()
	}

	fmt.Fprintf(out, "latch bench: %d %s calls per path and round, %d round(s) interleaved, at concurrency %d, against %s\n", cfg.Count, benchTool, cfg.Rounds, cfg.Concurrency, where)
	fmt.Fprintf(out, "demo target %s, MCP front %s; every call is a new execution\n\n", info.DemoURL, info.MCPURL)
	results := make([][]loadgen.Result, len(paths))
	cpus := make([]benchCPU, len(paths))
	roundsOf := make(map[string][]pathRound, len(paths)) // each round apart, for the per-round lines
	for round := 1; round <= cfg.Rounds; round++ {
		for k, p := range paths {
			res, cpu, err := runBenchPath(ctx, p, clock, cfg.Concurrency, cfg.Count, cfg.MaxDuration, benchProfile{dir: cfg.Profile, trace: cfg.Trace}, round, cfg.Rounds)
			if err != nil {
				return fmt.Errorf("%s path: %w", p.name, err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			results[k] = append(results[k], res)
			roundsOf[p.name] = append(roundsOf[p.name], pathRound{res: res, cpu: cpu})
			if round == 1 {
				cpus[k] = cpu
			} else {
				cpus[k] = cpus[k].add(cpu)
			}
		}
	}
	split := clock.devPID > 0 && cpus[0].devOK
	bareApart := split && clock.barePID > 0 && cpus[0].bareOK
	merged := make(map[string]loadgen.Result, len(paths))
	cpuOf := make(map[string]benchCPU, len(paths))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "path\tcalls\tcalls/s\tp50\tp99\trate vs direct\tp50 over direct\tCPU/call\t"
	if split {
		head += "bench CPU/call\tdev CPU/call\t"
	}
	if bareApart {
		head += "bare CPU/call\t"
	}
	fmt.Fprintln(tw, head)
	for k, p := range paths {
		res := loadgen.Merge(results[k]...)
		merged[p.name], cpuOf[p.name] = res, cpus[k]
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t", p.name, benchCalls(res), res.Rate(), ms(res.Percentile(0.5)), ms(res.Percentile(0.99)),
			ratio(res, merged["direct"]), overP50(res, merged["direct"], k == 0), perCall(cpus[k].total(), res.Ops))
		if split {
			fmt.Fprintf(tw, "%s\t%s\t", perCall(cpus[k].self, res.Ops), perCall(cpus[k].dev, res.Ops))
		}
		if bareApart {
			fmt.Fprintf(tw, "%s\t", perCall(cpus[k].bare, res.Ops))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(out)
	for _, p := range paths {
		fmt.Fprintf(out, "  %-8s %s\n", p.name, p.what)
	}
	switch {
	case bareApart:
		fmt.Fprintf(out, "  CPU/call is user+system time over the calls made of this process (bench: the clients), of the `latch dev` process %d (dev: front, control plane, demo target) and of the bare MCP server's process %d (bare).\n", clock.devPID, clock.barePID)
	case split:
		fmt.Fprintf(out, "  CPU/call is user+system time of this process (bench: the clients and the bare server) and of the `latch dev` process %d (dev: front, control plane, demo target) over the calls made.\n", clock.devPID)
	case clock.devPID > 0 || cfg.Data != "":
		fmt.Fprintln(out, "  CPU/call is user+system time of this process only: the `latch dev` process's could not be read (no pid in its dev.json, or no /proc).")
	default:
		fmt.Fprintln(out, "  CPU/call is user+system time of this process over the calls made: clients, bare server and the whole `latch dev` stack run in it.")
	}
	m, b := merged["mcp"], merged["bare"]
	fmt.Fprintf(out, "\nThe price of exactly-once (mcp against bare): p50 %s, rate %s, CPU/call %s.\n", overP50(m, b, false), ratio(m, b), cpuRatio(cpuOf["mcp"], m, cpuOf["bare"], b))
	if bareApart {
		printServerCPU(out, cpuOf["mcp"], m, cpuOf["bare"], b)
	}
	rcpts.print(out, merged["receipt"], cpuOf["receipt"], merged["durable"], cpuOf["durable"])
	printWrites(out, clock.store, []string{"durable", "receipt", "mcp"}, merged, cpuOf)
	if ferr != nil {
		fmt.Fprintf(out, "Durability floor not measured: %v (it needs to write a temporary directory in the data dir).\n", ferr)
	} else {
		printFloor(out, floor, merged, cfg.Concurrency)
	}
	if mc, bc := cpuOf["mcp"].total(), cpuOf["bare"].total(); mc > 0 && bc > 0 && m.Ops > 0 && b.Ops > 0 {
		n := runtime.NumCPU()
		fmt.Fprintf(out, "CPU-bound, %d cores run at most %.0f mcp and %.0f bare calls/s (cores / CPU per call, if nothing else ran).\n",
			n, float64(n)/(mc.Seconds()/float64(m.Ops)), float64(n)/(bc.Seconds()/float64(b.Ops)))
	}
	if cfg.Rounds > 1 {
		fmt.Fprintln(out, "Per round (calls/s):")
		for k, p := range paths {
			fmt.Fprintf(out, "  %-8s", p.name)
			for _, r := range results[k] {
				fmt.Fprintf(out, " %9.1f", r.Rate())
			}
			fmt.Fprintln(out)
		}
		if bareApart {
			printServerRounds(out, roundsOf["mcp"], roundsOf["bare"])
		}
	}
	if cfg.Profile != "" {
		fmt.Fprintf(out, "Profiles in %s (go tool pprof FILE).\n", cfg.Profile)
	}
	fmt.Fprintln(out, "Ratios are of this run only; compare runs of one machine, not machines.")
	return nil
}

// benchProfile says what runBenchPath profiles: nothing when dir is "".
type benchProfile struct {
	dir   string
	trace bool
}

// runBenchPath runs one round of one path, profiled when prof says so, and
// returns what it measured with the CPU the processes spent meanwhile.
func runBenchPath(ctx context.Context, p benchPath, clock cpuClock, conc, count int, maxDur time.Duration, prof benchProfile, round, rounds int) (loadgen.Result, benchCPU, error) {
	pctx, cancel := context.WithTimeout(ctx, maxDur)
	defer cancel()
	// Each round's calls are numbered after the last round's, so they are
	// new intents too (the same numbers would attach).
	offset := int64(round-1) * int64(count)
	op := func(ctx context.Context, i int64) error { return p.op(ctx, offset+i) }
	run := func() (loadgen.Result, benchCPU, error) {
		w := clock.store.read(ctx)
		before := clock.read()
		res, err := loadgen.Run(pctx, conc, int64(count), op)
		spent := clock.read().since(before)
		spent.writes = clock.store.read(ctx).since(w)
		return res, spent, err
	}
	if prof.dir == "" {
		return run()
	}
	name := p.name
	if rounds > 1 {
		name = fmt.Sprintf("%s-r%d", p.name, round)
	}
	var res loadgen.Result
	var cpu benchCPU
	err := profileRound(prof, name, func() error {
		var err error
		res, cpu, err = run()
		return err
	})
	return res, cpu, err
}

// profileRound runs round under a CPU profile (and, with prof.trace, an
// execution trace and the block profiler) and writes them with the
// allocations it made into prof.dir, named after name.
func profileRound(prof benchProfile, name string, round func() error) error {
	path := func(kind, ext string) string { return filepath.Join(prof.dir, kind+"-"+name+ext) }
	cpu, err := os.Create(path("cpu", ".pprof"))
	if err != nil {
		return fmt.Errorf("bench: profile: %w", err)
	}
	defer cpu.Close()
	// The allocation profile counts from the start of the process: the
	// one before the round is written too, so the round's own
	// allocations are go tool pprof -sample_index=alloc_space -base
	// allocs-NAME.before.pprof allocs-NAME.pprof.
	runtime.GC()
	if err := writeProfile("allocs", path("allocs", ".before.pprof")); err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		return fmt.Errorf("bench: CPU profile: %w (is another profile running?)", err)
	}
	if prof.trace {
		tf, err := os.Create(path("trace", ".out"))
		if err != nil {
			pprof.StopCPUProfile()
			return fmt.Errorf("bench: trace: %w", err)
		}
		defer tf.Close()
		if err := trace.Start(tf); err != nil {
			pprof.StopCPUProfile()
			return fmt.Errorf("bench: trace: %w", err)
		}
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	}
	err = round()
	if prof.trace {
		trace.Stop()
	}
	pprof.StopCPUProfile()
	runtime.GC() // the allocation profile is as of the last GC
	ferr := writeProfile("allocs", path("allocs", ".pprof"))
	if prof.trace {
		// The block profile cannot be reset: each file holds every path
		// before it too (go tool pprof -base PREVIOUS FILE shows one path).
		if berr := writeProfile("block", path("block", ".pprof")); ferr == nil {
			ferr = berr
		}
		runtime.SetBlockProfileRate(0)
	}
	if err == nil {
		err = ferr
	}
	return err
}

func writeProfile(kind, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("bench: %s profile: %w", kind, err)
	}
	if err := pprof.Lookup(kind).WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("bench: %s profile %s: %w", kind, file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench: %s profile %s: %w", kind, file, err)
	}
	return nil
}

func benchCalls(r loadgen.Result) string {
	n := fmt.Sprint(r.Ops)
	if r.Stopped {
		n += " (stopped at --max-duration)"
	}
	return n
}

// ratio is r's rate over base's, "1.00×" for base itself.
func ratio(r, base loadgen.Result) string {
	if base.Rate() <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", r.Rate()/base.Rate())
}

// overP50 is r's p50 minus base's, signed; "—" for base itself.
func overP50(r, base loadgen.Result, self bool) string {
	if self || base.Ops == 0 {
		return "—"
	}
	return signedMs(r.Percentile(0.5) - base.Percentile(0.5))
}

// cpuRatio is "A against B (R×)", a's CPU per call against b's.
func cpuRatio(a benchCPU, ar loadgen.Result, b benchCPU, br loadgen.Result) string {
	if ar.Ops == 0 || br.Ops == 0 || b.total() <= 0 {
		return "—"
	}
	ap := a.total().Seconds() / float64(ar.Ops)
	bp := b.total().Seconds() / float64(br.Ops)
	return fmt.Sprintf("%s against %s (%.2f×)", perCall(a.total(), ar.Ops), perCall(b.total(), br.Ops), ap/bp)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

// signedMs is ms with its sign: "+1.20ms", "-0.10ms".
func signedMs(d time.Duration) string {
	if d < 0 {
		return "-" + ms(-d)
	}
	return "+" + ms(d)
}

// startBenchDev runs `latch dev` in this process on a fresh temp data dir
// and loopback ports until stop is called, and returns the data dir once
// its dev.json exists.
func startBenchDev(ctx context.Context, startDev func(context.Context, string, io.Writer) error) (string, func(), error) {
	dir, err := os.MkdirTemp("", "latch-bench-")
	if err != nil {
		return "", nil, fmt.Errorf("bench: temp data dir: %w", err)
	}
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	logs := &lockedWriter{w: &bytes.Buffer{}}
	go func() {
		done <- startDev(dctx, dir, logs)
	}()
	stop := func() {
		cancel()
		<-done
		_ = os.RemoveAll(dir)
	}
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(datadir.DevInfo(dir)); err == nil {
			return dir, stop, nil
		}
		select {
		case err := <-done:
			done <- err
			stop()
			return "", nil, fmt.Errorf("bench: the in-process `latch dev` stopped before serving: %w\n%s", err, logs.String())
		case <-deadline.C:
			stop()
			return "", nil, errors.New("bench: the in-process `latch dev` did not serve within 30s")
		case <-tick.C:
		}
	}
}

// lockedWriter serialises writes of concurrent loggers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.(*bytes.Buffer).String()
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// readBenchInfo reads dev.json of dir and refuses targets off this machine.
func readBenchInfo(dir string) (devstack.Info, error) {
	var info devstack.Info
	raw, err := os.ReadFile(datadir.DevInfo(dir))
	if err != nil {
		return info, fmt.Errorf("no `latch dev` runs with data dir %s (%w): start `latch dev --data %s`, or run `latch bench` without --data to start its own", dir, err, dir)
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return info, fmt.Errorf("%s: %w", datadir.DevInfo(dir), err)
	}
	for _, u := range []struct{ name, raw string }{{"MCP front", info.MCPURL}, {"demo target", info.DemoURL}} {
		if err := loopbackURL(u.name, u.raw); err != nil {
			return info, fmt.Errorf("%w (in %s)", err, datadir.DevInfo(dir))
		}
	}
	return info, nil
}

// loopbackURL refuses a URL that is not one, or whose host is not on
// loopback: latch bench makes thousands of real calls.
func loopbackURL(name, raw string) error {
	p, err := url.Parse(raw)
	if err != nil || p.Hostname() == "" {
		return fmt.Errorf("bench: %s address %q is not a URL", name, raw)
	}
	if !loopback.Host(p.Hostname()) {
		return fmt.Errorf("bench: refusing to measure %s at %s: latch bench only calls loopback targets (it makes thousands of real calls)", name, raw)
	}
	return nil
}

// benchPaths builds the four paths; every call i deploys a version unique
// to this run, so each is a new intent.
// startBare serves the bare MCP server and returns its URL and how to stop
// it.
func benchPaths(ctx context.Context, info devstack.Info, cp controlplanev1.ControlPlaneClient, conc int, rcpts *receiptStats,
	startBare func(context.Context) (string, func(), error)) ([]benchPath, func(), error) {
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	run := hex.EncodeToString(nonce[:])
	version := func(path string, i int64) string { return fmt.Sprintf("bench-%s-%s-%d", run, path, i) }
	hc := benchClient(conc)

	direct := func(ctx context.Context, i int64) error { return postRelease(ctx, hc, info.DemoURL, version("d", i)) }

	checkDurable := func(i int64, resp *controlplanev1.SubmitResponse) error {
		if d := resp.GetDisposition(); d != recordv1.Disposition_DISPOSITION_NEW {
			return fmt.Errorf("call %d was not a new execution (%s of %s): every bench call must be a new intent", i, d, resp.GetExecution().GetId())
		}
		if s := resp.GetExecution().GetState(); s != recordv1.State_STATE_COMPLETED {
			return fmt.Errorf("execution %s ended %s, not completed", resp.GetExecution().GetId(), s)
		}
		return nil
	}

	durableAs := func(path string, receipt bool) func(ctx context.Context, i int64) error {
		return func(ctx context.Context, i int64) error {
			args := fmt.Sprintf(`{"service":"bench","version":%q}`, version(path, i))
			resp, err := cp.Submit(ctx, &controlplanev1.SubmitRequest{Actor: devstack.Actor, Tool: benchTool, Arguments: []byte(args), WaitMs: benchCallTimeout.Milliseconds(),
				Receipt: receipt})
			if err != nil {
				return err
			}
			if receipt && resp.GetReceipt() == nil {
				return fmt.Errorf("execution %s was answered without the receipt asked for", resp.GetExecution().GetId())
			}
			rcpts.observe(resp)
			return checkDurable(i, resp)
		}
	}
	durable, withReceipt := durableAs("s", false), durableAs("r", true)
	// One MCP session per worker, as concurrent agents would have.
	sessions := make(chan *mcp.ClientSession, conc)
	var closeAll func()
	closeAll = func() {
		close(sessions)
		for s := range sessions {
			_ = s.Close()
		}
	}
	// Each MCP client keeps a connection per worker alive, as the front's
	// and the bare server's own clients do (http.DefaultTransport keeps 2
	// per host: at higher concurrency most calls would dial a connection).
	mhc := &http.Client{Transport: info.Bearer(benchTransport(conc)), Timeout: benchCallTimeout}
	for range conc {
		client := mcp.NewClient(&mcp.Implementation{Name: "latch-bench", Version: "1"}, nil)
		s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: info.MCPURL, HTTPClient: mhc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("bench: connect to the MCP front at %s: %w", info.MCPURL, err)
		}
		sessions <- s
	}
	viaMCP := callTools(sessions, "m", version, true)

	// The bare MCP server: the same tool, whose handler makes the direct
	// call (one POST, a key of its own), in this process or in its own.
	bareURL, closeBare, err := startBare(ctx)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	bareSessions := make(chan *mcp.ClientSession, conc)
	closeAll = func() {
		close(sessions)
		for s := range sessions {
			_ = s.Close()
		}
		close(bareSessions)
		for s := range bareSessions {
			_ = s.Close()
		}
		closeBare()
	}
	bhc := benchClient(conc)
	for range conc {
		client := mcp.NewClient(&mcp.Implementation{Name: "latch-bench", Version: "1"}, nil)
		s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: bareURL, HTTPClient: bhc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("bench: connect to the bare MCP server at %s: %w", bareURL, err)
		}
		bareSessions <- s
	}
	viaBare := callTools(bareSessions, "b", version, false)
	return []benchPath{
		{"direct", "one HTTP POST to the demo target with an Idempotency-Key (no durability)", direct},
		{"bare", "tools/call to a bare go-sdk MCP server whose tool makes the direct POST (MCP, no durability, no dedupe)", viaBare},
		{"durable", "control plane Submit (wait_ms) until completed: journaled, dispatched once, result stored, writes synced", durable},
		{"receipt", "the durable path asking for the execution's receipt (record, inclusion proof, signed checkpoint)", withReceipt},
		{"mcp", "tools/call through the MCP front (go-sdk client, bearer token): the durable path plus MCP", viaMCP},
	}, closeAll, nil
}

// benchClient is the clients' HTTP client: conc connections kept alive per
// host, each call bounded.
func benchClient(conc int) *http.Client {
	return &http.Client{Transport: benchTransport(conc), Timeout: benchCallTimeout}
}

// benchTransport keeps conc connections alive per host.
func benchTransport(conc int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = conc, conc
	return t
}

// callTools makes call i of a path through one of the sessions (one per
// worker, as concurrent agents would have).
// With wantNew, the answer must say it made a new execution (the front's
// structuredContent disposition).
func callTools(sessions chan *mcp.ClientSession, path string, version func(string, int64) string, wantNew bool) func(context.Context, int64) error {
	return func(ctx context.Context, i int64) error {
		s := <-sessions
		defer func() { sessions <- s }()
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: benchTool, Arguments: map[string]any{"service": "bench", "version": version(path, i)}})
		if err != nil {
			return err
		}
		if res.IsError {
			b, _ := json.Marshal(res.Content)
			return fmt.Errorf("tool error: %s", b)
		}
		if sc, _ := res.StructuredContent.(map[string]any); wantNew && sc["disposition"] != "new" {
			return fmt.Errorf("call %d was not a new execution (disposition %v of %v): every bench call must be a new intent", i, sc["disposition"], sc["execution_id"])
		}
		return nil
	}
}
