package faultsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/testing/countingtarget"
	"github.com/latchhq/latch/internal/testing/faultproxy"
	"github.com/latchhq/latch/internal/testing/testbin"
	"github.com/latchhq/latch/mcpfront"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

type faultPoint int

const (
	fpCutBefore      faultPoint = iota // the request never reaches the target whole
	fpCutHolding                       // the agent's call and the target's link cut while it holds the request
	fpCutAfterEffect                   // the effect is committed, its answer is cut
	fpKillCPHolding                    // SIGKILL of latch serve while the target holds the request
	fpKillCPAnswered                   // SIGKILL of latch serve just after the target answered
	fpKillAgent                        // SIGKILL of latch-hostagent while its command runs
	fpSlow                             // the target answers after the dispatch timeout
	numFaultPoints
)

var faultNames = [...]string{"cut-before-receive", "cut-while-holding", "cut-after-effect", "kill-cp-while-holding", "kill-cp-after-answer", "kill-hostagent", "slow-target"}

func (f faultPoint) String() string { return faultNames[f] }

type retryKind int

const (
	rtNever retryKind = iota
	rtImmediate
	rtDelayed
	rtConcurrent
	rtOtherEra
	rtStatusFirst
	numRetries
)

var retryNames = [...]string{"never", "immediate", "delayed", "two-concurrent", "other-era", "status-first"}

func (r retryKind) String() string { return retryNames[r] }

type replayClass int

const (
	clIdem replayClass = iota
	clStatus
	clReview
	numClasses
)

var classNames = [...]string{"idempotency_key", "status_query", "review"}

func (c replayClass) String() string { return classNames[c] }

// trial is one randomized scenario, fully determined by its seed.
type trial struct {
	seed   int64
	fault  faultPoint
	retry  retryKind
	class  replayClass
	era    string // of the first call
	rng    *rand.Rand
	intent string
	tool   string
}

func newTrial(seed int64) *trial {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	tr := &trial{seed: seed, rng: rng, intent: fmt.Sprintf("s%d", seed)}
	tr.fault = faultPoint(rng.IntN(int(numFaultPoints)))
	tr.retry = retryKind(rng.IntN(int(numRetries)))
	tr.class = replayClass(rng.IntN(int(numClasses)))
	tr.era = eraStateless
	if rng.IntN(2) == 0 {
		tr.era = eraSession
	}
	switch {
	case tr.fault == fpKillAgent && tr.class == clReview:
		tr.tool = toolHostReview
	case tr.fault == fpKillAgent:
		// A host-agent tool has no idempotency key: its marker answers.
		tr.class, tr.tool = clStatus, toolHostStatus
	case tr.class == clIdem:
		tr.tool = toolIdem
	case tr.class == clStatus:
		tr.tool = toolStatus
	default:
		tr.tool = toolReview
	}
	return tr
}

func (tr *trial) String() string {
	return fmt.Sprintf("seed=%d fault=%s retry=%s replay=%s era=%s", tr.seed, tr.fault, tr.retry, tr.class, eraName(tr.era))
}

func (tr *trial) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(tr.rng.Int64N(int64(hi-lo)+1))
}

func otherEra(e string) string {
	if e == eraSession {
		return eraStateless
	}
	return eraSession
}

// verdict is what one trial found.
type verdict struct {
	trial        *trial
	duplicates   int // effects beyond the first for the intent
	silent       int // calls answered `new` while an earlier execution had or could have an effect
	invisible    int // executions that may have had an effect, not visible as such
	misreported  int // a definite outcome the target's truth contradicts (reported, not a failure)
	unanswered   int // re-issues that got no answer within their bound (reported, not a failure)
	inconclusive string
	notes        []string
	ids          []string        // every execution ID seen (answers and the target's keys)
	flagged      map[string]bool // IDs already counted invisible
	retriedNew   []string        // re-issues answered new, not counted silent at once
}

func (v *verdict) notef(format string, args ...any) {
	v.notes = append(v.notes, fmt.Sprintf(format, args...))
}

func (v *verdict) flag(id string) {
	if v.flagged == nil {
		v.flagged = map[string]bool{}
	}
	v.flagged[id] = true
}

func (v *verdict) bad() bool { return v.duplicates+v.silent+v.invisible > 0 }

// notRested: states from which an execution moves without anyone asking.
func notRested(s string) bool {
	return s == "accepted" || s == "authorized" || s == "dispatched"
}

// mayHaveEffect: states that say "this may have happened, or did".
var mayHaveEffect = map[string]bool{"dispatched": true, "outcome_unknown": true, "needs_review": true, "completed": true, "delivered": true}

// run plays one trial on the lane and checks it.
func (l *lane) run(t *testing.T, tr *trial) *verdict {
	v := &verdict{trial: tr}
	host := tr.fault == fpKillAgent
	args := map[string]any{"intent": tr.intent}
	hold := tr.fault == fpCutHolding || tr.fault == fpCutAfterEffect || tr.fault == fpKillCPHolding || tr.fault == fpSlow
	var answered func()
	killedCP := make(chan *testbin.Proc, 1)
	if tr.fault == fpKillCPAnswered {
		p := l.cpProc()
		answered = func() { p.Kill(); killedCP <- p }
	}
	arrival := l.target.Plan(tr.intent, hold && !host, answered)
	waitArrival := func() bool {
		select {
		case <-arrival:
			return true
		case <-time.After(10 * time.Second):
			v.inconclusive = "the first request never reached the target"
			return false
		}
	}

	var mu sync.Mutex
	var answers []callOut
	record := func(who string, o callOut) {
		mu.Lock()
		defer mu.Unlock()
		answers = append(answers, o)
		if o.err != nil || o.res.ExecutionID == "" {
			if who != "first call" {
				// A re-issue retries for 30s: no answer by then is a
				// liveness failure, reported with the run.
				v.unanswered++
				v.notef("%s got no answer: %v %s", who, o.err, o.res.Note)
			}
			return
		}
		v.ids = append(v.ids, o.res.ExecutionID)
		if o.res.Disposition != "new" {
			return
		}
		if host {
			for _, k := range l.hostLines(t, tr.intent, "start") {
				if k != o.res.ExecutionID {
					v.silent++
					v.notef("%s answered new (%s) while %s had already started on the host", who, o.res.ExecutionID, k)
					return
				}
			}
			if who != "first call" {
				v.retriedNew = append(v.retriedNew, o.res.ExecutionID)
			}
			return
		}
		if k, live := l.target.AnyLive(tr.intent, o.res.ExecutionID); live {
			v.silent++
			keys, _ := l.target.Truth(tr.intent)
			v.notef("%s answered new (%s, state %s) while %s had reached the target (target: %v)", who, o.res.ExecutionID, o.res.State, k, keys)
		} else if who != "first call" {
			v.retriedNew = append(v.retriedNew, o.res.ExecutionID)
		}
	}

	var bg sync.WaitGroup
	defer bg.Wait()
	later := func(d time.Duration, f func()) {
		bg.Add(1)
		go func() { defer bg.Done(); time.Sleep(d); f() }()
	}

	if tr.fault == fpCutBefore {
		modes := []faultproxy.Mode{faultproxy.Refuse, faultproxy.Drop, faultproxy.Cut(1 + tr.rng.Int64N(200))}
		m := modes[tr.rng.IntN(len(modes))]
		v.notef("proxy %s", m)
		if err := l.proxy.SetMode(m); err != nil {
			t.Fatal(err)
		}
	}
	firstCtx, cancelFirst := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelFirst()
	first := make(chan callOut, 1)
	go func() { first <- l.call(firstCtx, tr.era, tr.tool, args) }()

	switch tr.fault {
	case fpCutBefore:
		record("first call", <-first)
		if err := l.proxy.SetMode(faultproxy.Pass); err != nil {
			t.Fatal(err)
		}
	case fpCutHolding:
		if !waitArrival() {
			break
		}
		cancelFirst() // the agent's stream breaks
		record("first call", <-first)
		how := []countingtarget.Release{{How: countingtarget.CommitLate, Delay: tr.between(0, 1500*time.Millisecond)}, {How: countingtarget.Abort}, {How: countingtarget.Commit}}[tr.rng.IntN(3)]
		later(tr.between(0, 800*time.Millisecond), func() { l.target.ReleaseFirst(tr.intent, how) })
	case fpCutAfterEffect:
		if !waitArrival() {
			break
		}
		if tr.rng.IntN(2) == 0 {
			if err := l.proxy.SetMode(faultproxy.Cut(0)); err != nil {
				t.Fatal(err)
			}
			l.target.ReleaseFirst(tr.intent, countingtarget.Release{How: countingtarget.Commit})
		} else {
			l.target.ReleaseFirst(tr.intent, countingtarget.Release{How: countingtarget.CommitClose})
		}
		record("first call", <-first)
		if err := l.proxy.SetMode(faultproxy.Pass); err != nil {
			t.Fatal(err)
		}
	case fpKillCPHolding:
		if !waitArrival() {
			break
		}
		p := l.cpProc()
		p.Kill()
		early := tr.rng.IntN(2) == 0
		if early {
			l.target.ReleaseFirst(tr.intent, countingtarget.Release{How: countingtarget.Commit})
		}
		if err := l.restartCP(p); err != nil {
			t.Fatal(err)
		}
		if !early {
			later(tr.between(0, time.Second), func() { l.target.ReleaseFirst(tr.intent, countingtarget.Release{How: countingtarget.Commit}) })
		}
		record("first call", <-first)
	case fpKillCPAnswered:
		select {
		case p := <-killedCP:
			if err := l.restartCP(p); err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			v.inconclusive = "the target never answered the first request"
		}
		record("first call", <-first)
	case fpKillAgent:
		started := false
		for range 1000 {
			if len(l.hostLines(t, tr.intent, "start")) > 0 {
				started = true
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !started {
			v.inconclusive = "the host command never started"
			break
		}
		time.Sleep(tr.between(0, 300*time.Millisecond))
		l.killAgent()
		time.Sleep(tr.between(0, 500*time.Millisecond))
		l.restartAgent(t)
		record("first call", <-first)
	case fpSlow:
		if !waitArrival() {
			break
		}
		later(dispatchTimeout+tr.between(100*time.Millisecond, 900*time.Millisecond), func() {
			l.target.ReleaseFirst(tr.intent, countingtarget.Release{How: countingtarget.Commit})
		})
		record("first call", <-first)
	}
	if v.inconclusive != "" {
		cancelFirst()
		<-first
		l.target.ReleaseFirst(tr.intent, countingtarget.Release{How: countingtarget.Commit})
		return v
	}

	firstID := ""
	mu.Lock()
	if len(answers) > 0 {
		firstID = answers[0].res.ExecutionID
	}
	mu.Unlock()
	reissue := func(who, era string) { record(who, l.reissue(era, tr.tool, args)) }
	switch tr.retry {
	case rtNever:
	case rtImmediate:
		reissue("immediate re-issue", tr.era)
	case rtDelayed:
		time.Sleep(tr.between(300*time.Millisecond, 3*time.Second))
		reissue("delayed re-issue", tr.era)
	case rtConcurrent:
		var wg sync.WaitGroup
		for i, era := range []string{tr.era, []string{eraSession, eraStateless}[tr.rng.IntN(2)]} {
			wg.Add(1)
			go func() { defer wg.Done(); reissue(fmt.Sprintf("concurrent re-issue %d", i+1), era) }()
		}
		wg.Wait()
	case rtOtherEra:
		reissue("re-issue in era "+eraName(otherEra(tr.era)), otherEra(tr.era))
	case rtStatusFirst:
		var st string
		if tr.rng.IntN(2) == 0 {
			st = "latch_execution_status: " + l.statusFirst(tr.tool, firstID)
		} else {
			st = "latch exec show: " + l.statusByCLI(tr.tool, firstID)
		}
		v.notef("status first: %s", st)
		reissue("re-issue after status", tr.era)
	}
	bg.Wait()
	l.check(t, tr, v)
	return v
}

// reissue calls again on a new session, like an agent whose call failed:
// while the control plane is unreachable (restarting) it tries again,
// bounded.
func (l *lane) reissue(era, tool string, args map[string]any) callOut {
	var o callOut
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		o = l.call(ctx, era, tool, args)
		cancel()
		if o.err == nil && o.res.ExecutionID != "" {
			return o
		}
		time.Sleep(250 * time.Millisecond)
	}
	return o
}

// statusFirst is what a careful agent does before re-issuing: it finds its
// execution (by the ID it was given, else the newest of the tool) and asks
// latch_execution_status until it rests, bounded.
func (l *lane) statusFirst(tool, id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cs, err := l.connect(ctx, eraStateless)
	if err != nil {
		return "connect: " + err.Error()
	}
	defer cs.Close()
	if id == "" {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpfront.ToolExecutions, Arguments: map[string]any{"limit": 20}})
		if err != nil {
			return "latch_executions: " + err.Error()
		}
		var list struct {
			Executions []mcpfront.ExecutionSummary `json:"executions"`
		}
		raw, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(raw, &list)
		for _, e := range list.Executions {
			if e.Tool == tool {
				id = e.ExecutionID
				break
			}
		}
		if id == "" {
			return "no execution listed"
		}
	}
	state := ""
	for ctx.Err() == nil {
		cr, err := statusOf(ctx, cs, id)
		if err == nil {
			state = cr.State
			if !notRested(state) {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return id + " " + state
}

var (
	cliState = regexp.MustCompile(`(?m)^state\s+(\S+)`)
	cliList  = regexp.MustCompile(`(?m)^(act_\S+)\s+(\S+)\s`)
)

// statusByCLI is statusFirst by an operator's commands: `latch exec list`
// to find the execution when the agent got no ID, then `latch exec show`
// until it rests, bounded.
func (l *lane) statusByCLI(tool, id string) string {
	deadline := time.Now().Add(15 * time.Second)
	run := func(args ...string) string {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		out, _ := exec.CommandContext(ctx, latchBin, append(args, "--data", l.data)...).CombinedOutput()
		return string(out)
	}
	if id == "" {
		for _, m := range cliList.FindAllStringSubmatch(run("exec", "list"), -1) {
			if m[2] == tool {
				id = m[1] // newest first
				break
			}
		}
		if id == "" {
			return "no execution listed"
		}
	}
	state := ""
	for time.Now().Before(deadline) {
		if m := cliState.FindStringSubmatch(run("exec", "show", id)); m != nil {
			state = m[1]
			if !notRested(state) {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return id + " " + state
}

// statusOf asks the built-in latch_execution_status tool.
func statusOf(ctx context.Context, cs *mcp.ClientSession, id string) (mcpfront.CallResult, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpfront.ToolExecutionStatus, Arguments: map[string]any{"execution_id": id}})
	if err != nil {
		return mcpfront.CallResult{}, err
	}
	var cr mcpfront.CallResult
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &cr); err != nil {
		return cr, err
	}
	// A definite failure (not_executed, rejected) is a tool error that still
	// carries the execution; only an answer without one is "not visible".
	if cr.ExecutionID == "" {
		return cr, fmt.Errorf("latch_execution_status %s: %s", id, cr.Note)
	}
	return cr, nil
}

// statusOfRetrying asks like statusOf and, while the front says it cannot
// reach the control plane (a restarted control plane while the front's
// connection is still backing off), asks again until ctx ends, as the note
// tells the model to. Only an execution still not shown then is invisible.
func statusOfRetrying(ctx context.Context, cs *mcp.ClientSession, id string) (mcpfront.CallResult, error) {
	for {
		cr, err := statusOf(ctx, cs, id)
		if err == nil || !strings.Contains(err.Error(), "could not reach its control plane") {
			return cr, err
		}
		select {
		case <-ctx.Done():
			return cr, err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// truthOf is the target's (or the host's) truth for the intent: each
// execution ID that reached it, and whether it had an effect.
func (l *lane) truthOf(t testing.TB, tr *trial) (keys []countingtarget.KeyView, effects int) {
	if tr.fault != fpKillAgent {
		return l.target.Truth(tr.intent)
	}
	done := l.hostLines(t, tr.intent, "effect")
	for _, k := range l.hostLines(t, tr.intent, "start") {
		s := countingtarget.Held
		if slices.Contains(done, k) {
			s = countingtarget.Committed
		}
		keys = append(keys, countingtarget.KeyView{Key: k, State: s})
	}
	return keys, len(done)
}

// check waits (bounded) until the target holds nothing for the intent and
// no execution of it moves by itself, then applies the invariants.
func (l *lane) check(t testing.TB, tr *trial, v *verdict) {
	deadline := time.Now().Add(maxHold + 5*time.Second)
	var keys []countingtarget.KeyView
	var effects int
	for {
		keys, effects = l.truthOf(t, tr)
		held := slices.ContainsFunc(keys, func(k countingtarget.KeyView) bool { return k.State == countingtarget.Held })
		if !held || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, k := range keys {
		v.ids = append(v.ids, k.Key)
	}
	slices.Sort(v.ids)
	v.ids = slices.Compact(v.ids)
	for _, id := range v.ids {
		l.waitRested(id, deadline)
	}
	if effects > 1 {
		v.duplicates += effects - 1
		v.notef("the target counted %d effects for one intent: %v", effects, keys)
		l.explain(v, keys)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := l.connect(ctx, eraStateless)
	if err != nil {
		v.inconclusive = "status session: " + err.Error()
		return
	}
	defer cs.Close()
	truth := map[string]countingtarget.KeyState{}
	for _, k := range keys {
		truth[k.Key] = k.State
	}
	for _, id := range v.ids {
		cr, err := statusOfRetrying(ctx, cs, id)
		state, reached := truth[id]
		if !reached {
			state = countingtarget.Aborted // never reached the target: no effect
		}
		if err == nil && (cr.State == "completed" || cr.State == "delivered") {
			// Recovery may have replayed the request since the truth was
			// read: a definite outcome is compared with the truth after it.
			keys, _ = l.truthOf(t, tr)
			state, reached = countingtarget.Aborted, false
			for _, k := range keys {
				if k.Key == id {
					state, reached = k.State, true
				}
			}
		}
		switch {
		case err != nil:
			v.invisible++
			v.flag(id)
			v.notef("%s is not visible through latch_execution_status: %v", id, err)
		case reached && state != countingtarget.Aborted && !mayHaveEffect[cr.State]:
			v.invisible++
			v.flag(id)
			v.notef("%s reached the target (%s) but shows %s", id, state, cr.State)
		case (cr.State == "completed" || cr.State == "delivered") && cr.Outcome == "succeeded" && state != countingtarget.Committed:
			v.misreported++
			v.notef("%s shows completed/succeeded but the target has no effect for it (%v)", id, keys)
		case (cr.State == "completed" || cr.State == "delivered") && cr.Outcome != "succeeded" && state == countingtarget.Committed:
			v.misreported++
			v.notef("%s shows completed/%s (status %d) but the target committed its effect", id, cr.Outcome, cr.TargetStatus)
		}
	}
}

// waitRested waits until the execution is not dispatched (or the deadline).
func (l *lane) waitRested(id string, deadline time.Time) {
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		r, err := l.api.Get(ctx, &controlplanev1.GetRequest{ExecutionId: id})
		cancel()
		if err == nil && !notRested(stateName(r.GetExecution().GetState())) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// journalOf is the execution's journal, one "kind:state (reason)" per
// record: the evidence a report of a violation needs.
func (l *lane) journalOf(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	h, err := l.api.History(ctx, &controlplanev1.HistoryRequest{ExecutionId: id})
	if err != nil {
		return id + ": no history: " + err.Error()
	}
	var b strings.Builder
	b.WriteString(id + ":")
	for _, e := range h.GetEntries() {
		fmt.Fprintf(&b, " %s:%s (%s);", lifecycle.EntryKindNameOf(e), stateName(e.GetTo()), e.GetReason())
	}
	return b.String()
}

// explain adds the journal of every execution of the intent to the notes.
func (l *lane) explain(v *verdict, keys []countingtarget.KeyView) {
	for _, k := range keys {
		v.notef("journal %s", l.journalOf(k.Key))
	}
}

func stateName(s recordv1.State) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "STATE_"))
}
