package audit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// entry is a journal entry the size of a real transition.
func entry(i int64) *recordv1.JournalEntry {
	at := timestamppb.New(time.Date(2026, 11, 30, 4, 0, 0, int(i), time.UTC))
	id := fmt.Sprintf("act_01JDX%021d", i/4)
	return &recordv1.JournalEntry{
		Time: at, ExecutionId: id, From: recordv1.State_STATE_DISPATCHED, To: recordv1.State_STATE_COMPLETED,
		Kind: "transition", Reason: "target answered 200", Actor: "agent:ci",
		Execution: &recordv1.Execution{
			Id: id, Fingerprint: "hmac-sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Actor: "agent:ci",
			Tool: "deploy_release", Target: "https://deploy.internal/v1/releases", Channel: "http", Replay: "idempotency_key",
			CanonicalIntent: []byte(`{"actor":"agent:ci","arguments":{"region":"us-east-1","service":"api","version":"1.2.3"},"channel":"http","method":"POST","target":"https://deploy.internal/v1/releases","tool":"deploy_release"}`),
			State:           recordv1.State_STATE_COMPLETED, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, TargetStatus: 200,
			AcceptedAt: at, DispatchedAt: at, CompletedAt: at, UpdatedAt: at,
			Arguments: []byte(`{"region":"us-east-1","service":"api","version":"1.2.3"}`),
		},
	}
}

// dataDir makes a stopped data dir whose journal holds n entries and a
// checkpoint of all of them, as a control plane leaves it.
func dataDir(tb testing.TB, n int) string {
	tb.Helper()
	data := tb.TempDir()
	st, signer := openDataDir(tb, data)
	const batch = 1000
	for done := 0; done < n; done += batch {
		err := st.Update(context.Background(), func(tx *store.Tx) error {
			for i := done; i < min(done+batch, n); i++ {
				if _, err := tx.Append(entry(int64(i))); err != nil {
					return err
				}
			}
			if done+batch >= n {
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
	return data
}

// TestDirServesTheStoresHashes: the hashes Dir reads with the journal are
// the store's, for a sound journal and for one with a record gone and one
// keyed far past the end.
func TestDirServesTheStoresHashes(t *testing.T) {
	const n = 45
	data := dataDir(t, n)
	kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	far := fmt.Appendf(nil, "j/%016x", 1000)
	v, err := kv.Get(fmt.Appendf(nil, "j/%016x", 7))
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Commit([]store.Write{{Key: fmt.Appendf(nil, "j/%016x", 9), Delete: true}, {Key: far, Value: v}}); err != nil {
		t.Fatal(err)
	}
	kv.Close()

	one, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	one.Close()
	for _, parts := range []int{1, 3, 7} {
		t.Run(fmt.Sprintf("read in %d ranges", parts), func(t *testing.T) {
			oldParts, oldMin := readParts, minParallelRead
			readParts, minParallelRead = parts, 0
			t.Cleanup(func() { readParts, minParallelRead = oldParts, oldMin })
			checkDirHashes(t, data, n, one)
		})
	}
}

func checkDirHashes(t *testing.T, data string, n int64, want *Dir) {
	d, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Size() != n {
		t.Fatalf("Dir.Size() = %d, want %d", d.Size(), n)
	}
	for i := range n {
		got, _ := d.Entry(i)
		w, _ := want.Entry(i)
		if !bytes.Equal(got, w) {
			t.Fatalf("Dir.Entry(%d) differs from a one-range read", i)
		}
	}
	for x := range tlog.StoredHashCount(1001) + 3 {
		got, gok, err := d.StoredHash(x)
		if err != nil {
			t.Fatal(err)
		}
		want, wok, err := d.st.StoredHash(x)
		if err != nil {
			t.Fatal(err)
		}
		if got != want || gok != wok {
			t.Fatalf("Dir.StoredHash(%d) = %v, %v; the store has %v, %v", x, got, gok, want, wok)
		}
	}
}

// BenchmarkVerifyDataDir measures `latch audit verify DATA_DIR` end to
// end: opening the store, reading the journal, verifying.
func BenchmarkVerifyDataDir(b *testing.B) {
	const n = 1 << 17
	data := dataDir(b, n)
	cpu := cpuTime(b)
	for b.Loop() {
		rep, err := Verify(data, journal.Options{})
		if err != nil || !rep.OK() || rep.Size != n || rep.Unanchored() != 0 {
			b.Fatal(err, rep)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(n)*float64(b.N)/(cpuTime(b)-cpu).Seconds(), "records/cpu-s")
}

// cpuTime is the CPU time (user and system) this process has used, so a
// benchmark on a shared machine can report its work apart from its wait.
func cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// checkpoint signs the tree as tx sees it and stores the checkpoint.
func checkpoint(tx *store.Tx, signer *journal.Signer) error {
	size, root, err := tx.TreeHash()
	if err != nil {
		return err
	}
	note, err := signer.Sign(size, root, time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC))
	if err != nil {
		return err
	}
	tx.PutCheckpoint(size, note)
	return nil
}

// openDataDir creates the data dir data as a control plane would: a
// journal key pair (the verifier under keys/) and an open Badger store; the
// caller writes the journal with the signer and closes the store.
func openDataDir(tb testing.TB, data string) (*store.Store, *journal.Signer) {
	tb.Helper()
	skey, vkey, err := journal.GenerateKey("latch.test/activity")
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := journal.NewSigner(skey)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(datadir.Verifier(data)), 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(datadir.Verifier(data), []byte(vkey+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	kv, err := badgerkv.Open(datadir.DB(data), badgerkv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		tb.Fatal(err)
	}
	return st, signer
}
