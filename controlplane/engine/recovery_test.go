package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// recoveryCatalog has one status_query tool on each of two targets, so the
// per-target limit can be seen.
const recoveryCatalog = `
targets:
  slow:
    channel: http
    base_url: http://127.0.0.1:1
    allow_private: true
    idempotency_header: Idempotency-Key
    status: {method: GET, path: "/by-key/{execution_id}"}
  fast:
    channel: http
    base_url: http://127.0.0.1:2
    allow_private: true
    idempotency_header: Idempotency-Key
    status: {method: GET, path: "/by-key/{execution_id}"}
tools:
  order:
    description: Order.
    input_schema: {type: object, required: [n], properties: {n: {type: integer}}}
    target: slow
    request: {method: POST, path: /orders, body: {n: "{{n}}"}}
    replay: status_query
    attach_window: 1h
  ping:
    description: Ping.
    input_schema: {type: object, required: [n], properties: {n: {type: integer}}}
    target: fast
    request: {method: POST, path: /pings, body: {n: "{{n}}"}}
    replay: status_query
    attach_window: 1h
`

// fakeTargets is a fake pair of HTTP targets: every dispatch has its effect and
// loses its answer (outcome unknown); the status endpoint answers "still in
// progress" until an execution has been asked settleAfter times, then
// returns the stored answer. It records when each execution was asked.
type fakeTargets struct {
	settleAfter int
	delay       map[string]time.Duration // per target name
	answer      func(id string, n int) AttemptClass
	onDispatch  func() // called before a dispatch loses its answer

	mu       sync.Mutex
	asked    map[string][]time.Time
	settled  []string // in the order they settled
	inFlight map[string]int
	maxBusy  map[string]int
}

func newFakeTargets(settleAfter int) *fakeTargets {
	return &fakeTargets{settleAfter: settleAfter, delay: map[string]time.Duration{},
		asked: map[string][]time.Time{}, inFlight: map[string]int{}, maxBusy: map[string]int{}}
}

func (f *fakeTargets) Dispatch(ctx context.Context, c Call) Attempt {
	if f.onDispatch != nil {
		f.onDispatch()
	}
	return Attempt{Class: Unknown, Reason: "connection reset after the request was written"}
}

func (f *fakeTargets) Identity(tool *tools.Tool, target *tools.Target) Identity {
	return httpIdentity(tool, target)
}

func (f *fakeTargets) Query(ctx context.Context, c Call) Attempt {
	id, name := c.Execution.GetId(), c.Target.Name
	f.mu.Lock()
	f.asked[id] = append(f.asked[id], time.Now())
	n := len(f.asked[id])
	f.inFlight[name]++
	f.maxBusy[name] = max(f.maxBusy[name], f.inFlight[name])
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight[name]--
		f.mu.Unlock()
	}()
	if d := f.delay[name]; d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return Attempt{Class: Unknown, Reason: "query cut short"}
		}
	}
	class := Unknown
	switch {
	case f.answer != nil:
		class = f.answer(id, n)
	case f.settleAfter > 0 && n >= f.settleAfter:
		class = Observed
	}
	if class != Observed {
		return Attempt{Class: class, Reason: "status 202: still in progress"}
	}
	f.mu.Lock()
	f.settled = append(f.settled, id)
	f.mu.Unlock()
	return Attempt{Class: Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, Result: &recordv1.Result{Status: 200, Body: []byte(`{"ok":true}`)}, Reason: "status 200"}
}

func (f *fakeTargets) times(id string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked[id])
}

// newRecoveryEngine builds an engine over st with the recovery catalog; it
// is not started.
func newRecoveryEngine(tb testing.TB, st *store.Store, ch Channel, rc RecoveryConfig) *Engine {
	tb.Helper()
	cat, err := tools.Parse("recovery.yaml", []byte(recoveryCatalog))
	if err != nil {
		tb.Fatal(err)
	}
	fp, err := fingerprint.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		tb.Fatal(err)
	}
	e, err := New(Config{
		Logger: hclog.NewNullLogger(), Store: st, Catalog: cat, Fingerprinter: fp,
		Channels: map[tools.Channel]Channel{tools.ChannelHTTP: ch}, Recovery: rc,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// failingKV fails every commit while fail is set.
type failingKV struct {
	store.KV
	fail atomic.Bool
}

var errDiskFull = errors.New("disk full (injected)")

func (k *failingKV) Commit(w []store.Write) error {
	if k.fail.Load() {
		return errDiskFull
	}
	return k.KV.Commit(w)
}

func memStore(tb testing.TB) (*store.Store, *failingKV) {
	tb.Helper()
	kv := &failingKV{KV: memkv.New()}
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		tb.Fatal(err)
	}
	return st, kv
}

func submitOrder(tb testing.TB, e *Engine, tool string, n int) *SubmitResult {
	tb.Helper()
	r, err := e.Submit(context.Background(), SubmitInput{Actor: "alice", Tool: tool, Arguments: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
	if err != nil {
		tb.Fatalf("Submit(%s, %d) = %v", tool, n, err)
	}
	return r
}

func offsets(t0 time.Time, ts []time.Time) []time.Duration {
	var out []time.Duration
	for _, t := range ts {
		out = append(out, t.Sub(t0))
	}
	return out
}

// TestAttachPullsQueryToFloorWithoutCountingIt: an attaching retry moves the
// next status query earlier, but never before the last query plus
// MinBackoff, and the early query does not consume a recovery attempt; a
// storm of attaches does not make queries more frequent than the floor.
func TestAttachPullsQueryToFloorWithoutCountingIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memStore(t)
		ch := newFakeTargets(0) // never settles
		e := newRecoveryEngine(t, st, ch, RecoveryConfig{Interval: time.Hour, MinBackoff: time.Second, MaxBackoff: time.Hour, MaxAttempts: 30})
		if err := e.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer func() { e.Close(); st.Close() }()
		t0 := time.Now()
		id := submitOrder(t, e, "order", 1).Execution.GetId()
		// Due queries at +1s (unknown +1s), +2s, +4s: attempts 1, 2, 3;
		// the next due one at +8s.
		time.Sleep(4500 * time.Millisecond)
		synctest.Wait()
		// An attach at +4.5s may pull the +8s query to the floor, +5s.
		if r := submitOrder(t, e, "order", 1); r.Execution.GetId() != id || r.Disposition != recordv1.Disposition_DISPOSITION_RECOVERED {
			t.Fatalf("attach = %s %v, want recovered %s", r.Execution.GetId(), r.Disposition, id)
		}
		time.Sleep(600 * time.Millisecond) // +5.1s
		synctest.Wait()
		// A storm of attaches at +5.1s: one more query, at the floor +6s.
		for range 200 {
			submitOrder(t, e, "order", 1)
		}
		time.Sleep(1500 * time.Millisecond) // +6.6s
		synctest.Wait()
		want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 6 * time.Second}
		if diff := cmp.Diff(want, offsets(t0, ch.times(id))); diff != "" {
			t.Errorf("query times after submit (-want +got):\n%s", diff)
		}
		x, err := st.Execution(id)
		if err != nil {
			t.Fatal(err)
		}
		if x.GetRecoveryAttempts() != 3 {
			t.Errorf("recovery_attempts = %d after 3 due and 2 early queries, want 3", x.GetRecoveryAttempts())
		}
		// The early queries pushed the next counted one back: each query
		// waits for the backoff of the attempts so far (4s after +6s).
		time.Sleep(time.Until(t0.Add(10*time.Second + 500*time.Millisecond)))
		synctest.Wait()
		if got := offsets(t0, ch.times(id)); len(got) != 6 || got[5] != 10*time.Second {
			t.Errorf("query times = %v, want a sixth, counted query at +10s", got)
		}
		if x, _ := st.Execution(id); x.GetRecoveryAttempts() != 4 {
			t.Errorf("recovery_attempts = %d, want 4", x.GetRecoveryAttempts())
		}
	})
}

// TestFailedJournalWriteIsRetriedWithBackoff: while the store cannot commit,
// recovery rounds record nothing; they are retried with a doubling backoff
// (not at once, not dropped), and recovery finishes once the store works.
func TestFailedJournalWriteIsRetriedWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, kv := memStore(t)
		ch := newFakeTargets(0)
		var settle atomic.Bool
		ch.answer = func(_ string, n int) AttemptClass {
			if n > 50 { // spinning: end it, the query times below fail the test
				kv.fail.Store(false)
				settle.Store(true)
			}
			if settle.Load() {
				return Observed
			}
			return Unknown
		}
		e := newRecoveryEngine(t, st, ch, RecoveryConfig{Interval: time.Hour, MinBackoff: time.Second, MaxBackoff: time.Hour, MaxAttempts: 30})
		if err := e.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer func() { e.Close(); st.Close() }()
		t0 := time.Now()
		id := submitOrder(t, e, "order", 1).Execution.GetId()
		synctest.Wait()
		if x, _ := st.Execution(id); x.GetState() != recordv1.State_STATE_OUTCOME_UNKNOWN {
			t.Fatalf("state %s, want outcome_unknown before the store fails", lifecycle.Name(x.GetState()))
		}
		kv.fail.Store(true)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		// Failed rounds at +1s, then after 1s, 2s, 4s.
		want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
		if diff := cmp.Diff(want, offsets(t0, ch.times(id))); diff != "" {
			t.Errorf("query times while the store fails (-want +got):\n%s", diff)
		}
		kv.fail.Store(false)
		settle.Store(true)
		time.Sleep(7 * time.Second) // the retry due at +16s
		synctest.Wait()
		x, err := st.Execution(id)
		if err != nil {
			t.Fatal(err)
		}
		if x.GetState() != recordv1.State_STATE_COMPLETED {
			t.Errorf("state %s after the store recovered, want completed", lifecycle.Name(x.GetState()))
		}
		if got := offsets(t0, ch.times(id)); got[len(got)-1] != 16*time.Second {
			t.Errorf("query times = %v, want the last at +16s", got)
		}
	})
}

// TestStartQueuesEveryUnsettledExecution: start-up finds every
// outcome_unknown, dispatched and authorized execution, not the first page.
func TestStartQueuesEveryUnsettledExecution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memStore(t)
		ch := newFakeTargets(1) // the first query settles
		const each = 2*startPage + 7
		e := newRecoveryEngine(t, st, ch, RecoveryConfig{Interval: time.Hour, MinBackoff: time.Second, MaxBackoff: time.Hour, Workers: 8, PerTarget: 8})
		now := time.Now()
		var ids []string
		err := st.Update(t.Context(), func(tx *store.Tx) error {
			for i := range 3 * each {
				x := &recordv1.Execution{
					Id: fmt.Sprintf("act_%05d", i), Fingerprint: fmt.Sprintf("fp%d", i), Actor: "alice", IntentScope: "actor:alice",
					Tool: "order", Target: "slow", Channel: "http", Replay: "status_query", Arguments: []byte(`{"n":1}`),
					AcceptedAt: timestamppb.New(now), State: recordv1.State_STATE_ACCEPTED,
				}
				path := []recordv1.State{recordv1.State_STATE_AUTHORIZED}
				switch i % 3 {
				case 1:
					path = append(path, recordv1.State_STATE_DISPATCHED)
				case 2:
					path = append(path, recordv1.State_STATE_DISPATCHED, recordv1.State_STATE_OUTCOME_UNKNOWN)
				}
				for _, to := range path {
					if err := e.step(tx, x, to, now, recordv1.EntryKind_ENTRY_KIND_TRANSITION, "seeded", false); err != nil {
						return err
					}
				}
				ids = append(ids, x.GetId())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer func() { e.Close(); st.Close() }()
		time.Sleep(time.Minute)
		synctest.Wait()
		var notDone []string
		for _, id := range ids {
			if x, _ := st.Execution(id); x.GetState() != recordv1.State_STATE_COMPLETED {
				notDone = append(notDone, id+" "+lifecycle.Name(x.GetState()))
			}
		}
		if len(notDone) > 0 {
			t.Errorf("%d of %d executions not completed after start-up, e.g. %v", len(notDone), len(ids), notDone[:min(5, len(notDone))])
		}
		// Authorized ones were dispatched (the fake loses every answer)
		// and then asked; dispatched ones were asked, never re-sent.
		for i, id := range ids {
			if n := len(ch.times(id)); n != 1 {
				t.Errorf("%s (seeded %d) was asked %d times, want 1", id, i%3, n)
				break
			}
		}
	})
}

// loadResult is what one run of the recovery load scenario measured.
type loadResult struct {
	executions, queries, attaches int
	create, start, settle         time.Duration
}

// recoveryLoad is the recovery queue scenario of issue 10: n executions of
// the slow target (plus a few of a fast one, accepted last) were left
// outcome_unknown by one run; the next run, on the same Badger data dir,
// recovers them while an agent re-issues some of them (attaching retries,
// bounded in count) and the slow target needs settleAfter queries per
// execution. It fails tb unless every execution settles, none is moved to
// needs_review, no query comes before its backoff floor, no target sees
// more than PerTarget queries at once, the fast target is not starved, and
// the slow target's executions settle oldest first.
func recoveryLoad(tb testing.TB, n int) loadResult {
	tb.Helper()
	const (
		nFast       = 50
		settleAfter = 2
		storm       = 1000
	)
	rc := RecoveryConfig{Interval: 100 * time.Millisecond, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, MaxAttempts: settleAfter, Workers: 24, PerTarget: 16}
	dir := tb.TempDir()
	open := func() *store.Store {
		kv, err := badgerkv.Open(dir, badgerkv.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		st, err := store.New(store.Config{KV: kv})
		if err != nil {
			tb.Fatal(err)
		}
		return st
	}

	// Run 1 left n+nFast executions outcome_unknown, all due at the same
	// instant (as after a restart that found them all dispatched), so the
	// order among them is the tie rule's: oldest accepted first. They are
	// written directly, in large groups, as Submit and markUnknown would
	// have left them: the scenario is about run 2.
	created := time.Now()
	st := open()
	e := newRecoveryEngine(tb, st, newFakeTargets(0), rc)
	total := n + nFast
	seedUnknown(tb, e, "order", 1, n, created.Add(-30*time.Minute), created.Add(-10*time.Minute))
	seedUnknown(tb, e, "ping", 1, nFast, created.Add(-20*time.Minute), created.Add(-10*time.Minute))
	st.Close()

	// Run 2: recover them all.
	st = open()
	defer st.Close()
	ch := newFakeTargets(settleAfter)
	ch.delay["slow"] = time.Millisecond
	e = newRecoveryEngine(tb, st, ch, rc)
	began := time.Now()
	if err := e.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	defer e.Close()
	res := loadResult{executions: total, start: time.Since(began), create: began.Sub(created)}

	// The storm: attaching retries of random orders, bounded in count.
	r := rand.New(rand.NewPCG(5, 6))
	picks := make([]int, storm)
	for i := range picks {
		picks[i] = 1 + r.IntN(n)
	}
	var bad atomic.Int32
	var stormWG sync.WaitGroup
	var cursor atomic.Int32
	for range 4 {
		stormWG.Go(func() {
			for i := int(cursor.Add(1)) - 1; i < storm; i = int(cursor.Add(1)) - 1 {
				r := submitOrder(tb, e, "order", picks[i])
				if r.Disposition == recordv1.Disposition_DISPOSITION_NEW {
					bad.Add(1)
				}
			}
		})
	}
	stormWG.Wait()
	res.attaches = storm
	if bad.Load() > 0 {
		tb.Errorf("%d attaching retries were answered new: a second execution of an accepted intent", bad.Load())
	}

	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		ch.mu.Lock()
		settled := len(ch.settled)
		ch.mu.Unlock()
		if settled >= total {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d executions settled in 3 minutes", settled, total)
		}
	}
	// Completion is journaled after the target answered: wait for the
	// last of those commits.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		xs, err := st.List(store.Filter{State: recordv1.State_STATE_OUTCOME_UNKNOWN, Limit: 1})
		if err != nil {
			tb.Fatal(err)
		}
		if len(xs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s is still outcome_unknown a minute after the target answered for it", xs[0].GetId())
		}
	}
	res.settle = time.Since(began)

	// Every execution completed; none needs review.
	states := map[string]int{}
	type rec struct {
		id       string
		accepted time.Time
		target   string
	}
	var recs []rec
	f := store.Filter{Limit: 1000, OldestFirst: true}
	for {
		xs, err := st.List(f)
		if err != nil {
			tb.Fatal(err)
		}
		for _, x := range xs {
			states[lifecycle.Name(x.GetState())]++
			recs = append(recs, rec{x.GetId(), x.GetAcceptedAt().AsTime(), x.GetTarget()})
		}
		if len(xs) < f.Limit {
			break
		}
		f.After = xs[len(xs)-1].GetId()
	}
	if diff := cmp.Diff(map[string]int{"completed": total}, states); diff != "" {
		tb.Errorf("final states (-want +got):\n%s", diff)
	}

	// No query before its backoff floor; no target over its limit.
	ch.mu.Lock()
	var early int
	for _, ts := range ch.asked {
		res.queries += len(ts)
		for i := 1; i < len(ts); i++ {
			if ts[i].Sub(ts[i-1]) < rc.MinBackoff {
				early++
			}
		}
	}
	settledOrder := slices.Clone(ch.settled)
	busy := ch.maxBusy["slow"]
	ch.mu.Unlock()
	if early > 0 {
		tb.Errorf("%d queries came less than MinBackoff (%s) after the previous query of the same execution", early, rc.MinBackoff)
	}
	if busy > rc.PerTarget {
		tb.Errorf("the slow target had %d queries at once, want at most PerTarget (%d)", busy, rc.PerTarget)
	}

	// The fast target is not starved by the slow one: its executions
	// (accepted last) settle while most of the slow ones are still open.
	var slowBefore, fastSeen int
	for _, id := range settledOrder {
		if fastSeen == nFast {
			break
		}
		if i := slices.IndexFunc(recs, func(r rec) bool { return r.id == id }); i >= 0 && recs[i].target == "fast" {
			fastSeen++
		} else {
			slowBefore++
		}
	}
	if slowBefore > n/2 {
		tb.Errorf("%d of %d slow executions settled before the last fast one: the slow target starved the fast one", slowBefore, n)
	}

	// Oldest settle first: Spearman's rank correlation between acceptance
	// order and settle order of the slow target's executions.
	slices.SortFunc(recs, func(a, b rec) int {
		if c := a.accepted.Compare(b.accepted); c != 0 {
			return c
		}
		return cmpString(a.id, b.id)
	})
	acceptRank := map[string]int{}
	for _, r := range recs {
		if r.target == "slow" {
			acceptRank[r.id] = len(acceptRank)
		}
	}
	var d2 float64
	var k int
	for _, id := range settledOrder {
		if a, ok := acceptRank[id]; ok {
			d := float64(a - k)
			d2 += d * d
			k++
		}
	}
	rho := 1 - 6*d2/(float64(k)*(float64(k)*float64(k)-1))
	if rho < 0.9 {
		tb.Errorf("rank correlation of acceptance and settle order = %.3f, want >= 0.9 (oldest settle first)", rho)
	}
	tb.Logf("%d executions (%d slow, %d fast), %d attaching retries: made unknown in %s; start-up scan %s, all settled %s after start, %d queries, settle-order rank correlation %.3f",
		total, n, nFast, storm, res.create.Round(time.Millisecond), res.start.Round(time.Millisecond), res.settle.Round(time.Millisecond), res.queries, rho)
	return res
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestRecoveryQueueUnderLoad(t *testing.T) {
	n := 5000
	if testing.Short() {
		n = 500
	}
	recoveryLoad(t, n)
}

// BenchmarkRecovery5000 measures how long run 2 of the load scenario takes
// to settle 5,000 unknown executions (reported as settle-s/op).
func BenchmarkRecovery5000(b *testing.B) {
	for b.Loop() {
		r := recoveryLoad(b, 5000)
		b.ReportMetric(r.settle.Seconds(), "settle-s/op")
		b.ReportMetric(r.start.Seconds(), "start-s/op")
	}
}

// seedUnknown writes executions of tool with arguments {"n": from..to} as
// Submit and markUnknown leave them after a lost answer: accepted (indexed
// for matching), authorized, dispatched, outcome_unknown with NextRecoveryAt
// due. Acceptance times start at accepted and increase with n.
func seedUnknown(tb testing.TB, e *Engine, toolName string, from, to int, accepted, due time.Time) {
	tb.Helper()
	tool := e.cfg.Catalog.Tools[toolName]
	target := e.cfg.Catalog.Targets[tool.Target]
	const batch = 200
	for lo := from; lo <= to; lo += batch {
		err := e.st.Update(context.Background(), func(tx *store.Tx) error {
			for i := lo; i <= min(to, lo+batch-1); i++ {
				// As Submit fingerprints the request.
				args, err := tool.PrepareArguments(json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
				if err != nil {
					return err
				}
				repeatOf, plain := tool.SplitRepeatOf(args)
				record, err := e.cfg.Fingerprinter.Record(intentOf("alice", "actor:alice", tool, target, e.cfg.Channels[target.Channel].Identity(tool, target), plain, repeatOf), tool.Fingerprint.Ignore, tool.Fingerprint.Secret)
				if err != nil {
					return err
				}
				stored, err := storedArguments(plain, tool.Fingerprint.Secret)
				if err != nil {
					return err
				}
				now := accepted.Add(time.Duration(i) * time.Microsecond)
				x := &recordv1.Execution{
					Id: e.cfg.NewID(), Fingerprint: e.cfg.Fingerprinter.Sum(record), Actor: "alice", IntentScope: "actor:alice",
					Tool: tool.Name, Target: tool.Target, Channel: string(target.Channel), Replay: string(tool.Replay),
					CanonicalIntent: record, Arguments: stored, AttachWindowSeconds: int64(tool.AttachWindow / time.Second),
					AcceptedAt: timestamppb.New(now),
				}
				for j, to := range []recordv1.State{recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AUTHORIZED, recordv1.State_STATE_DISPATCHED, recordv1.State_STATE_OUTCOME_UNKNOWN} {
					if to == recordv1.State_STATE_OUTCOME_UNKNOWN {
						x.NextRecoveryAt = timestamppb.New(due)
					}
					if err := e.step(tx, x, to, now, recordv1.EntryKind_ENTRY_KIND_TRANSITION, "seeded", j == 0); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatalf("seed executions %d..%d: %v", lo, min(to, lo+batch-1), err)
		}
	}
}

// TestCloseStopsWorkersMidQuery: Close returns while a target still holds a
// query, and no worker or timer is left behind (synctest fails the test if
// a goroutine of the bubble outlives it).
func TestCloseStopsWorkersMidQuery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memStore(t)
		defer st.Close()
		ch := newFakeTargets(0)
		ch.delay["slow"] = time.Hour
		e := newRecoveryEngine(t, st, ch, RecoveryConfig{Interval: time.Second, MinBackoff: time.Second, MaxBackoff: time.Hour})
		if err := e.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		id := submitOrder(t, e, "order", 1).Execution.GetId()
		time.Sleep(2 * time.Second) // the query started at +1s and is held
		synctest.Wait()
		if n := len(ch.times(id)); n != 1 {
			t.Fatalf("%d queries in flight, want 1", n)
		}
		before := time.Now()
		e.Close()
		if waited := time.Since(before); waited != 0 {
			t.Errorf("Close waited %s for a held query, want it to cut the query short", waited)
		}
		x, err := st.Execution(id)
		if err != nil {
			t.Fatal(err)
		}
		if x.GetState() != recordv1.State_STATE_OUTCOME_UNKNOWN {
			t.Errorf("state after Close = %s, want outcome_unknown (recovered at the next start)", lifecycle.Name(x.GetState()))
		}
	})
}

// TestFailedMarkUnknownIsRetried: when the transition into outcome_unknown
// cannot be written after a dispatch lost its answer, the execution does not
// stay dispatched until the next start: the transition is retried with
// backoff, then the execution is recovered.
func TestFailedMarkUnknownIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, kv := memStore(t)
		ch := newFakeTargets(1)
		ch.onDispatch = func() { kv.fail.Store(true) }
		e := newRecoveryEngine(t, st, ch, RecoveryConfig{Interval: time.Hour, MinBackoff: time.Second, MaxBackoff: time.Hour})
		if err := e.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer func() { e.Close(); st.Close() }()
		id := submitOrder(t, e, "order", 1).Execution.GetId()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if x, _ := st.Execution(id); x.GetState() != recordv1.State_STATE_DISPATCHED {
			t.Fatalf("state %s while the store fails, want dispatched", lifecycle.Name(x.GetState()))
		}
		kv.fail.Store(false)
		time.Sleep(10 * time.Second) // retries at +1s, +3s (failing), +7s; then the query
		synctest.Wait()
		want := []string{"accepted", "authorized", "dispatched", "outcome_unknown", "completed"}
		if diff := cmp.Diff(want, transitionPath(t, st, id)); diff != "" {
			t.Errorf("transitions (-want +got):\n%s", diff)
		}
		if n := len(ch.times(id)); n != 1 {
			t.Errorf("%d status queries, want 1", n)
		}
	})
}

// TestRefusedSendWhoseRecordFailsIsRecovered: a send the target refused
// (nothing sent) whose record back to authorized did not commit is not left
// dispatched with nothing working on it until the next start: recovery
// takes it up. Found by the simulator (controlplane/sim, seed 11802).
func TestRefusedSendWhoseRecordFailsIsRecovered(t *testing.T) {
	kv := memkv.New()
	ch := &fakeChannel{dispatch: []AttemptClass{NotSent}, block: make(chan struct{})}
	h := newHarnessKV(t, kv, "", ch, func(*Config) {})
	r := h.submit(t, "alice", "deploy", `{"service":"api","version":"1"}`)
	kv.FailNextCommit(backend.ErrNotCommitted) // the record of the refused send
	close(ch.block)
	x := h.waitState(t, r.Execution.GetId(), recordv1.State_STATE_COMPLETED)
	if got := ch.effects.Load(); got != 1 {
		t.Errorf("effects = %d, want 1", got)
	}
	if x.GetState() != recordv1.State_STATE_COMPLETED {
		t.Errorf("state %s", lifecycle.Name(x.GetState()))
	}
}

// slowKV is a backend whose commits take delay of the clock once armed (a
// loaded database).
type slowKV struct {
	*memkv.KV
	delay atomic.Int64
}

func (k *slowKV) Commit(writes []backend.Write) error {
	time.Sleep(time.Duration(k.delay.Load()))
	return k.KV.Commit(writes)
}

// TestSendIsToldItsDelay: a send learns how long after its recorded send
// time it starts (Call.Delay), so the channel can end it by that time plus
// its in-flight bound, however long the commit that recorded it took: the
// settle point is counted from that record. Found by the simulator
// (controlplane/sim -sim.slow): after a 25 s commit a request was still in
// flight after the settle point.
func TestSendIsToldItsDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kv := &slowKV{KV: memkv.New()}
		ch := &fakeChannel{}
		h := newHarnessKV(t, kv, "", ch, func(c *Config) { c.Clock = time.Now })
		kv.delay.Store(int64(5 * time.Second))
		h.submit(t, "alice", "order", `{"sku":"a-1"}`)
		kv.delay.Store(0)
		synctest.Wait()
		ch.mu.Lock()
		got := ch.delay
		ch.mu.Unlock()
		if got != 5*time.Second {
			t.Errorf("Call.Delay = %s, want the 5s the commit of dispatched_at took", got)
		}
		if b := (Call{Delay: got}).Budget(time.Minute); b != 55*time.Second {
			t.Errorf("Budget(1m) = %s, want 55s", b)
		}
	})
}
