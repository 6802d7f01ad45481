package receipts_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/receipts"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/receipt"
)

// newJournal is a real store (Badger in a temp dir) and a signer.
func newJournal(t testing.TB) (*store.Store, *journal.Signer, string) {
	t.Helper()
	kv, err := badgerkv.Open(t.TempDir(), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	skey, vkey, err := journal.GenerateKey("latch.test/receipts")
	if err != nil {
		t.Fatal(err)
	}
	s, err := journal.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return st, s, vkey
}

// step journals one step of execution id and returns the execution as
// the store keeps it (journal_index set).
func step(t testing.TB, st *store.Store, id string, state recordv1.State) *recordv1.Execution {
	t.Helper()
	x := &recordv1.Execution{Id: id, Tool: "deploy", Actor: "agent", Fingerprint: "fp-" + id, State: state}
	if state == recordv1.State_STATE_COMPLETED {
		x.Outcome, x.TargetStatus, x.ResultSha256 = recordv1.Outcome_OUTCOME_SUCCEEDED, 200, make([]byte, 32)
	}
	err := st.Update(context.Background(), func(tx *store.Tx) error {
		idx, err := tx.Append(&recordv1.JournalEntry{ExecutionId: id, To: state, Kind: "transition", Actor: x.Actor, Execution: x})
		x.JournalIndex = uint64(idx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestIssue: receipts of committed records verify under the journal's key
// with the record's fields; one signature covers every receipt of records
// committed before it, and a newer record gets a new one; the receipt of an
// older step of an execution is that step's.
func TestIssue(t *testing.T) {
	st, signer, vkey := newJournal(t)
	is, err := receipts.New(receipts.Config{Journal: st, Signer: signer, Clock: func() time.Time { return time.Unix(1_800_000_000, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	var xs []*recordv1.Execution
	for i := range 5 {
		id := fmt.Sprintf("act_%d", i)
		step(t, st, id, recordv1.State_STATE_ACCEPTED)
		xs = append(xs, step(t, st, id, recordv1.State_STATE_COMPLETED))
	}
	verify := func(x *recordv1.Execution) *receipt.Checked {
		t.Helper()
		rp, err := is.Issue(x)
		if err != nil {
			t.Fatalf("Issue(%s) = %v", x.GetId(), err)
		}
		r := receipt.FromProto(rp)
		c, err := receipt.Verify(r, vkey)
		if err != nil {
			t.Fatalf("Verify(receipt of %s) = %v", x.GetId(), err)
		}
		if r.ExecutionID != x.GetId() || r.State != "completed" || r.Outcome != "succeeded" || r.TargetStatus != 200 || r.JournalIndex != x.GetJournalIndex() {
			t.Errorf("receipt of %s = %+v, want its completed record %d", x.GetId(), r, x.GetJournalIndex())
		}
		return c
	}
	for _, x := range xs {
		if c := verify(x); c.Size != 10 {
			t.Errorf("checkpoint size = %d, want 10 (the journal when the first receipt was asked for)", c.Size)
		}
	}
	if n := is.Signatures(); n != 1 {
		t.Errorf("Signatures() = %d after 5 receipts of one committed journal, want 1", n)
	}
	late := step(t, st, "act_late", recordv1.State_STATE_COMPLETED)
	if c := verify(late); c.Size != 11 {
		t.Errorf("checkpoint of the newer record has size %d, want 11", c.Size)
	}
	verify(xs[0])
	if n := is.Signatures(); n != 2 {
		t.Errorf("Signatures() = %d, want 2 (one more for the newer record, none for the older)", n)
	}
}

// TestIssueRefuses: a record not committed, or one of another execution,
// gets no receipt.
func TestIssueRefuses(t *testing.T) {
	st, signer, _ := newJournal(t)
	is, _ := receipts.New(receipts.Config{Journal: st, Signer: signer})
	x := step(t, st, "act_a", recordv1.State_STATE_ACCEPTED)
	if _, err := is.Issue(&recordv1.Execution{Id: "act_a", JournalIndex: 7}); !errors.Is(err, receipts.ErrNoRecord) {
		t.Errorf("Issue(index past the journal) = %v, want ErrNoRecord", err)
	}
	if _, err := is.Issue(&recordv1.Execution{Id: "act_b", JournalIndex: x.GetJournalIndex()}); err == nil {
		t.Error("Issue(another execution's record) = nil, want an error")
	}
}

// BenchmarkIssue measures one receipt on a journal of 10,000 records:
// covered (no signature) and signed (a new record each time, so a
// signature each), and the signature alone.
func BenchmarkIssue(b *testing.B) {
	st, signer, _ := newJournal(b)
	for i := range 100 {
		err := st.Update(context.Background(), func(tx *store.Tx) error {
			for j := range 100 {
				id := fmt.Sprintf("act_%d_%d", i, j)
				if _, err := tx.Append(&recordv1.JournalEntry{ExecutionId: id, Kind: "transition",
					Execution: &recordv1.Execution{Id: id, Tool: "deploy", Actor: "agent", State: recordv1.State_STATE_COMPLETED}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	is, _ := receipts.New(receipts.Config{Journal: st, Signer: signer})
	x := &recordv1.Execution{Id: "act_50_50", JournalIndex: 5050}
	b.Run("covered", func(b *testing.B) {
		for b.Loop() {
			if _, err := is.Issue(x); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("signed", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			y := step(b, st, "act_new", recordv1.State_STATE_COMPLETED)
			b.StartTimer()
			if _, err := is.Issue(y); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("signature", func(b *testing.B) {
		for b.Loop() {
			if _, err := signer.Sign(10_000, tlog.Hash{}, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
