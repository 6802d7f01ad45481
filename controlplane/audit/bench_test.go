package audit

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/internal/testing/storetest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// stateStep mirrors the engine's step: the execution moves to `to`, the
// journal record carries its snapshot, the record gets the journal index.
func stateStep(tx *store.Tx, x *recordv1.Execution, to recordv1.State) error {
	from := x.GetState()
	x.State = to
	snap := proto.Clone(x).(*recordv1.Execution)
	if to != recordv1.State_STATE_ACCEPTED {
		snap.CanonicalIntent, snap.Arguments, snap.Evidence = nil, nil, nil
	}
	idx, err := tx.Append(&recordv1.JournalEntry{Time: timestamppb.Now(), ExecutionId: x.GetId(), Kind: "transition", From: from, To: to,
		Actor: x.GetActor(), Reason: "target answered 201", Execution: snap})
	if err != nil {
		return err
	}
	x.JournalIndex = uint64(idx)
	return tx.PutExecution(x, true)
}

// stateDataDir makes a stopped data dir of n executions as a control plane
// leaves them: each accepted, authorized, dispatched and completed with a
// stored result (four journal records), its record, history and
// fingerprint index, and a signed checkpoint of the whole journal.
func stateDataDir(tb testing.TB, data string, n int) {
	tb.Helper()
	st, signer := openDataDir(tb, data)
	accepted := timestamppb.New(time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC))
	const batch = 250
	for lo := 0; lo < n; lo += batch {
		err := st.Update(context.Background(), func(tx *store.Tx) error {
			for i := lo; i < min(lo+batch, n); i++ {
				id := fmt.Sprintf("act_01JDX%021d", i)
				x := &recordv1.Execution{Id: id, Fingerprint: fmt.Sprintf("hmac-sha256:%064x", i), Actor: "agent:ci", IntentScope: "actor:agent:ci",
					Tool: "deploy_release", Target: "https://deploy.internal/v1/releases", Channel: "http", Replay: "idempotency_key",
					CanonicalIntent: []byte(`{"actor":"agent:ci","arguments":{"region":"us-east-1","service":"api","version":"` + strconv.Itoa(i) + `"},"channel":"http","method":"POST","target":"https://deploy.internal/v1/releases","tool":"deploy_release"}`),
					Arguments:       []byte(`{"region":"us-east-1","service":"api","version":"` + strconv.Itoa(i) + `"}`),
					Evidence:        &recordv1.Evidence{JsonrpcId: strconv.Itoa(i)}, AcceptedAt: accepted}
				tx.Fresh(id)
				for _, s := range []recordv1.State{recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AUTHORIZED, recordv1.State_STATE_DISPATCHED} {
					if err := stateStep(tx, x, s); err != nil {
						return err
					}
				}
				sum, err := tx.PutResult(id, &recordv1.Result{Status: 201, Body: []byte(`{"ok":true,"release":"` + strconv.Itoa(i) + `"}`)})
				if err != nil {
					return err
				}
				x.ResultRef, x.ResultSha256, x.Outcome, x.TargetStatus = store.ResultRef(sum), sum, recordv1.Outcome_OUTCOME_SUCCEEDED, 201
				if err := stateStep(tx, x, recordv1.State_STATE_COMPLETED); err != nil {
					return err
				}
			}
			if lo+batch >= n {
				if err := checkpoint(tx, signer); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		tb.Fatal(err)
	}
}

// benchStateDir is the data dir BenchmarkVerifyAll reads: built in a
// temporary directory, or kept in LATCH_AUDIT_BENCH_DIR between runs (built
// there when it holds none). LATCH_AUDIT_BENCH_EXECUTIONS sets its size
// (default 1<<15 executions, 4 journal records each).
func benchStateDir(b *testing.B) (dir string, executions int) {
	executions, _ = strconv.Atoi(os.Getenv("LATCH_AUDIT_BENCH_EXECUTIONS"))
	if executions <= 0 {
		executions = 1 << 15
	}
	dir = os.Getenv("LATCH_AUDIT_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	if _, err := os.Stat(datadir.DB(dir)); err != nil {
		stateDataDir(b, dir, executions)
	}
	return dir, executions
}

// BenchmarkVerifyAll measures `latch audit verify DATA_DIR` end to end on
// a data dir a control plane could have left (executions with records,
// histories, results and fingerprint index entries): opening the store,
// reading and verifying the journal, checking the state against it.
func BenchmarkVerifyAll(b *testing.B) {
	data, _ := benchStateDir(b)
	var records int64
	cpu := cpuTime(b)
	for b.Loop() {
		rep, state, err := VerifyAll(context.Background(), data, journal.Options{})
		if err != nil || !rep.OK() || rep.Unanchored() != 0 || !state.OK() {
			b.Fatal(err, rep, state)
		}
		records += rep.Size
	}
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(records)/(cpuTime(b)-cpu).Seconds(), "records/cpu-s")
}

// TestVerifyAllSharesTheJournalRead: the state check VerifyAll runs on the
// journal it read for the journal check says what the store's own check
// (reading the journal again) says, on a sound data dir and on damaged
// ones: forged state, a journal record gone, a record that is not a leaf
// record, one that does not decode, one past the end.
func TestVerifyAllSharesTheJournalRead(t *testing.T) {
	id := func(i int) string { return fmt.Sprintf("act_01JDX%021d", i) }
	leafKey := func(i int) []byte { return fmt.Appendf(nil, "j/%016x", i) }
	tests := []struct {
		name  string
		forge func(kv store.KV) error
		sound bool
	}{
		{name: "sound", sound: true, forge: func(store.KV) error { return nil }},
		{name: "state", forge: func(kv store.KV) error { return storetest.Forge(kv, storetest.State, id(2), id(3)) }},
		{name: "result", forge: func(kv store.KV) error { return storetest.Forge(kv, storetest.ResultBody, id(2), id(3)) }},
		{name: "deleted record", forge: func(kv store.KV) error { return storetest.Forge(kv, storetest.Deleted, id(2), id(3)) }},
		{name: "planted authorized session", forge: func(kv store.KV) error {
			v, err := proto.Marshal(&recordv1.Session{Id: "ses_planted", Actor: "mallory", State: recordv1.SessionState_SESSION_STATE_AUTHORIZED, AuthorizedBy: "ops"})
			if err != nil {
				return err
			}
			return kv.Commit([]store.Write{{Key: []byte("S/ses_planted"), Value: v}})
		}},
		{name: "journal record gone", forge: func(kv store.KV) error {
			return kv.Commit([]store.Write{{Key: leafKey(9), Delete: true}})
		}},
		{name: "journal record not a leaf record", forge: func(kv store.KV) error {
			return kv.Commit([]store.Write{{Key: leafKey(5), Value: []byte{0}}})
		}},
		{name: "journal entry that does not decode", forge: func(kv store.KV) error {
			v, err := kv.Get(leafKey(6))
			if err != nil {
				return err
			}
			v = append(v[:1+int(v[0])*32:1+int(v[0])*32], 0xff, 0xff)
			return kv.Commit([]store.Write{{Key: leafKey(6), Value: v}})
		}},
		{name: "journal record past the end", forge: func(kv store.KV) error {
			v, err := kv.Get(leafKey(7))
			if err != nil {
				return err
			}
			return kv.Commit([]store.Write{{Key: leafKey(1000), Value: v}})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := t.TempDir()
			stateDataDir(t, data, 6)
			kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.forge(kv); err != nil {
				t.Fatal(err)
			}
			kv.Close()
			rep, shared, err := VerifyAll(t.Context(), data, journal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			d, err := Open(data)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			own, err := d.State(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(own, shared); diff != "" {
				t.Errorf("state check on the shared read differs from the store's own (-own +shared):\n%s", diff)
			}
			if sound := rep.OK() && shared.OK(); sound != tt.sound {
				t.Errorf("VerifyAll sound = %v, want %v:\n%s\n%s", sound, tt.sound, rep, shared)
			}
		})
	}
}

// TestVerifyAllProgress: VerifyAll reports its stages in order (reading,
// hashing, then the state check while it goes on), each with done within
// total, from one goroutine at a time (the race detector would see two).
func TestVerifyAllProgress(t *testing.T) {
	data := t.TempDir()
	stateDataDir(t, data, 40)
	old := stateProgressEvery
	stateProgressEvery = time.Microsecond
	t.Cleanup(func() { stateProgressEvery = old })
	order := map[string]int{journal.StageRead: 0, journal.StageVerify: 1, StageState: 2}
	var seen []journal.Progress
	rep, state, err := VerifyAll(t.Context(), data, journal.Options{Progress: func(p journal.Progress) { seen = append(seen, p) }})
	if err != nil || !rep.OK() || !state.OK() {
		t.Fatal(err, rep, state)
	}
	if len(seen) == 0 || seen[len(seen)-1].Stage == journal.StageRead {
		t.Fatalf("progress = %v, want at least the hashing stage", seen)
	}
	for i, p := range seen {
		rank, ok := order[p.Stage]
		if !ok || p.Done < 0 || p.Done > p.Total || p.Total != rep.Size {
			t.Fatalf("progress %d = %+v: unknown stage or done out of [0, %d]", i, p, rep.Size)
		}
		if i > 0 && rank < order[seen[i-1].Stage] {
			t.Fatalf("progress went back from stage %q to %q: %v", seen[i-1].Stage, p.Stage, seen)
		}
	}
}
