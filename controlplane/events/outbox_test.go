package events_test

import (
	"context"
	"path/filepath"
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

func newOutbox(t *testing.T, st *store.Store, url, ca string) *events.Outbox {
	t.Helper()
	sink, err := events.ParseSink("ops url=" + url + " secret=ops-webhook allow_private=true ca_file=" + ca)
	if err != nil {
		t.Fatal(err)
	}
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
		st.SetEventSource(events.Source(optIn))
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
	st.SetEventSource(events.Source(nil))
	journal(t, st, step("act_A", "deploy", recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AWAITING_APPROVAL, recordv1.EntryKind_ENTRY_KIND_TRANSITION))
	wrong, err := events.ParseSink("ops url=" + rcv.URL + " secret=ops-webhook allow_private=true ca_file=" + ca)
	if err != nil {
		t.Fatal(err)
	}
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
	st.SetEventSource(events.Source(nil))
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
