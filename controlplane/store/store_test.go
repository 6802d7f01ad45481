package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/controlplane/store/pgkv"
	"github.com/latchhq/latch/internal/testing/pgtest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// backends are the KV implementations every contract test runs against.
var backends = []struct {
	name string
	open func(tb testing.TB, dir string) KV
}{
	{"mem", func(tb testing.TB, dir string) KV { return memkv.New() }},
	{"badger", func(tb testing.TB, dir string) KV {
		kv, err := badgerkv.Open(dir, badgerkv.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		return kv
	}},
	{"postgres", func(tb testing.TB, dir string) KV { return openPG(tb, pgtest.URL(tb)) }},
}

func TestMain(m *testing.M) { pgtest.Main(m) }

// openPG opens the PostgreSQL backend on url (migrating it) and closes it
// when tb ends.
func openPG(tb testing.TB, url string) *pgkv.KV {
	tb.Helper()
	kv, err := pgkv.Open(context.Background(), url, pgkv.Options{Migrate: true, PageSize: 7, PageBytes: 40})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { kv.Close() })
	return kv
}

func newStore(tb testing.TB, kv KV) *Store {
	tb.Helper()
	s, err := New(Config{KV: kv, Logger: hclog.NewNullLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func forEachBackend(t *testing.T, fn func(t *testing.T, s *Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			fn(t, newStore(t, b.open(t, t.TempDir())))
		})
	}
}

func exec(id, fp, actor string, st recordv1.State) *recordv1.Execution {
	return &recordv1.Execution{Id: id, Fingerprint: fp, Actor: actor, Tool: "deploy", State: st}
}

func TestPutAndList(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		for i, a := range []string{"alice", "bob", "alice"} {
			x := exec(fmt.Sprintf("act_%02d", i), fmt.Sprintf("fp%d", i), a, recordv1.State_STATE_ACCEPTED)
			if err := s.Update(ctx, func(tx *Tx) error { return tx.PutExecution(x, true) }); err != nil {
				t.Fatal(err)
			}
		}
		// Move act_01 to dispatched: the state index must follow.
		if err := s.Update(ctx, func(tx *Tx) error {
			x, err := tx.Execution("act_01")
			if err != nil {
				return err
			}
			x.State = recordv1.State_STATE_DISPATCHED
			return tx.PutExecution(x, false)
		}); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name string
			f    Filter
			want []string
		}{
			{"all newest first", Filter{Limit: 10}, []string{"act_02", "act_01", "act_00"}},
			{"by actor", Filter{Actor: "alice", Limit: 10}, []string{"act_02", "act_00"}},
			{"by state", Filter{State: recordv1.State_STATE_ACCEPTED, Limit: 10}, []string{"act_02", "act_00"}},
			{"moved state", Filter{State: recordv1.State_STATE_DISPATCHED, Limit: 10}, []string{"act_01"}},
			{"limit", Filter{Limit: 1}, []string{"act_02"}},
			{"tool mismatch", Filter{Tool: "other", Limit: 10}, nil},
		}
		for _, tt := range tests {
			got, err := s.List(tt.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, x := range got {
				ids = append(ids, x.GetId())
			}
			if fmt.Sprint(ids) != fmt.Sprint(tt.want) {
				t.Errorf("%s: List(%+v) = %v, want %v", tt.name, tt.f, ids, tt.want)
			}
		}
	})
}

func TestFailedUpdateLeavesNoTrace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		boom := errors.New("boom")
		var wg sync.WaitGroup
		errs := make([]error, 20)
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.Update(ctx, func(tx *Tx) error {
					if err := tx.PutExecution(exec(fmt.Sprintf("act_%02d", i), "", "a", recordv1.State_STATE_ACCEPTED), false); err != nil {
						return err
					}
					if _, err := tx.Append(&recordv1.JournalEntry{ExecutionId: fmt.Sprint(i)}); err != nil {
						return err
					}
					if i%2 == 1 {
						return boom
					}
					if i == 10 {
						panic("bad update")
					}
					return nil
				})
			}()
		}
		wg.Wait()
		kept := 0
		for i, err := range errs {
			_, gerr := s.Execution(fmt.Sprintf("act_%02d", i))
			switch {
			case i%2 == 1 || i == 10:
				if err == nil || !errors.Is(gerr, ErrNotFound) {
					t.Errorf("update %d: err=%v, record err=%v; want failure and no record", i, err, gerr)
				}
			default:
				kept++
				if err != nil || gerr != nil {
					t.Errorf("update %d: err=%v, record err=%v; want success", i, err, gerr)
				}
			}
		}
		if got := s.JournalSize(); got != int64(kept) {
			t.Errorf("JournalSize() = %d, want %d (failed updates must not append)", got, kept)
		}
		checkTree(t, s)
	})
}

// TestMatchOrCreateIsAtomic is the property matching rests on: concurrent
// read-then-create updates of one fingerprint create exactly one record.
func TestMatchOrCreateIsAtomic(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *Store) {
		const n = 1000
		var wg sync.WaitGroup
		created := make(chan string, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.Update(t.Context(), func(tx *Tx) error {
					if _, err := tx.Latest("fp"); err == nil {
						return nil
					} else if !errors.Is(err, ErrNotFound) {
						return err
					}
					id := fmt.Sprintf("act_%04d", i)
					created <- id
					return tx.PutExecution(exec(id, "fp", "a", recordv1.State_STATE_ACCEPTED), true)
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		close(created)
		if got := len(created); got != 1 {
			t.Fatalf("%d concurrent match-or-create updates created %d executions, want 1", n, got)
		}
	})
}

func TestCommitFailureReportsToEveryCaller(t *testing.T) {
	kv := memkv.New()
	s := newStore(t, kv)
	kv.FailCommit = errors.New("disk full")
	err := s.Update(t.Context(), func(tx *Tx) error {
		return tx.PutExecution(exec("act_1", "fp", "a", recordv1.State_STATE_ACCEPTED), true)
	})
	if err == nil {
		t.Fatal("Update succeeded though the commit failed")
	}
	if _, err := s.Execution("act_1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Execution after failed commit: err = %v, want ErrNotFound", err)
	}
	if s.JournalSize() != 0 {
		t.Errorf("JournalSize = %d after failed commit, want 0", s.JournalSize())
	}
}

func appendN(t testing.TB, s *Store, n int) {
	for i := range n {
		if err := s.Update(context.Background(), func(tx *Tx) error {
			_, err := tx.Append(&recordv1.JournalEntry{ExecutionId: fmt.Sprint("act_", i), Kind: "transition"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkTree recomputes the Merkle root from the leaves alone and compares it
// with the root from the stored hashes.
func checkTree(t *testing.T, s *Store) {
	t.Helper()
	n := s.JournalSize()
	var leaves [][]byte
	err := s.ScanJournal(func(i int64, data []byte) bool {
		if i != int64(len(leaves)) {
			t.Errorf("journal key %d at position %d", i, len(leaves))
		}
		e := &recordv1.JournalEntry{}
		if err := proto.Unmarshal(data, e); err != nil || e.GetIndex() != uint64(i) {
			t.Errorf("entry %d: index %d err %v", i, e.GetIndex(), err)
		}
		leaves = append(leaves, data)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(leaves)) != n {
		t.Fatalf("%d leaves, JournalSize %d", len(leaves), n)
	}
	fresh := map[int64]tlog.Hash{}
	for i, d := range leaves {
		hs, err := tlog.StoredHashes(int64(i), d, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(idx))
			for j, k := range idx {
				out[j] = fresh[k]
			}
			return out, nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		for j, h := range hs {
			fresh[tlog.StoredHashIndex(0, int64(i))+int64(j)] = h
		}
	}
	for idx, h := range fresh {
		got, ok, err := s.StoredHash(idx)
		if err != nil || !ok || got != h {
			t.Errorf("StoredHash(%d) = %v, %v, %v; recomputed from leaves %v", idx, got, ok, err, h)
		}
	}
	if _, ok, err := s.StoredHash(tlog.StoredHashIndex(0, n)); ok || err != nil {
		t.Errorf("StoredHash past the end: ok %v, err %v; want absent", ok, err)
	}
	want, err := tlog.TreeHash(n, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for j, k := range idx {
			out[j] = fresh[k]
		}
		return out, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	var got tlog.Hash
	if err := s.Update(t.Context(), func(tx *Tx) error {
		var err error
		_, got, err = tx.TreeHash()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("stored tree hash %v, recomputed from leaves %v", got, want)
	}
}

// badgerWithJournal returns the directory of a closed Badger store holding
// a journal of n entries.
func badgerWithJournal(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	kv, err := badgerkv.Open(dir, badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, s, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestJournalSurvivesReopen(t *testing.T) {
	kv, err := badgerkv.Open(badgerWithJournal(t, 37), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, kv)
	if s.JournalSize() != 37 {
		t.Fatalf("JournalSize after reopen = %d, want 37", s.JournalSize())
	}
	appendN(t, s, 5)
	checkTree(t, s)
}

func TestClosedStoreRefusesUpdates(t *testing.T) {
	s := newStore(t, memkv.New())
	s.Close()
	if err := s.Update(t.Context(), func(*Tx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Update after Close = %v, want ErrClosed", err)
	}
}

// gatedKV blocks the first Commit until released, then fails it.
type gatedKV struct {
	*memkv.KV
	entered, release chan struct{}
	once             sync.Once
}

func (g *gatedKV) Commit(w []Write) error {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		<-g.release
		return errors.New("disk gone")
	}
	return g.KV.Commit(w)
}

// TestPipelinedGroupBuiltOnFailedCommitFails: a group built while the one
// before it was being committed must not survive that commit's failure,
// since it read writes that never happened.
func TestPipelinedGroupBuiltOnFailedCommitFails(t *testing.T) {
	kv := &gatedKV{KV: memkv.New(), entered: make(chan struct{}), release: make(chan struct{})}
	s := newStore(t, kv)
	first := make(chan error, 1)
	go func() {
		first <- s.Update(context.Background(), func(tx *Tx) error {
			return tx.PutExecution(exec("act_1", "fp", "a", recordv1.State_STATE_ACCEPTED), true)
		})
	}()
	<-kv.entered // group 1 is committing
	second := make(chan error, 1)
	sawFirst := make(chan bool, 1)
	go func() {
		second <- s.Update(context.Background(), func(tx *Tx) error {
			_, err := tx.Execution("act_1")
			sawFirst <- err == nil
			return tx.PutExecution(exec("act_2", "fp2", "a", recordv1.State_STATE_ACCEPTED), true)
		})
	}()
	if !<-sawFirst {
		t.Fatal("group 2 did not see group 1's uncommitted write")
	}
	close(kv.release)
	if err := <-first; err == nil {
		t.Error("group 1: commit failed but Update succeeded")
	}
	if err := <-second; err == nil {
		t.Error("group 2 was built on group 1's failed writes but Update succeeded")
	}
	for _, id := range []string{"act_1", "act_2"} {
		if _, err := s.Execution(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s visible after failed commits: %v", id, err)
		}
	}
	// The store recovers: a new update commits.
	if err := s.Update(context.Background(), func(tx *Tx) error {
		if _, err := tx.Execution("act_1"); !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("act_1 still visible to updates: %v", err)
		}
		return tx.PutExecution(exec("act_3", "fp3", "a", recordv1.State_STATE_ACCEPTED), true)
	}); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkMatchLookup is the matching step alone: the fingerprint index
// lookup plus the execution read, inside an update, against a Badger store
// holding N executions. LATCH_BENCH_SIZES overrides N ("10000,1000000").
func BenchmarkMatchLookup(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if s := os.Getenv("LATCH_BENCH_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("stored=%d", n), func(b *testing.B) {
			kv, err := badgerkv.Open(b.TempDir(), badgerkv.Options{})
			if err != nil {
				b.Fatal(err)
			}
			s := newStore(b, kv)
			const per = 2000
			for base := 0; base < n; base += per {
				if err := s.Update(context.Background(), func(tx *Tx) error {
					for i := base; i < min(base+per, n); i++ {
						if err := tx.PutExecution(exec(fmt.Sprintf("act_%012d", i), fmt.Sprint("fp", i), "a", recordv1.State_STATE_COMPLETED), true); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			// Same on-disk shape for every size, and reads through the
			// backend, not the cache of recent writes.
			if err := kv.Compact(); err != nil {
				b.Fatal(err)
			}
			s.kv.cur, s.kv.old = map[string]cached{}, map[string]cached{}
			b.ResetTimer()
			i := 0
			for b.Loop() {
				i = (i*7919 + 1) % n
				batch := &batch{kv: s.kv, writes: map[string]*Write{}}
				tx := &Tx{b: batch, own: map[string]*Write{}}
				if _, err := tx.Latest(fmt.Sprint("fp", i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestReadsAfterCloseFailCleanly(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			kv := b.open(t, t.TempDir())
			s, err := New(Config{KV: kv})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			if _, err := s.List(Filter{Limit: 1}); !errors.Is(err, ErrClosed) {
				t.Errorf("List after Close = %v, want ErrClosed", err)
			}
			if _, err := s.Execution("act_x"); !errors.Is(err, ErrClosed) {
				t.Errorf("Execution after Close = %v, want ErrClosed", err)
			}
		})
	}
}

// TestCloseDuringNestedReads: List reads records inside its index scan;
// a Close that arrives meanwhile must neither deadlock nor let a read reach
// the closed database.
func TestCloseDuringNestedReads(t *testing.T) {
	kv, err := badgerkv.Open(t.TempDir(), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := s.Update(t.Context(), func(tx *Tx) error {
			return tx.PutExecution(exec(fmt.Sprintf("act_%04d", i), fmt.Sprint("fp", i), "alice", recordv1.State_STATE_COMPLETED), true)
		}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := s.List(Filter{Actor: "alice", Limit: 1000}); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("List = %v", err)
					}
					return
				}
			}
		}()
	}
	time.Sleep(5 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close deadlocked behind nested reads")
	}
	wg.Wait()
}

// TestHistoryKeepsEachExecutionsEntriesInOrder appends interleaved entries
// of two executions, some in one update and some in concurrent updates that
// share groups, and reads each execution's history back after a reopen.
func TestHistoryKeepsEachExecutionsEntriesInOrder(t *testing.T) {
	dir := t.TempDir()
	kv, err := badgerkv.Open(dir, badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, kv)
	if err := s.Update(t.Context(), func(tx *Tx) error {
		for _, id := range []string{"act_a", "act_b", "act_a"} {
			if _, err := tx.Append(&recordv1.JournalEntry{ExecutionId: id, Kind: "step"}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := []string{"act_a", "act_b"}[i%2]
			if err := s.Update(t.Context(), func(tx *Tx) error {
				_, err := tx.Append(&recordv1.JournalEntry{ExecutionId: id, Kind: "step"})
				return err
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	kv, err = badgerkv.Open(dir, badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s = newStore(t, kv)
	for id, want := range map[string]int{"act_a": 12, "act_b": 11} {
		hist, err := s.History(id)
		if err != nil {
			t.Fatal(err)
		}
		if len(hist) != want {
			t.Errorf("History(%s) has %d entries, want %d", id, len(hist), want)
		}
		for i, e := range hist {
			if e.GetExecutionId() != id || (i > 0 && e.GetIndex() <= hist[i-1].GetIndex()) {
				t.Errorf("History(%s)[%d] = %v: wrong execution or out of order", id, i, e)
			}
		}
	}
	if hist, err := s.History("act_none"); err != nil || len(hist) != 0 {
		t.Errorf("History of an unknown execution = %v, %v; want empty", hist, err)
	}
	checkTree(t, s)
}

func TestOpenRefusesAnotherLayout(t *testing.T) {
	kv, err := badgerkv.Open(badgerWithJournal(t, 1), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	if v, err := kv.Get(formatKey); err != nil || string(v) != format {
		t.Fatalf("format record = %q, %v; want %q", v, err, format)
	}
	if err := kv.Commit([]Write{{Key: formatKey, Value: []byte("0")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{KV: kv}); err == nil || !strings.Contains(err.Error(), "layout") {
		t.Errorf("New over a store in layout 0 = %v, want a layout error", err)
	}
}

// TestStateIndexHoldsOnlyTheCurrentState moves an execution through states
// inside one update and across updates; its state index must end with one
// key, for the current state.
func TestStateIndexHoldsOnlyTheCurrentState(t *testing.T) {
	kv := memkv.New()
	s := newStore(t, kv)
	move := func(tx *Tx, st recordv1.State) error {
		x, err := tx.Execution("act_1")
		if err != nil {
			return err
		}
		x.State = st
		return tx.PutExecution(x, false)
	}
	if err := s.Update(t.Context(), func(tx *Tx) error {
		if err := tx.PutExecution(exec("act_1", "fp1", "alice", recordv1.State_STATE_ACCEPTED), true); err != nil {
			return err
		}
		if err := move(tx, recordv1.State_STATE_AUTHORIZED); err != nil {
			return err
		}
		return move(tx, recordv1.State_STATE_DISPATCHED)
	}); err != nil {
		t.Fatal(err)
	}
	stateKeys := func() []string {
		var keys []string
		if err := kv.Scan([]byte("s/"), false, func(k, _ []byte) bool {
			keys = append(keys, string(k))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return keys
	}
	want := string(stateKey(recordv1.State_STATE_DISPATCHED, "act_1"))
	if got := stateKeys(); fmt.Sprint(got) != fmt.Sprint([]string{want}) {
		t.Errorf("state index after creation = %q, want [%q]", got, want)
	}
	if err := s.Update(t.Context(), func(tx *Tx) error { return move(tx, recordv1.State_STATE_COMPLETED) }); err != nil {
		t.Fatal(err)
	}
	want = string(stateKey(recordv1.State_STATE_COMPLETED, "act_1"))
	if got := stateKeys(); fmt.Sprint(got) != fmt.Sprint([]string{want}) {
		t.Errorf("state index after completion = %q, want [%q]", got, want)
	}
}

// TestFreshExecution: an execution declared fresh is created without
// lookups, with its history, actor index and state index all written.
func TestFreshExecution(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *Store) {
		if err := s.Update(t.Context(), func(tx *Tx) error {
			x := exec("act_fresh", "fp", "alice", recordv1.State_STATE_ACCEPTED)
			tx.Fresh(x.GetId())
			for _, st := range []recordv1.State{recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_DISPATCHED} {
				if _, err := tx.Append(&recordv1.JournalEntry{ExecutionId: x.GetId(), Kind: "transition", To: st}); err != nil {
					return err
				}
				x.State = st
				if err := tx.PutExecution(x, true); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if hist, err := s.History("act_fresh"); err != nil || len(hist) != 2 {
			t.Errorf("History = %v, %v; want 2 entries", hist, err)
		}
		for _, f := range []Filter{{Actor: "alice", Limit: 5}, {State: recordv1.State_STATE_DISPATCHED, Limit: 5}} {
			if got, err := s.List(f); err != nil || len(got) != 1 {
				t.Errorf("List(%+v) = %v, %v; want act_fresh", f, got, err)
			}
		}
	})
}

func TestSessionExecutions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *Store) {
		for i, sid := range []string{"ses_a", "ses_b", "ses_a", ""} {
			x := exec(fmt.Sprintf("act_%02d", i), fmt.Sprintf("fp%d", i), "alice", recordv1.State_STATE_ACCEPTED)
			x.SessionId = sid
			if err := s.Update(t.Context(), func(tx *Tx) error { return tx.PutExecution(x, true) }); err != nil {
				t.Fatal(err)
			}
		}
		for sid, want := range map[string][]string{"ses_a": {"act_00", "act_02"}, "ses_b": {"act_01"}, "ses_none": nil} {
			xs, err := s.SessionExecutions(sid)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, x := range xs {
				ids = append(ids, x.GetId())
			}
			if fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Errorf("SessionExecutions(%s) = %v, want %v", sid, ids, want)
			}
		}
	})
}

func TestListPagesWithCursor(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		var want []string
		for i := range 23 {
			st := recordv1.State_STATE_OUTCOME_UNKNOWN
			if i%4 == 3 {
				st = recordv1.State_STATE_DISPATCHED // interleaved: another index
			} else {
				want = append(want, fmt.Sprintf("act_%02d", i))
			}
			x := exec(fmt.Sprintf("act_%02d", i), fmt.Sprintf("fp%d", i), "alice", st)
			if err := s.Update(ctx, func(tx *Tx) error { return tx.PutExecution(x, true) }); err != nil {
				t.Fatal(err)
			}
		}
		reversed := append([]string(nil), want...)
		slices.Reverse(reversed)
		tests := []struct {
			name string
			f    Filter
			want []string
		}{
			{"state, oldest first", Filter{State: recordv1.State_STATE_OUTCOME_UNKNOWN, OldestFirst: true}, want},
			{"state, newest first", Filter{State: recordv1.State_STATE_OUTCOME_UNKNOWN}, reversed},
			{"actor, oldest first", Filter{Actor: "alice", OldestFirst: true, State: recordv1.State_STATE_UNSPECIFIED}, nil},
		}
		// Every execution by actor, oldest first, for the third case.
		for i := range 23 {
			tests[2].want = append(tests[2].want, fmt.Sprintf("act_%02d", i))
		}
		for _, tt := range tests {
			for _, page := range []int{1, 5, 100} {
				f := tt.f
				f.Limit = page
				var got []string
				for {
					xs, err := s.List(f)
					if err != nil {
						t.Fatal(err)
					}
					for _, x := range xs {
						got = append(got, x.GetId())
					}
					if len(xs) < page {
						break
					}
					f.After = xs[len(xs)-1].GetId()
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s, pages of %d (-want +got):\n%s", tt.name, page, diff)
				}
			}
		}
	})
}

// TestUpdateAfterAFailedCommitSucceeds: a commit that failed while no other
// group was waiting must not fail the next update too (it is not built on
// the failed group's writes, which never happened).
func TestUpdateAfterAFailedCommitSucceeds(t *testing.T) {
	kv := memkv.New()
	kv.FailCommit = errors.New("disk full (injected)")
	s := newStore(t, kv)
	put := func(id string) error {
		return s.Update(context.Background(), func(tx *Tx) error {
			if _, err := tx.Execution(id); !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("%s is visible before it was written: %v", id, err)
			}
			return tx.PutExecution(exec(id, "fp-"+id, "a", recordv1.State_STATE_ACCEPTED), true)
		})
	}
	if err := put("act_1"); err == nil {
		t.Fatal("Update succeeded over a failing commit")
	}
	if err := put("act_1"); err != nil {
		t.Errorf("Update after a failed commit = %v, want success (the failure was transient)", err)
	}
	if _, err := s.Execution("act_1"); err != nil {
		t.Errorf("Execution(act_1) = %v after the retried update", err)
	}
}
