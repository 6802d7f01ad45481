package audit

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestOldKindTextVerifiesAndReads: a journal whose first execution was
// written by a version before JournalEntry.entry_kind (kinds in the kind
// text, "transition" and "attach") and whose second by this one (the
// enum) verifies, exported and read back, and passes the state check
// (which must tell an attach record, old or new, from a change of the
// record: the attach notes here carry an earlier snapshot than the
// record's), each record reads as the kind it was written with, and the
// export's readable entries name the kind as they did before.
func TestOldKindTextVerifiesAndReads(t *testing.T) {
	data := t.TempDir()
	st, signer := openDataDir(t, data)
	at := timestamppb.New(time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC))
	var want []recordv1.EntryKind
	err := st.Update(context.Background(), func(tx *store.Tx) error {
		for i, old := range []bool{true, false} {
			id := []string{"act_01JDX000000000000000000001", "act_01JDX000000000000000000002"}[i]
			x := &recordv1.Execution{Id: id, Fingerprint: "hmac-sha256:" + string(bytes.Repeat([]byte{'a' + byte(i)}, 64)), Actor: "agent:ci", IntentScope: "actor:agent:ci",
				Tool: "deploy_release", Target: "https://deploy.internal/v1/releases", Channel: "http", Replay: "idempotency_key",
				CanonicalIntent: []byte(`{"tool":"deploy_release"}`), Arguments: []byte(`{}`), AcceptedAt: at}
			tx.Fresh(id)
			entry := func(kind recordv1.EntryKind, from, to recordv1.State, snap *recordv1.Execution) *recordv1.JournalEntry {
				e := &recordv1.JournalEntry{Time: at, ExecutionId: id, From: from, To: to, Actor: "agent:ci", Reason: "step", Execution: snap}
				if old {
					e.Kind = lifecycle.EntryKindName(kind) // as versions before entry_kind wrote it
				} else {
					e.EntryKind = kind
				}
				want = append(want, kind)
				return e
			}
			var accepted *recordv1.Execution
			for _, to := range []recordv1.State{recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AUTHORIZED, recordv1.State_STATE_DISPATCHED, recordv1.State_STATE_COMPLETED} {
				from := x.GetState()
				x.State = to
				if to == recordv1.State_STATE_COMPLETED {
					x.Outcome, x.TargetStatus = recordv1.Outcome_OUTCOME_SUCCEEDED, 201
				}
				snap := proto.Clone(x).(*recordv1.Execution)
				if to != recordv1.State_STATE_ACCEPTED {
					snap.CanonicalIntent, snap.Arguments, snap.Evidence = nil, nil, nil
				} else {
					accepted = proto.Clone(snap).(*recordv1.Execution)
				}
				idx, err := tx.Append(entry(recordv1.EntryKind_ENTRY_KIND_TRANSITION, from, to, snap))
				if err != nil {
					return err
				}
				x.JournalIndex = uint64(idx)
				if err := tx.PutExecution(x, true); err != nil {
					return err
				}
			}
			// An identical retry attached: the note carries the execution
			// as the engine reported it, which is not the record.
			if _, err := tx.Append(entry(recordv1.EntryKind_ENTRY_KIND_ATTACH, x.GetState(), x.GetState(), accepted)); err != nil {
				return err
			}
		}
		return checkpoint(tx, signer)
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []recordv1.EntryKind
	for i := range st.JournalSize() {
		b, err := st.JournalEntry(i)
		if err != nil {
			t.Fatal(err)
		}
		e, err := journal.DecodeEntry(b)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, lifecycle.EntryKindOf(e))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kinds read back (-want +got):\n%s", diff)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	rep, state, err := VerifyAll(t.Context(), data, journal.Options{})
	if err != nil || !rep.OK() || rep.Unanchored() != 0 || !state.OK() || state.Executions != 2 {
		t.Fatalf("VerifyAll = %v, %v, %v; want the journal verified and both executions consistent", rep, state, err)
	}
	var export bytes.Buffer
	if err := Export(data, &export); err != nil {
		t.Fatal(err)
	}
	// Its readable entries name every kind as before entry_kind existed.
	if n, m := strings.Count(export.String(), `"kind":"transition"`), strings.Count(export.String(), `"kind":"attach"`); n != 8 || m != 2 {
		t.Errorf("export names %d transition and %d attach records by kind, want 8 and 2:\n%s", n, m, export.String())
	}
	src, err := journal.ReadExport(&export)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	verifier := d.Verifier
	d.Close()
	if rep, err := journal.Verify(src, verifier); err != nil || !rep.OK() {
		t.Errorf("Verify(export) = %v, %v; want the exported journal verified", rep, err)
	}
}
