package events_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/events"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/internal/backoff"
	"github.com/latchhq/latch/internal/testing/webhooktest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

const secret = webhooktest.Secret

// journal appends transition records as the engine would, one update each.
func journal(t testing.TB, st *store.Store, entries ...*recordv1.JournalEntry) {
	t.Helper()
	for _, e := range entries {
		if err := st.Update(context.Background(), func(tx *store.Tx) error {
			_, err := tx.Append(e)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func step(id, tool string, from, to recordv1.State, kind recordv1.EntryKind) *recordv1.JournalEntry {
	now := timestamppb.Now()
	return &recordv1.JournalEntry{Time: now, ExecutionId: id, From: from, To: to, EntryKind: kind, Actor: "alice",
		Execution: &recordv1.Execution{Id: id, Tool: tool, Actor: "alice", State: to, DispatchedAt: now, UpdatedAt: now}}
}

// everyKind journals one record of each journal-caused event kind (and
// one that causes none) plus an execution left outcome_unknown.
func everyKind(t *testing.T, st *store.Store) {
	tr := recordv1.EntryKind_ENTRY_KIND_TRANSITION
	journal(t, st,
		step("act_A", "deploy", recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AWAITING_APPROVAL, tr),
		step("act_B", "deploy", recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.State_STATE_NEEDS_REVIEW, recordv1.EntryKind_ENTRY_KIND_RECOVERY),
		step("act_C", "deploy", recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.State_STATE_COMPLETED, recordv1.EntryKind_ENTRY_KIND_RECOVERY),
		step("act_D", "notify", recordv1.State_STATE_DISPATCHED, recordv1.State_STATE_COMPLETED, tr),
		step("act_E", "deploy", recordv1.State_STATE_DISPATCHED, recordv1.State_STATE_COMPLETED, tr), // not opted in: no event
		&recordv1.JournalEntry{Time: timestamppb.Now(), EntryKind: recordv1.EntryKind_ENTRY_KIND_SESSION_STARTED, Actor: "bob",
			Session: &recordv1.Session{Id: "ses_1", Actor: "bob", State: recordv1.SessionState_SESSION_STATE_PENDING}},
	)
	// An execution outcome_unknown since an hour ago (the timed event).
	old := timestamppb.New(time.Now().Add(-time.Hour))
	x := &recordv1.Execution{Id: "act_F", Tool: "deploy", Actor: "alice", State: recordv1.State_STATE_OUTCOME_UNKNOWN, DispatchedAt: old, UpdatedAt: old}
	if err := st.Update(context.Background(), func(tx *store.Tx) error { return tx.PutExecution(x, false) }); err != nil {
		t.Fatal(err)
	}
}

var wantKinds = map[string]bool{
	"latch.approval_requested": true, "latch.needs_review": true, "latch.outcome_resolved": true,
	"latch.completed": true, "latch.session_awaiting_authorization": true, "latch.outcome_unknown": true,
}

// opsSink is the sink "ops" of the receiver at url (extra: more of its spec).
func opsSink(t testing.TB, url, ca string, extra ...string) events.Sink {
	t.Helper()
	spec := "ops url=" + url + " secret=ops-webhook allow_private=true"
	if ca != "" {
		spec += " ca_file=" + ca
	}
	for _, x := range extra {
		spec += " " + x
	}
	sink, err := events.ParseSink(spec)
	if err != nil {
		t.Fatal(err)
	}
	return sink
}

func newOutbox(t *testing.T, st *store.Store, url, ca string) *events.Outbox {
	t.Helper()
	sink := opsSink(t, url, ca)
	o, err := events.New(events.Config{Store: st, Sinks: []events.Sink{sink}, ConsoleURL: "https://latch.example/ui/",
		Secret: func(name string) (string, error) { return secret, nil }, UnknownAfter: time.Minute,
		Backoff: backoff.Policy{Min: time.Millisecond, Max: time.Millisecond}, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func optIn(tool string) bool { return tool == "notify" }

// TestEveryKindOncePerIDAcrossACrash: the control plane's store and
// drainer stop (the process dies) after a receiver got a delivery but
// before the delivery was recorded; after the restart on the same Badger
// files every event kind reaches the receiver, signed, and the one
// delivered twice carries the same ID both times.
func TestEveryKindOncePerIDAcrossACrash(t *testing.T) {
	rcv := webhooktest.New(t)
	ca := rcv.CAFile
	dir := filepath.Join(t.TempDir(), "db")
	open := func() *store.Store {
		kv, err := badgerkv.Open(dir, badgerkv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.New(store.Config{KV: kv})
		if err != nil {
			t.Fatal(err)
		}
		st.SetEventSource(events.Source(optIn, []events.Sink{opsSink(t, rcv.URL, ca)}))
		return st
	}
	st := open()
	everyKind(t, st)
	rcv.HoldNext()
	ctx, cancel := context.WithCancel(context.Background())
	o := newOutbox(t, st, rcv.URL, ca)
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	select {
	case <-rcv.Held():
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery reached the receiver")
	}
	// The crash: nothing more is recorded after the receiver has it.
	st.Close()
	cancel()
	rcv.Release()
	<-done
	first, _, _ := rcv.Snapshot()

	st = open()
	defer st.Close()
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	o2 := newOutbox(t, st, rcv.URL, ca)
	go o2.Run(ctx2)
	deadline := time.Now().Add(30 * time.Second)
	for {
		pending, err := st.Events(store.EventFilter{Pending: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == 0 {
			if all, _ := st.Events(store.EventFilter{}); len(all) == len(wantKinds) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("still pending after the restart: %v", pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
	seen, kinds, bad := rcv.Snapshot()
	if bad != 0 {
		t.Errorf("%d deliveries failed signature or body checks", bad)
	}
	if len(first) != 1 {
		t.Fatalf("before the crash the receiver saw %v, want the one held delivery", first)
	}
	for id := range first {
		if seen[id] != 2 {
			t.Errorf("the event delivered before the crash (%s) was seen %d times, want again after the restart, same ID", id, seen[id])
		}
	}
	got := map[string]bool{}
	for id, k := range kinds {
		got[k] = true
		if seen[id] > 2 || (seen[id] == 2 && first[id] != 1) {
			t.Errorf("event %s (%s) delivered %d times (before the crash %d), want once, or twice across the crash", id, k, seen[id], first[id])
		}
	}
	for k := range wantKinds {
		if !got[k] {
			t.Errorf("receiver never saw an event of kind %s (saw %v)", k, kinds)
		}
	}
	if len(kinds) != len(wantKinds) {
		t.Errorf("receiver saw %d event IDs, want %d (one per kind): %v", len(kinds), len(wantKinds), kinds)
	}
}

// TestDeadLetterAndReplay: a sink that refuses every delivery gets the
// bounded attempts, then the event is dead-lettered; replay delivers it
// again under the same ID.
func TestDeadLetterAndReplay(t *testing.T) {
	rcv := webhooktest.New(t)
	ca := rcv.CAFile
	st, err := store.New(store.Config{KV: memkv.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	wrong := opsSink(t, rcv.URL, ca)
	st.SetEventSource(events.Source(nil, []events.Sink{wrong}))
	journal(t, st, step("act_A", "deploy", recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AWAITING_APPROVAL, recordv1.EntryKind_ENTRY_KIND_TRANSITION))
	o, err := events.New(events.Config{Store: st, Sinks: []events.Sink{wrong}, MaxAttempts: 3,
		Secret:  func(string) (string, error) { return "whsec_" + "d3Jvbmcgc2VjcmV0IG9mIHRoZSB0ZXN0", nil }, // not the receiver's: 401
		Backoff: backoff.Policy{Min: time.Nanosecond, Max: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := o.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	dead, err := st.Events(store.EventFilter{Dead: true})
	if err != nil || len(dead) != 1 || dead[0].GetDeliveries()[0].GetAttempts() != 3 {
		t.Fatalf("dead letters = %v, %v; want the one event after 3 attempts", dead, err)
	}
	if p, _ := st.Events(store.EventFilter{Pending: true}); len(p) != 0 {
		t.Errorf("a dead event is still queued: %v", p)
	}
	o2, err := events.New(events.Config{Store: st, Sinks: []events.Sink{wrong}, Secret: func(string) (string, error) { return secret, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := o2.Replay(context.Background(), nil); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v; want 1", n, err)
	}
	if err := o2.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen, _, _ := rcv.Snapshot()
	if seen[dead[0].GetId()] != 1 {
		t.Errorf("after replay the receiver saw %v, want %s once", seen, dead[0].GetId())
	}
	if d, _ := st.Events(store.EventFilter{Dead: true}); len(d) != 0 {
		t.Errorf("still dead-lettered after replay: %v", d)
	}
}

// TestOutboxRowCommitsWithItsRecord: a transition whose update fails
// leaves no event; one that commits leaves exactly its event.
func TestOutboxRowCommitsWithItsRecord(t *testing.T) {
	st, err := store.New(store.Config{KV: memkv.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.SetEventSource(events.Source(nil, []events.Sink{opsSink(t, "https://127.0.0.1:1/hook", "")}))
	e := step("act_A", "deploy", recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AWAITING_APPROVAL, recordv1.EntryKind_ENTRY_KIND_TRANSITION)
	err = st.Update(context.Background(), func(tx *store.Tx) error {
		if _, err := tx.Append(e); err != nil {
			return err
		}
		return context.Canceled // the transition is refused after its record was appended
	})
	if err == nil {
		t.Fatal("update did not fail")
	}
	if evs, _ := st.Events(store.EventFilter{}); len(evs) != 0 {
		t.Fatalf("a failed update left events %v", evs)
	}
	journal(t, st, e)
	evs, err := st.Events(store.EventFilter{})
	if err != nil || len(evs) != 1 || evs[0].GetId() != events.EventID(0) || evs[0].GetKind() != recordv1.EventKind_EVENT_KIND_APPROVAL_REQUESTED {
		t.Fatalf("events = %v, %v; want approval_requested evt_0000000000000000", evs, err)
	}
}

// TestAnEventNoSinkTakesIsNotKept: an event is written with one delivery
// per sink that takes its kind, and not at all when no sink does, so the
// queue never fills with events nobody will send.
func TestAnEventNoSinkTakesIsNotKept(t *testing.T) {
	st, err := store.New(store.Config{KV: memkv.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reviews := opsSink(t, "https://127.0.0.1:1/hook", "", "events=needs_review")
	chat, err := events.ParseSink("chat url=https://127.0.0.1:1/slack format=slack allow_private=true")
	if err != nil {
		t.Fatal(err)
	}
	st.SetEventSource(events.Source(nil, []events.Sink{reviews, chat}))
	journal(t, st, step("act_A", "deploy", recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AWAITING_APPROVAL, recordv1.EntryKind_ENTRY_KIND_TRANSITION),
		step("act_B", "deploy", recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.State_STATE_NEEDS_REVIEW, recordv1.EntryKind_ENTRY_KIND_RECOVERY))
	evs, err := st.Events(store.EventFilter{Oldest: true})
	if err != nil || len(evs) != 2 {
		t.Fatalf("events = %v, %v; want two", evs, err)
	}
	sinksOf := func(ev *recordv1.OutboxEvent) (names []string) {
		for _, d := range ev.GetDeliveries() {
			names = append(names, d.GetSink())
		}
		return names
	}
	if got := sinksOf(evs[0]); len(got) != 1 || got[0] != "chat" {
		t.Errorf("approval_requested is addressed to %v, want [chat] (ops takes needs_review only)", got)
	}
	if got := sinksOf(evs[1]); len(got) != 2 {
		t.Errorf("needs_review is addressed to %v, want [ops chat]", got)
	}

	st.SetEventSource(events.Source(nil, []events.Sink{reviews}))
	journal(t, st, step("act_C", "deploy", recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AWAITING_APPROVAL, recordv1.EntryKind_ENTRY_KIND_TRANSITION))
	if evs, _ := st.Events(store.EventFilter{}); len(evs) != 2 {
		t.Errorf("an approval no sink takes was kept: %d events, want 2", len(evs))
	}
}

// TestARemovedSinkDeadLetters: a delivery to a sink no longer configured
// goes to the dead-letter list with a reason (the event no longer holds
// the queue), and a replay once the sink is back delivers it.
func TestARemovedSinkDeadLetters(t *testing.T) {
	rcv := webhooktest.New(t)
	st, err := store.New(store.Config{KV: memkv.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	gone, err := events.ParseSink("old url=" + rcv.URL + " secret=ops-webhook allow_private=true ca_file=" + rcv.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	ops := opsSink(t, rcv.URL, rcv.CAFile)
	st.SetEventSource(events.Source(nil, []events.Sink{ops, gone}))
	journal(t, st, step("act_A", "deploy", recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AWAITING_APPROVAL, recordv1.EntryKind_ENTRY_KIND_TRANSITION))
	o := newOutbox(t, st, rcv.URL, rcv.CAFile) // "ops" only
	if err := o.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p, _ := st.Events(store.EventFilter{Pending: true}); len(p) != 0 {
		t.Fatalf("the event still holds the queue: %v", p)
	}
	dead, err := st.Events(store.EventFilter{Dead: true})
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters = %v, %v; want the event", dead, err)
	}
	for _, d := range dead[0].GetDeliveries() {
		switch {
		case d.GetSink() == "ops" && d.GetDeliveredAt() == nil:
			t.Errorf("ops did not get it: %v", d)
		case d.GetSink() == "old" && (!d.GetDead() || !strings.Contains(d.GetLastError(), "no event sink is named")):
			t.Errorf("the removed sink's delivery = %v, want dead with the reason", d)
		}
	}
	back, err := events.New(events.Config{Store: st, Sinks: []events.Sink{ops, gone}, Secret: func(string) (string, error) { return secret, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := back.Replay(context.Background(), nil); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v; want 1", n, err)
	}
	if err := back.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if seen, _, _ := rcv.Snapshot(); seen[dead[0].GetId()] != 2 {
		t.Errorf("the receiver saw %v, want the event twice (ops, then old after the replay)", seen)
	}
}

// TestDrainReachesPastABackloggedSink: with one sink down and more events
// queued for it than a page holds, a new event still reaches the sink
// that answers.
func TestDrainReachesPastABackloggedSink(t *testing.T) {
	rcv := webhooktest.New(t)
	st, err := store.New(store.Config{KV: memkv.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ops := opsSink(t, rcv.URL, rcv.CAFile)
	down, err := events.ParseSink("down url=https://127.0.0.1:1/hook allow_private=true format=slack")
	if err != nil {
		t.Fatal(err)
	}
	st.SetEventSource(events.Source(nil, []events.Sink{ops, down}))
	const backlog = 520 // more than one page of the queue
	if err := st.Update(context.Background(), func(tx *store.Tx) error {
		for i := 0; i < backlog; i++ {
			if _, err := tx.Append(step(fmt.Sprintf("act_%04d", i), "deploy", recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AWAITING_APPROVAL, recordv1.EntryKind_ENTRY_KIND_TRANSITION)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	o, err := events.New(events.Config{Store: st, Sinks: []events.Sink{ops, down}, Secret: func(string) (string, error) { return secret, nil },
		MaxAttempts: 100, Backoff: backoff.Policy{Min: time.Hour, Max: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	journal(t, st, step("act_new", "deploy", recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AWAITING_APPROVAL, recordv1.EntryKind_ENTRY_KIND_TRANSITION))
	if err := o.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen, _, _ := rcv.Snapshot()
	if len(seen) != backlog+1 || seen[events.EventID(backlog)] != 1 {
		t.Errorf("the answering sink got %d events (the new one %d times), want %d and the new one once", len(seen), seen[events.EventID(backlog)], backlog+1)
	}
	if p, _ := st.Events(store.EventFilter{Pending: true, Limit: 10000}); len(p) != backlog+1 {
		t.Errorf("%d events queued, want all %d (the down sink's deliveries wait in backoff)", len(p), backlog+1)
	}
}

// TestPruneKeepsWhatIsNotDelivered: past the retention, delivered events
// are removed; a dead-lettered one and a queued one stay, and a timed
// outcome_unknown event is never made again for its execution.
func TestPruneKeepsWhatIsNotDelivered(t *testing.T) {
	rcv := webhooktest.New(t)
	st, err := store.New(store.Config{KV: memkv.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ops := opsSink(t, rcv.URL, rcv.CAFile)
	st.SetEventSource(events.Source(nil, []events.Sink{ops}))
	tr := recordv1.EntryKind_ENTRY_KIND_TRANSITION
	journal(t, st, step("act_A", "deploy", recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AWAITING_APPROVAL, tr))
	old := timestamppb.New(time.Now().Add(-time.Hour))
	x := &recordv1.Execution{Id: "act_U", Tool: "deploy", Actor: "alice", State: recordv1.State_STATE_OUTCOME_UNKNOWN, DispatchedAt: old, UpdatedAt: old}
	if err := st.Update(context.Background(), func(tx *store.Tx) error { return tx.PutExecution(x, false) }); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	clock := func() time.Time { return now }
	o, err := events.New(events.Config{Store: st, Sinks: []events.Sink{ops}, Secret: func(string) (string, error) { return secret, nil },
		UnknownAfter: time.Minute, Retention: 24 * time.Hour, Clock: clock, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	waitFor(t, func() bool {
		p, _ := st.Events(store.EventFilter{Pending: true})
		all, _ := st.Events(store.EventFilter{})
		return len(p) == 0 && len(all) == 2
	})
	cancel()
	<-done
	// A dead letter and a queued event, both older than the retention.
	gone := opsSink(t, rcv.URL, rcv.CAFile)
	gone.Name = "gone"
	st.SetEventSource(events.Source(nil, []events.Sink{gone}))
	journal(t, st, step("act_B", "deploy", recordv1.State_STATE_OUTCOME_UNKNOWN, recordv1.State_STATE_NEEDS_REVIEW, recordv1.EntryKind_ENTRY_KIND_RECOVERY),
		step("act_C", "deploy", recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AWAITING_APPROVAL, tr))
	if err := o.Drain(context.Background()); err != nil { // act_B's and act_C's: gone is not configured, so both dead
		t.Fatal(err)
	}
	dead, err := st.Events(store.EventFilter{Dead: true, Oldest: true})
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead letters = %v, %v; want act_B's and act_C's", dead, err)
	}
	if err := st.Update(context.Background(), func(tx *store.Tx) error { // act_C's back in the queue
		ev, err := tx.Event(dead[1].GetId())
		if err != nil {
			return err
		}
		ev.Deliveries[0].Dead = false
		return tx.PutEvent(ev)
	}); err != nil {
		t.Fatal(err)
	}

	now = now.Add(25 * time.Hour)
	n, err := o.Prune(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want the 2 delivered events", n, err)
	}
	left, err := st.Events(store.EventFilter{Oldest: true})
	if err != nil || len(left) != 2 || left[0].GetExecutionId() != "act_B" || left[1].GetExecutionId() != "act_C" {
		t.Fatalf("after pruning: %v, %v; want act_B's dead letter and act_C's queued event", left, err)
	}
	st.SetEventSource(events.Source(nil, []events.Sink{ops}))
	if err := st.Update(context.Background(), func(tx *store.Tx) error {
		_, err := tx.PutEventOnce("act_U", &recordv1.OutboxEvent{Id: events.UnknownEventID("act_U")})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if ev, err := st.Event(events.UnknownEventID("act_U")); err == nil {
		t.Errorf("the pruned outcome_unknown event was made again: %v", ev)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
