package store_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/internal/testing/storetest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// step mirrors engine.step: the execution moves to `to`, the journal record
// carries its snapshot (fields fixed at acceptance only in the accepted
// record, as engine appendJournaled writes them), the record gets the
// journal index.
func step(tx *store.Tx, x *recordv1.Execution, to recordv1.State, index bool) error {
	from := x.GetState()
	x.State = to
	snap := proto.Clone(x).(*recordv1.Execution)
	if to != recordv1.State_STATE_ACCEPTED {
		snap.CanonicalIntent, snap.Arguments, snap.Evidence = nil, nil, nil
	}
	idx, err := tx.Append(&recordv1.JournalEntry{ExecutionId: x.GetId(), Kind: "transition", From: from, To: to, Execution: snap})
	if err != nil {
		return err
	}
	x.JournalIndex = uint64(idx)
	return tx.PutExecution(x, index)
}

// execution writes one execution's life: accepted, authorized, dispatched
// and, when settled, completed with a stored result and then an attach.
func execution(tx *store.Tx, i int, settled bool) error {
	id := fmt.Sprintf("act_%026d", i)
	x := &recordv1.Execution{Id: id, Fingerprint: fmt.Sprintf("hmac-sha256:%064x", i), Actor: "alice", IntentScope: "actor:alice",
		Tool: "deploy", Channel: "http", CanonicalIntent: []byte(`{"v":` + strconv.Itoa(i) + `}`), Arguments: []byte(`{"version":"1"}`),
		Evidence: &recordv1.Evidence{JsonrpcId: strconv.Itoa(i)}, AcceptedAt: timestamppb.New(time.Unix(1_800_000_000, 0))}
	tx.Fresh(id)
	for _, st := range []recordv1.State{recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AUTHORIZED, recordv1.State_STATE_DISPATCHED} {
		if err := step(tx, x, st, st == recordv1.State_STATE_ACCEPTED); err != nil {
			return err
		}
	}
	if !settled {
		return nil
	}
	sum, err := tx.PutResult(id, &recordv1.Result{Status: 201, Body: []byte(`{"ok":true}`), Headers: map[string]string{"B": "2", "A": "1"}})
	if err != nil {
		return err
	}
	x.ResultRef, x.ResultSha256, x.Outcome, x.TargetStatus = store.ResultRef(sum), sum, recordv1.Outcome_OUTCOME_SUCCEEDED, 201
	if err := step(tx, x, recordv1.State_STATE_COMPLETED, false); err != nil {
		return err
	}
	_, err = tx.Append(&recordv1.JournalEntry{ExecutionId: id, Kind: "attach", From: x.GetState(), To: x.GetState(), Execution: proto.Clone(x).(*recordv1.Execution)})
	return err
}

func idOf(i int) string { return fmt.Sprintf("act_%026d", i) }

// build writes n executions, every unsettledEvery-th left dispatched (0:
// none), in updates of 500.
func build(tb testing.TB, s *store.Store, n, unsettledEvery int) {
	tb.Helper()
	for lo := 0; lo < n; lo += 500 {
		err := s.Update(context.Background(), func(tx *store.Tx) error {
			for i := lo; i < min(lo+500, n); i++ {
				if err := execution(tx, i, unsettledEvery == 0 || i%unsettledEvery != 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

func openBadger(tb testing.TB, dir string) (*badgerkv.KV, *store.Store) {
	tb.Helper()
	kv, err := badgerkv.Open(dir, badgerkv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := store.New(store.Config{KV: kv})
	if err != nil {
		tb.Fatal(err)
	}
	return kv, s
}

// found is one mismatch a check reported: the record and the kind.
type found struct {
	ID   string
	Kind store.MismatchKind
}

// summary is ms as founds, ordered by ID then kind (for cmp.Diff).
func summary(ms []store.Mismatch) []found {
	out := []found{}
	for _, m := range ms {
		out = append(out, found{m.ExecutionID, m.Kind})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ID != out[j].ID {
			return out[i].ID < out[j].ID
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// TestCheckStateFindsEveryForgery forges a stopped Badger store once per
// kind and checks that the full check reports exactly what was forged, and
// that the start-up scope sees the forgeries of the executions it loads.
func TestCheckStateFindsEveryForgery(t *testing.T) {
	victim, other, inFlight := idOf(1), idOf(2), idOf(3) // execution 3 stays dispatched
	tests := []struct {
		name  string
		forge func(kv store.KV) error
		want  []found
		// unsettled: the start-up scope of a large store must catch it too.
		unsettled bool
	}{
		{name: "result body", forge: func(kv store.KV) error { return storetest.Forge(kv, storetest.ResultBody, victim, other) },
			want: []found{{victim, store.MismatchResult}}},
		{name: "result status", forge: func(kv store.KV) error { return storetest.Forge(kv, storetest.ResultStatus, victim, other) },
			want: []found{{victim, store.MismatchResult}}},
		{name: "state", forge: func(kv store.KV) error { return storetest.Forge(kv, storetest.State, victim, other) },
			want: []found{{victim, store.MismatchRecord}}, unsettled: true},
		{name: "fingerprint index", forge: func(kv store.KV) error { return storetest.Forge(kv, storetest.Index, victim, other) },
			want: []found{{victim, store.MismatchIndex}}},
		{name: "deleted record", forge: func(kv store.KV) error { return storetest.Forge(kv, storetest.Deleted, victim, other) },
			want: []found{{victim, store.MismatchIndex}, {victim, store.MismatchMissing}, {victim, store.MismatchUnjournaled}}},
		{name: "deleted record and index", forge: func(kv store.KV) error { return storetest.Forge(kv, storetest.DeletedWithIndex, victim, other) },
			want: []found{{victim, store.MismatchMissing}, {victim, store.MismatchUnjournaled}}},
		{name: "in-flight execution set to not_executed", forge: func(kv store.KV) error { return storetest.Forge(kv, storetest.State, inFlight, other) },
			want: []found{{inFlight, store.MismatchRecord}}, unsettled: true},
		{name: "arguments of an in-flight execution", forge: func(kv store.KV) error {
			return storetest.Rewrite(kv, inFlight, func(x *recordv1.Execution) { x.Arguments = []byte(`{"version":"666"}`) })
		}, want: []found{{inFlight, store.MismatchRecord}}, unsettled: true},
		{name: "journal index", forge: func(kv store.KV) error {
			return storetest.Rewrite(kv, victim, func(x *recordv1.Execution) { x.JournalIndex-- })
		}, want: []found{{victim, store.MismatchRecord}}},
		{name: "rewound to an older snapshot with its history cut", forge: func(kv store.KV) error {
			// The record becomes its dispatched snapshot, and the history
			// index stops there: only the journal itself tells.
			hv, err := kv.Get([]byte("e/" + victim))
			if err != nil {
				return err
			}
			dispatchedAt := int64(binary.BigEndian.Uint64(hv[16:24]))
			if err := kv.Commit([]store.Write{{Key: []byte("e/" + victim), Value: hv[:24]}}); err != nil {
				return err
			}
			return storetest.Rewrite(kv, victim, func(x *recordv1.Execution) {
				x.State, x.ResultRef, x.ResultSha256, x.Outcome, x.TargetStatus = recordv1.State_STATE_DISPATCHED, "", nil, 0, 0
				x.JournalIndex = uint64(dispatchedAt)
			})
		}, want: []found{{victim, store.MismatchHistory}, {victim, store.MismatchRecord}}},
		{name: "record nobody journaled", forge: func(kv store.KV) error {
			return storetest.Put(kv, "x/act_intruder", &recordv1.Execution{Id: "act_intruder", State: recordv1.State_STATE_COMPLETED})
		}, want: []found{{"act_intruder", store.MismatchUnjournaled}}},
		{name: "result nobody journaled", forge: func(kv store.KV) error {
			return storetest.Put(kv, "r/act_intruder", &recordv1.Result{Status: 200})
		}, want: []found{{"act_intruder", store.MismatchUnjournaled}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			open := storetest.Badger(t)
			s := storetest.OpenStore(t, open())
			build(t, s, 5, 3)
			rep, err := s.CheckState(t.Context(), store.CheckAll)
			if err != nil || !rep.OK() || rep.Executions != 5 || rep.Results != 3 || rep.Index != 5 {
				t.Fatalf("CheckState of an untouched store = %v, %v; want ok over 5 executions, 3 results, 5 index entries", rep, err)
			}
			s = storetest.Reopen(t, s, open, tt.forge)
			rep, err = s.CheckState(t.Context(), store.CheckAll)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summary(rep.Mismatches)); diff != "" {
				t.Errorf("CheckState(CheckAll) mismatches (-want +got):\n%s\n%s", diff, rep)
			}
			if !errors.Is(rep.Err(), store.ErrStateMismatch) {
				t.Errorf("Err() = %v, want store.ErrStateMismatch", rep.Err())
			}
			part, err := s.CheckState(t.Context(), store.CheckUnsettled)
			if err != nil {
				t.Fatal(err)
			}
			if part.OK() == tt.unsettled {
				t.Errorf("CheckState(CheckUnsettled).OK() = %v, want %v:\n%s", part.OK(), !tt.unsettled, part)
			}
		})
	}
}

// TestVerifiedWithholdsAForgedResult: the one read results go through
// returns the result while it hashes to its journal record, and only an
// ErrResultIntegrity error once it does not.
func TestVerifiedWithholdsAForgedResult(t *testing.T) {
	dir := t.TempDir()
	_, s := openBadger(t, dir)
	build(t, s, 3, 0)
	x, r, err := s.Verified(idOf(1))
	if err != nil || r.GetStatus() != 201 || x.GetResultRef() != store.ResultRef(x.GetResultSha256()) {
		t.Fatalf("Verified = %v, %v, %v; want the 201 result", x, r, err)
	}
	s.Close()
	kv, err := badgerkv.Open(dir, badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := storetest.Forge(kv, storetest.ResultBody, idOf(1), idOf(2)); err != nil {
		t.Fatal(err)
	}
	kv.Close()
	_, s = openBadger(t, dir)
	defer s.Close()
	x, r, err = s.Verified(idOf(1))
	if r != nil || x == nil || !errors.Is(err, store.ErrResultIntegrity) {
		t.Fatalf("Verified of a forged result = %v, %v, %v; want the record, no result, ErrResultIntegrity", x, r, err)
	}
	if _, r, err := s.Verified(idOf(2)); err != nil || r == nil {
		t.Errorf("Verified of an untouched neighbour = %v, %v", r, err)
	}
}

// TestLatestRefusesAnIndexThatDisagrees: a fingerprint index entry whose
// execution is gone or is another intent's is a mismatch, not "no prior".
func TestLatestRefusesAnIndexThatDisagrees(t *testing.T) {
	for _, f := range []storetest.Forgery{storetest.Index, storetest.Deleted} {
		t.Run(string(f), func(t *testing.T) {
			dir := t.TempDir()
			_, s := openBadger(t, dir)
			build(t, s, 3, 0)
			s.Close()
			kv, err := badgerkv.Open(dir, badgerkv.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := storetest.Forge(kv, f, idOf(1), idOf(2)); err != nil {
				t.Fatal(err)
			}
			kv.Close()
			_, s = openBadger(t, dir)
			defer s.Close()
			err = s.Update(t.Context(), func(tx *store.Tx) error {
				_, err := tx.Latest(fmt.Sprintf("hmac-sha256:%064x", 1))
				return err
			})
			if !errors.Is(err, store.ErrStateMismatch) || errors.Is(err, store.ErrNotFound) {
				t.Errorf("Latest after %s = %v, want store.ErrStateMismatch", f, err)
			}
		})
	}
}

// TestCheckAllLiveKeepsUpWithWrites: executions written while the live
// pass runs are not reported (they are checked again on a fresh read).
func TestCheckAllLiveKeepsUpWithWrites(t *testing.T) {
	_, s := openBadger(t, t.TempDir())
	defer s.Close()
	build(t, s, 200, 7)
	done := make(chan error, 1)
	go func() {
		for i := 200; i < 400; i++ {
			if err := s.Update(context.Background(), func(tx *store.Tx) error { return execution(tx, i, i%2 == 0) }); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range 5 {
		rep, err := s.CheckState(t.Context(), store.CheckAllLive)
		if err != nil || !rep.OK() {
			t.Fatalf("CheckState(CheckAllLive) while writing = %v, %v; want ok", rep, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestStartupCheckAtScale builds a store of LATCH_STATE_N executions (set
// LATCH_STATE_N=1000000 to measure at a million; skipped when unset: it
// takes minutes) with one in 1000 left in flight, and reports what the
// start-up check and the full check cost.
func TestStartupCheckAtScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("LATCH_STATE_N"))
	if n <= 0 {
		t.Skip("set LATCH_STATE_N (e.g. 1000000) to build a store of that many executions and measure the state check")
	}
	dir := t.TempDir()
	kv, s := openBadger(t, dir)
	start := time.Now()
	build(t, s, n, 1000)
	t.Logf("built %d executions (%d journal records) in %v", n, s.JournalSize(), time.Since(start))
	s.Close()
	kv, err := badgerkv.Open(dir, badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Compact(); err != nil {
		t.Fatal(err)
	}
	kv.Close()

	start = time.Now()
	_, s = openBadger(t, dir)
	defer s.Close()
	opened := time.Since(start)
	scope := s.StartupScope(0)
	start = time.Now()
	rep, err := s.CheckState(t.Context(), scope)
	if err != nil || !rep.OK() {
		t.Fatalf("start-up check = %v, %v", rep, err)
	}
	t.Logf("start-up: open %v, check (%v) %v over %d executions", opened, scope, time.Since(start), rep.Executions)
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	peak := make(chan uint64)
	stop := make(chan struct{})
	go func() { // sample the heap while the full check runs
		var m runtime.MemStats
		var top uint64
		for {
			select {
			case <-stop:
				peak <- top
				return
			case <-time.After(20 * time.Millisecond):
				runtime.ReadMemStats(&m)
				top = max(top, m.HeapInuse)
			}
		}
	}()
	start = time.Now()
	rep, err = s.CheckState(t.Context(), store.CheckAll)
	took := time.Since(start)
	close(stop)
	top := <-peak
	if err != nil || !rep.OK() {
		t.Fatalf("full check = %v, %v", rep, err)
	}
	t.Logf("full check: %v over %d executions, %d results, %d index entries, %d journal records; heap in use peaked %d MiB above the %d MiB before",
		took, rep.Executions, rep.Results, rep.Index, rep.Journal, (int64(top)-int64(base.HeapInuse))>>20, base.HeapInuse>>20)
}

// BenchmarkVerified: the per-read gate (record against its journal
// records, result against its committed hash) on a store of 10,000
// executions, next to the unchecked read it replaced.
func BenchmarkVerified(b *testing.B) {
	s, err := store.New(store.Config{KV: memkv.New()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	build(b, s, 10_000, 0)
	b.Run("verified", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, r, err := s.Verified(idOf(i % 10_000)); err != nil || r == nil {
				b.Fatal(r, err)
			}
			i++
		}
	})
	b.Run("record_only", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, err := s.Execution(idOf(i % 10_000)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// TestVerifiedDuringWritesReportsNoFalseMismatch: reads racing the commits
// of an execution's records (record and history written together, read
// apart) never report a disagreement that is not there.
func TestVerifiedDuringWritesReportsNoFalseMismatch(t *testing.T) {
	_, s := openBadger(t, t.TempDir())
	defer s.Close()
	build(t, s, 1, 1) // execution 0 stays dispatched
	id := idOf(0)
	done := make(chan error, 1)
	go func() {
		for i := range 300 {
			err := s.Update(context.Background(), func(tx *store.Tx) error {
				x, err := tx.Execution(id)
				if err != nil {
					return err
				}
				x.RecoveryAttempts = int32(i + 1)
				snap := proto.Clone(x).(*recordv1.Execution)
				snap.CanonicalIntent, snap.Arguments, snap.Evidence = nil, nil, nil
				idx, err := tx.Append(&recordv1.JournalEntry{ExecutionId: id, Kind: "recovery_attempt", From: x.GetState(), To: x.GetState(), Execution: snap})
				if err != nil {
					return err
				}
				x.JournalIndex = uint64(idx)
				return tx.PutExecution(x, false)
			})
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Verified(id); err != nil {
				t.Fatalf("Verified after the writes = %v", err)
			}
			return
		default:
		}
		if _, _, err := s.Verified(id); err != nil {
			t.Fatalf("Verified while the execution is being written = %v, want no mismatch", err)
		}
	}
}
