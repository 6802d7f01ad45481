package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/latchhq/latch/controlplane/engine"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// semantics is how a simulated target treats a request that carries an
// execution ID, after the channel kinds Latch serves.
type semantics int

const (
	// keyed: an HTTP API that honours the Idempotency-Key: a second request
	// with the key answers the first one's result and acts no more.
	keyed semantics = iota
	// ledger: an HTTP API that does not deduplicate (every request that
	// lands acts) and whose status endpoint is eventually consistent: an
	// effect shows there up to the target's settle after it happened.
	ledger
	// hostAgent: a host agent's markers: an ID runs at most once, and a
	// status query for an ID it never saw records not_started, which
	// refuses a run that arrives later (a durable absence).
	hostAgent
	// upstreamTasks: an upstream MCP server that runs each tools/call as a
	// task and deduplicates nothing: its CreateTaskResult names the task,
	// which the channel records (Call.RecordTask, a commit) before it
	// follows the task to its result; tasks/get answers only for a recorded
	// task ID, so a call whose task ID was not recorded cannot be asked.
	upstreamTasks
)

// target is one simulated target's durable state, across the control
// plane's restarts.
type target struct {
	name   string
	sem    semantics
	settle time.Duration // how late an effect may show at the status endpoint
	// runs are the effects by execution ID (the first, for a ledger).
	runs       map[string]*effect
	notStarted map[string]bool
	tasks      map[string]*effect // upstreamTasks: by task ID
}

// effect is one action a target performed.
type effect struct {
	target  string
	id      string // the execution ID the request carried
	intent  string // the client intent it came from
	gen     int    // the process that sent it
	at      time.Time
	visible time.Time // when the status endpoint shows it
	task    string    // the task an upstreamTasks target ran it as
}

// request is one dispatch or status query that reached a target, or is on
// its way there.
type request struct {
	gen     int
	query   bool
	target  *target
	id      string
	intent  string
	sentAt  time.Time
	timeout time.Duration // the channel's timeout: the request cannot land after sentAt+timeout
	reply   chan engine.Attempt
	// answered: the caller has its answer (or gave up); inFlight: it was
	// told nothing certain and the request may still land until its
	// deadline; landed: it did.
	answered, inFlight, landed bool
	// made is the effect its landing made; task, the task an upstreamTasks
	// target ran it as, once the answer that names the task reached the
	// channel; taskID, on a query, the task ID the execution records.
	made         *effect
	task, taskID string
}

func (r *request) deadline() time.Time { return r.sentAt.Add(r.timeout) }

func (r *request) String() string {
	what := "dispatch"
	if r.query {
		what = "query"
	}
	return fmt.Sprintf("%s %s %s (gen %d, sent @%s)", what, r.target.name, r.id, r.gen, r.sentAt.Sub(epoch0))
}

// channel is the engine.Channel of one process: every call becomes a
// request the driver answers.
type channel struct {
	w   *world
	gen int
}

var _ engine.Channel = channel{}

func (c channel) Dispatch(ctx context.Context, call engine.Call) engine.Attempt {
	return c.w.arrive(ctx, c.gen, false, call)
}

func (c channel) Query(ctx context.Context, call engine.Call) engine.Attempt {
	return c.w.arrive(ctx, c.gen, true, call)
}

func (c channel) Identity(tool *tools.Tool, target *tools.Target) engine.Identity {
	return engine.Identity{Target: "sim://" + target.Name, Method: "POST"}
}

// arrive queues the request for the driver and waits for its answer, at
// most the tool's dispatch timeout (the bubble's clock).
func (w *world) arrive(ctx context.Context, gen int, query bool, call engine.Call) engine.Attempt {
	timeout := call.Tool.DispatchTimeout(call.Target)
	w.mu.Lock()
	g := w.gens[gen]
	if g.gone {
		w.mu.Unlock()
		return engine.Attempt{Class: engine.NotSent, Reason: "the process is gone"}
	}
	if !query && !g.holds.Load() {
		w.violate("replica gen %d sent a dispatch of %s after its lease lapsed", gen, call.Execution.GetId())
	}
	// The request is on its way until the channel gives up, which an HTTP
	// channel does by the recorded send time plus the timeout (Budget).
	if !query {
		timeout = call.Budget(timeout)
	}
	if timeout <= 0 {
		w.mu.Unlock()
		return engine.Attempt{Class: engine.NotSent, Reason: "too late to send: nothing was sent"}
	}
	intent, _ := call.Arguments["ref"].(string)
	r := &request{gen: gen, query: query, target: w.targets[call.Target.Name], id: call.Execution.GetId(),
		intent: intent, sentAt: time.Now(), timeout: timeout, reply: make(chan engine.Attempt, 1), taskID: call.Execution.GetTargetTaskId()}
	w.requests = append(w.requests, r)
	w.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case a := <-r.reply:
		if r.task != "" && call.RecordTask != nil {
			// As mcpchannel does: the task ID is recorded before the
			// channel waits for the task's result; a failed record is
			// only logged and the call goes on. (Nothing is traced from
			// here: several dispatches may record at once, in the
			// runtime's order.)
			_ = call.RecordTask(r.task)
		}
		return a
	case <-t.C:
	case <-ctx.Done():
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case a := <-r.reply: // answered as the wait ended
		return a
	default:
	}
	r.answered, r.inFlight = true, !query
	return engine.Attempt{Class: engine.Unknown, Reason: "no answer within the timeout"}
}

// land makes the request act at its target, by the target's semantics, and
// returns what the target answers. Called by the driver with w.mu held.
func (w *world) land(r *request) engine.Attempt {
	r.landed = true
	t := r.target
	now := time.Now()
	prior := t.runs[r.id]
	switch {
	case t.sem == hostAgent && t.notStarted[r.id]:
		return engine.Attempt{Class: engine.NotSent, Final: true, Reason: "the host agent's marker says not_started: it never runs this ID"}
	case prior != nil && (t.sem == keyed || t.sem == hostAgent):
		return observed(t, "the key was seen before: the first result, nothing done again")
	}
	e := &effect{target: t.name, id: r.id, intent: r.intent, gen: r.gen, at: now, visible: now}
	if t.sem == upstreamTasks {
		e.task = fmt.Sprintf("task-%d", len(w.effects)+1)
		t.tasks[e.task] = e
	}
	if t.sem != hostAgent && t.settle > 0 {
		e.visible = now.Add(time.Duration(w.rng.Int64N(int64(t.settle))))
	}
	w.effects = append(w.effects, e)
	r.made = e
	if prior == nil {
		t.runs[r.id] = e
	}
	w.tracef("  %s acts for %s (intent %s); shows at +%s", t.name, r.id, r.intent, e.visible.Sub(now))
	return observed(t, "done")
}

// status answers a query from what the target shows now.
func (w *world) status(r *request) engine.Attempt {
	t := r.target
	if t.sem == upstreamTasks {
		if e := t.tasks[r.taskID]; e != nil {
			return observed(t, "tasks/get: "+r.taskID+" completed")
		}
		return engine.Attempt{Class: engine.Unsupported, Reason: "no task ID was recorded for this execution: the upstream cannot be asked"}
	}
	e := t.runs[r.id]
	switch {
	case e != nil && !time.Now().Before(e.visible):
		return observed(t, "found by its key")
	case t.sem == hostAgent:
		t.notStarted[r.id] = true
		return engine.Attempt{Class: engine.Absent, Durable: true, Reason: "the host agent recorded not_started"}
	}
	return engine.Attempt{Class: engine.Absent, Reason: "the status endpoint has no record of the key"}
}

func observed(t *target, summary string) engine.Attempt {
	res := &recordv1.Result{Status: 200, Summary: summary}
	if t.sem == hostAgent {
		res = &recordv1.Result{Exited: true, Summary: summary}
	}
	return engine.Attempt{Class: engine.Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, Result: res}
}
