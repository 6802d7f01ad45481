package sim

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/oklog/ulid/v2"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/tools"
)

// catalog is the simulated world's: one tool per target semantics (an
// upstream MCP server's tool among them), and a review tool, all waiting
// for their outcome until it is resolved.
const catalog = `
targets:
  keyed:
    channel: http
    base_url: http://127.0.0.1:1
    allow_private: true
    idempotency_header: Idempotency-Key
    status: {method: GET, path: "/by-key/{execution_id}"}
    timeout: 10s
    settle: 5s
  ledger:
    channel: http
    base_url: http://127.0.0.1:1
    allow_private: true
    status: {path: "/entries/{execution_id}"}
    timeout: 10s
    settle: 20s
  host: {channel: local, hostagent_socket: /run/latch-sim.sock}
upstreams:
  tracker: {transport: http, url: "http://127.0.0.1:1/mcp", allow_private: true, timeout: 10s}
tools:
  tracker.open_ticket:
    description: Open a ticket (an upstream MCP server that runs calls as tasks; recovered by tasks/get).
    upstream: tracker
    tool: open_ticket
    replay: status_query
    attach_window: until_resolved
  deploy:
    description: Deploy (honours the key; re-sent by recovery).
    input_schema: {type: object, required: [ref], properties: {ref: {type: string}}}
    target: keyed
    request: {method: POST, path: /deploy, body: {ref: "{{ref}}"}}
    replay: idempotency_key
    attach_window: until_resolved
  transfer:
    description: Transfer (not deduplicated; recovered by status).
    input_schema: {type: object, required: [ref], properties: {ref: {type: string}}}
    target: ledger
    request: {method: POST, path: /transfers, body: {ref: "{{ref}}", client_ref: "{{execution_id}}"}}
    replay: status_query
    attach_window: until_resolved
  charge:
    description: Charge (an unknown outcome goes to review).
    input_schema: {type: object, required: [ref], properties: {ref: {type: string}}}
    target: ledger
    request: {method: POST, path: /charges, body: {ref: "{{ref}}", client_ref: "{{execution_id}}"}}
    replay: review
    attach_window: until_resolved
  migrate:
    description: Migrate on the host (markers).
    input_schema: {type: object, required: [ref], properties: {ref: {type: string}}}
    target: host
    command: [/usr/bin/true, "--ref={{ref}}"]
    replay: status_query
    attach_window: until_resolved
`

var (
	simCatalog *tools.Catalog
	simFP      *fingerprint.Fingerprinter
)

func init() {
	var err error
	if simCatalog, err = tools.Parse("sim.yaml", []byte(catalog)); err != nil {
		panic(err)
	}
	// The schema the upstream lists for its tool, bound as mcpchannel binds
	// it once the upstream answers tools/list.
	up := simCatalog.Tools["tracker.open_ticket"]
	if simCatalog.Tools[up.Name], err = up.BindUpstreamSchema(json.RawMessage(`{"type": "object", "required": ["ref"], "properties": {"ref": {"type": "string"}}}`)); err != nil {
		panic(err)
	}
	if simFP, err = fingerprint.New(make([]byte, 32)); err != nil {
		panic(err)
	}
}

// options bound one schedule.
type options struct {
	steps      int // steps with clients and faults
	clients    int // at the start
	maxClients int
	restarts   int // most crashes and takeovers in one schedule
	// slow: some commits take up to 6s of the clock (a loaded database).
	// Updates then share groups, and the callers a group answers at once
	// run in the runtime's order: such schedules find timing bugs but are
	// not promised to replay exactly.
	slow bool
}

var defaultOptions = options{steps: 60, clients: 3, maxClients: 8, restarts: 3}

// gen is one control-plane process (or replica) over the shared store.
type gen struct {
	n      int
	kv     *genKV
	st     *store.Store
	e      *engine.Engine
	holds  atomic.Bool // its lease (always held by a lone process)
	gone   bool        // stopped: nothing it sends leaves it (guarded by world.mu)
	ctx    context.Context
	cancel context.CancelFunc // its clients' connections
}

// world is one schedule: the durable store, the targets, the processes, the
// clients, and the seed's choices.
type world struct {
	seed int64
	opt  options
	rng  *rand.Rand // the driver's choices
	// faults draws the store's commit faults, ids the engine's execution
	// IDs: each its own stream, so each is consumed in one order.
	faults   *rand.Rand
	ids      *ulid.MonotonicEntropy
	faultsOn bool

	mu       sync.Mutex
	kv       *memkv.KV
	gens     []*gen
	live     *gen
	zombie   *gen // a replica whose lease lapsed and was taken over, still running
	epoch    int64
	restarts int
	targets  map[string]*target
	effects  []*effect
	requests []*request // not yet answered, or still in flight
	clients  []*client
	acked    map[string]string // execution IDs clients were given -> intent
	done     map[string]bool   // execution IDs a client saw completed
	intents  map[string]string // execution ID -> intent (intentOf's memory)
	stop     chan struct{}

	violations []string
	trace      []string
	// faultLog is what the store's writers drew since the driver last
	// looked (under mu); logFaults moves it into the trace, so a
	// schedule shows which commit failed.
	faultLog []string
}

func newWorld(seed int64, opt options) *world {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], uint64(seed))
	stream := func(n byte) *rand.Rand {
		k := s
		k[31] = n
		return rand.New(rand.NewChaCha8(k))
	}
	k := s
	k[31] = 4
	w := &world{
		seed: seed, opt: opt, rng: stream(1), faults: stream(2),
		ids:      ulid.Monotonic(rand.NewChaCha8(k), 0),
		faultsOn: true, kv: memkv.New(), acked: map[string]string{}, done: map[string]bool{}, intents: map[string]string{}, stop: make(chan struct{}),
		targets: map[string]*target{
			"keyed":   {name: "keyed", sem: keyed, settle: 5 * time.Second},
			"ledger":  {name: "ledger", sem: ledger, settle: 20 * time.Second},
			"host":    {name: "host", sem: hostAgent},
			"tracker": {name: "tracker", sem: upstreamTasks},
		},
	}
	for _, t := range w.targets {
		t.runs, t.notStarted, t.tasks = map[string]*effect{}, map[string]bool{}, map[string]*effect{}
	}
	return w
}

func (w *world) tracef(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf(format, args...))
}

// violate records a broken invariant (w.mu held, or only the driver
// running).
func (w *world) violate(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	w.violations = append(w.violations, v)
	w.trace = append(w.trace, "VIOLATION: "+v)
}

// nextCommit is the fault plan's verdict on the next commit of process gen,
// and how long the commit takes.
func (w *world) nextCommit(gen int) (commitFault, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.faultsOn {
		return commitOK, 0
	}
	f, slow := w.drawCommit()
	switch {
	case slow > 0:
		w.faultLog = append(w.faultLog, fmt.Sprintf("  ! @%s gen %d: a commit %s, taking %s", w.elapsed(), gen, commitFaultNames[f], slow))
	case f != commitOK:
		w.faultLog = append(w.faultLog, fmt.Sprintf("  ! @%s gen %d: a commit %s", w.elapsed(), gen, commitFaultNames[f]))
	}
	return f, slow
}

// logFaults moves the commit faults drawn since the last call into the
// trace (w.mu held, or only the driver running).
func (w *world) logFaults() {
	w.trace = append(w.trace, w.faultLog...)
	w.faultLog = nil
}

// drawCommit draws one commit's fault from the plan (w.mu held).
func (w *world) drawCommit() (commitFault, time.Duration) {
	var slow time.Duration
	if w.opt.slow && w.faults.IntN(100) < 30 {
		slow = time.Duration(w.faults.Int64N(int64(25 * time.Second)))
	}
	if w.restarts >= w.opt.restarts {
		return commitOK, slow
	}
	switch p := w.faults.IntN(1000); {
	case p < 20:
		return commitFails, slow
	case p < 27:
		return commitLost, slow
	case p < 34:
		return crashBefore, slow
	case p < 41:
		return crashAfter, slow
	}
	return commitOK, slow
}

func (w *world) newID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return "act_" + ulid.MustNew(ulid.Timestamp(time.Now()), w.ids).String()
}

// start opens a process on what the store holds: the state check first,
// then the engine, which resumes what the last one left.
func (w *world) start() {
	for {
		w.mu.Lock()
		g := &gen{n: len(w.gens)}
		g.kv = &genKV{w: w, gen: g.n, kv: w.kv}
		g.holds.Store(true)
		g.ctx, g.cancel = context.WithCancel(context.Background())
		w.gens = append(w.gens, g)
		w.live = g
		w.mu.Unlock()
		var err error
		if g.st, err = store.New(store.Config{KV: g.kv}); err != nil {
			w.violate("gen %d: the store does not open: %v", g.n, err)
			return
		}
		if rep, err := g.st.CheckState(context.Background(), store.CheckAll); err != nil || !rep.OK() {
			w.violate("gen %d: the state does not agree with the journal at start: %v %v", g.n, err, rep.Err())
		}
		ch := engine.Fenced(channel{w: w, gen: g.n}, g)
		g.e, err = engine.New(engine.Config{
			Logger: simLogger(g.n),
			Store:  g.st, Catalog: simCatalog, Fingerprinter: simFP,
			Channels: map[tools.Channel]engine.Channel{tools.ChannelHTTP: ch, tools.ChannelLocal: ch, tools.ChannelMCP: ch},
			Clock:    time.Now, NewID: w.newID, MaxDispatches: 3,
			Recovery: engine.RecoveryConfig{Interval: time.Second, MinBackoff: time.Second, MaxBackoff: 20 * time.Second, MaxAttempts: 8, Workers: 1, PerTarget: 1},
		})
		if err != nil {
			w.violate("gen %d: engine: %v", g.n, err)
			return
		}
		err = g.e.Start(context.Background())
		if err == nil {
			w.tracef("  gen %d started", g.n)
			return
		}
		w.tracef("  gen %d did not start: %v", g.n, err)
		w.stopGen(g)
	}
}

// Holds is the process's lease (engine.Holder).
func (h *gen) Holds() bool { return h.holds.Load() }

// stopGen ends a process as a crash does: nothing more it writes is
// durable, its clients lose their connections, its requests waiting at a
// target get no answer (those already sent stay in flight).
func (w *world) stopGen(g *gen) {
	g.kv.kill()
	w.mu.Lock()
	g.gone = true
	for _, r := range w.requests {
		if r.gen == g.n && !r.answered {
			r.answered, r.inFlight = true, !r.query
			r.reply <- engine.Attempt{Class: engine.Unknown, Reason: "the process died"}
		}
	}
	w.mu.Unlock()
	g.cancel()
	if g.e != nil {
		g.e.Close()
	}
	if g.st != nil {
		g.st.Close()
	}
}

// action is one thing the driver can make happen.
type action struct {
	weight int
	name   string
	do     func()
}

// run plays the schedule: the active steps, then the drain.
func (w *world) run() {
	w.start()
	for i := range w.opt.clients {
		w.addClient(i)
	}
	for step := 0; step < w.opt.steps && len(w.violations) == 0; step++ {
		w.quiesce()
		w.mu.Lock()
		w.logFaults()
		w.mu.Unlock()
		w.settleProcesses()
		w.check(false)
		if len(w.violations) > 0 {
			break
		}
		acts := w.actions()
		a := acts[w.pick(acts)]
		w.tracef("step %d @%s: %s", step, w.elapsed(), a.name)
		w.mu.Lock()
		a.do() // with w.mu held; what blocks lets go of it
		w.mu.Unlock()
	}
	w.drain()
	w.shutdown()
}

// quiesce returns once every goroutine of the bubble is durably blocked and
// no timer is due: a timer due at the current instant fires only when the
// whole bubble, the driver included, is blocked, so the driver sleeps a
// nanosecond (which lets such timers fire first) and waits again.
func (w *world) quiesce() {
	synctest.Wait()
	time.Sleep(time.Nanosecond)
	synctest.Wait()
}

// simLogger is silent unless LATCH_SIM_LOG is set (then the engine logs at
// debug level to stderr, for reading one schedule).
func simLogger(gen int) hclog.Logger {
	if os.Getenv("LATCH_SIM_LOG") == "" {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("gen%d", gen), Level: hclog.Debug, Output: os.Stderr})
}

var epoch0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func (w *world) elapsed() time.Duration { return time.Since(epoch0) }

func (w *world) pick(acts []action) int {
	total := 0
	for _, a := range acts {
		total += a.weight
	}
	n := w.rng.IntN(total)
	for i, a := range acts {
		if n -= a.weight; n < 0 {
			return i
		}
	}
	return len(acts) - 1
}

// settleProcesses restarts a process that crashed in a commit or lost a
// commit's answer.
func (w *world) settleProcesses() {
	if w.live.kv.broken() {
		w.tracef("  gen %d is down (a commit crashed it or lost its answer): restart", w.live.n)
		w.stopGen(w.live)
		w.restarts++
		w.start()
		w.quiesce()
	}
}

// actions lists what can happen now, in an order that depends only on the
// world's state (requests by arrival, which is causal within one step, then
// by target and ID).
func (w *world) actions() []action {
	w.mu.Lock()
	defer w.mu.Unlock()
	var acts []action
	now := time.Now()
	w.requests = slices.DeleteFunc(w.requests, func(r *request) bool {
		return r.answered && (!r.inFlight || r.landed || !now.Before(r.deadline()))
	})
	reqs := slices.Clone(w.requests)
	slices.SortFunc(reqs, func(a, b *request) int {
		return strings.Compare(a.String(), b.String())
	})
	for _, r := range reqs {
		switch {
		case !r.answered && r.query:
			acts = append(acts,
				action{4, "answer " + r.String(), func() { w.answer(r, w.status(r)) }},
				action{1, "lose the answer to " + r.String(), func() {
					w.answer(r, engine.Attempt{Class: engine.Unknown, Reason: "the status answer was lost"})
				}})
		case !r.answered:
			acts = append(acts,
				action{4, "land and answer " + r.String(), func() { w.answer(r, w.land(r)) }},
				action{1, "land, lose the answer to " + r.String(), func() {
					w.land(r)
					w.answer(r, engine.Attempt{Class: engine.Unknown, Reason: "the connection dropped after the request was sent"})
				}},
				action{1, "refuse " + r.String(), func() {
					w.answer(r, engine.Attempt{Class: engine.NotSent, Reason: "connection refused"})
				}},
				action{1, "leave in flight " + r.String(), func() {
					r.inFlight = true
					w.answer(r, engine.Attempt{Class: engine.Unknown, Reason: "no answer within the timeout"})
				}})
		case r.inFlight && !r.landed:
			acts = append(acts, action{1, "late landing of " + r.String(), func() { w.land(r) }})
		}
	}
	for _, c := range w.clients {
		if c.ready {
			acts = append(acts, action{3, fmt.Sprintf("client %d calls (%s)", c.n, c.intent), func() { c.ready = false; c.goCh <- struct{}{} }})
		}
	}
	if len(w.clients) < w.opt.maxClients && w.restarts <= w.opt.restarts {
		acts = append(acts, action{1, "a client arrives", func() { w.addClient(len(w.clients)) }})
	}
	for _, d := range []time.Duration{100 * time.Millisecond, time.Second, 5 * time.Second, 15 * time.Second, time.Minute} {
		acts = append(acts, action{1, "sleep " + d.String(), func() {
			w.mu.Unlock()
			time.Sleep(d)
			w.mu.Lock()
		}})
	}
	if w.restarts < w.opt.restarts {
		acts = append(acts, action{1, "crash and restart", func() {
			w.restarts++
			w.mu.Unlock()
			w.stopGen(w.live)
			w.start()
			w.mu.Lock()
		}})
		if w.zombie == nil && w.live.holds.Load() {
			acts = append(acts, action{1, "the lease lapses", func() { w.live.holds.Store(false) }})
		}
		if w.zombie == nil && !w.live.holds.Load() {
			acts = append(acts, action{2, "a standby takes over", func() {
				w.restarts++
				w.epoch++
				old := w.live
				old.kv.fence(w.epoch)
				w.zombie = old
				w.mu.Unlock()
				old.cancel() // its clients reconnect to the new active replica
				w.start()
				w.mu.Lock()
			}})
		}
	}
	if w.zombie != nil {
		z := w.zombie
		acts = append(acts, action{1, "the old replica exits", func() {
			w.zombie = nil
			w.mu.Unlock()
			w.stopGen(z)
			w.mu.Lock()
		}})
	}
	return acts
}

// answer gives the caller of a waiting request its answer (w.mu held).
func (w *world) answer(r *request, a engine.Attempt) {
	r.answered = true
	if a.Class == engine.Observed && r.made != nil {
		r.task = r.made.task // the CreateTaskResult reached the channel
	}
	r.reply <- a
}

// drain turns the faults off, answers every request truthfully and lets
// time run until every execution rests, then checks the end state.
func (w *world) drain() {
	w.mu.Lock()
	w.faultsOn = false
	close(w.stop)
	w.mu.Unlock()
	for i := 0; i < 200 && len(w.violations) == 0; i++ {
		w.quiesce()
		w.mu.Lock()
		w.logFaults()
		w.mu.Unlock()
		w.settleProcesses()
		w.mu.Lock()
		answered := false
		for _, r := range w.requests {
			if r.answered {
				continue
			}
			answered = true
			if r.query {
				w.answer(r, w.status(r))
			} else {
				w.answer(r, w.land(r))
			}
		}
		z := w.zombie
		w.zombie = nil
		w.mu.Unlock()
		if z != nil {
			w.stopGen(z)
			continue
		}
		if answered {
			continue
		}
		if !w.live.holds.Load() {
			// A lapsed lease with no standby: the replica regains it.
			w.live.holds.Store(true)
		}
		if w.allRest() {
			break
		}
		time.Sleep(10 * time.Second)
	}
	if len(w.violations) == 0 {
		w.quiesce()
		w.check(true)
	}
}

func (w *world) shutdown() {
	for _, g := range w.gens {
		if !g.gone {
			w.stopGen(g)
		}
	}
}
