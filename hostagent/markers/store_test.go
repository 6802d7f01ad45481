package markers

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/latchhq/latch/internal/testing/testlog"
	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

func testLogger(tb testing.TB) hclog.Logger {
	return testlog.New(tb, hclog.Warn)
}

func openStore(tb testing.TB, dir string) *Store {
	tb.Helper()
	s, err := Open(Config{Dir: dir, Logger: testLogger(tb)})
	if err != nil {
		tb.Fatalf("Open(%q) = %v", dir, err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func TestCreateIsCreateIfAbsent(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "markers"))
	first := &hostagentv1.Marker{ExecutionId: "act_1", State: hostagentv1.MarkerState_MARKER_STATE_STARTING, Argv: []string{"a"}}
	got, created, err := s.Create(Runs, first)
	if err != nil || !created {
		t.Fatalf("Create(first) = %v, %v, %v, want created", got, created, err)
	}
	second := &hostagentv1.Marker{ExecutionId: "act_1", State: hostagentv1.MarkerState_MARKER_STATE_STARTING, Argv: []string{"b"}}
	got, created, err = s.Create(Runs, second)
	if err != nil || created {
		t.Fatalf("Create(second) created = %v, err = %v, want existing", created, err)
	}
	if diff := cmp.Diff(first, got, protocmp.Transform()); diff != "" {
		t.Errorf("Create(second) returned (-want +got):\n%s", diff)
	}
	// Namespaces are separate.
	if _, created, err := s.Create(Scripts, second); err != nil || !created {
		t.Errorf("Create(Scripts, same id) created = %v, err = %v, want created", created, err)
	}
}

func TestConcurrentCreateOneWinner(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "markers"))
	const n = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []int
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, created, err := s.Create(Runs, &hostagentv1.Marker{ExecutionId: "act_same", Pid: int32(i + 1)})
			if err != nil {
				t.Errorf("Create #%d: %v", i, err)
				return
			}
			if created {
				mu.Lock()
				winners = append(winners, i+1)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("winners = %v, want exactly one", winners)
	}
	got, err := s.Get(Runs, "act_same")
	if err != nil {
		t.Fatal(err)
	}
	if int(got.GetPid()) != winners[0] {
		t.Errorf("stored pid = %d, want the winner's %d", got.GetPid(), winners[0])
	}
}

func TestUpdateGetListAndReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "markers")
	s, err := Open(Config{Dir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b", "a", "c"} {
		if _, _, err := s.Create(Runs, &hostagentv1.Marker{ExecutionId: id, State: hostagentv1.MarkerState_MARKER_STATE_STARTING}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Create(Scripts, &hostagentv1.Marker{ExecutionId: "s", State: hostagentv1.MarkerState_MARKER_STATE_BEGUN}); err != nil {
		t.Fatal(err)
	}
	errStop := errors.New("stop")
	if _, err := s.Update(Runs, "a", func(*hostagentv1.Marker) error { return errStop }); !errors.Is(err, errStop) {
		t.Errorf("Update with failing fn = %v, want errStop", err)
	}
	if _, err := s.Update(Runs, "zz", func(*hostagentv1.Marker) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Errorf("Update(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.Update(Runs, "a", func(m *hostagentv1.Marker) error {
		m.State = hostagentv1.MarkerState_MARKER_STATE_EXITED
		m.ExitCode = 3
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	got, err := s.Get(Runs, "a")
	if err != nil || got.GetState() != hostagentv1.MarkerState_MARKER_STATE_EXITED || got.GetExitCode() != 3 {
		t.Fatalf("Get(a) after reopen = %v, %v, want exited 3", got, err)
	}
	if _, err := s.Get(Runs, "s"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(Runs, script id) = %v, want ErrNotFound", err)
	}
	tests := []struct {
		name  string
		ns    Namespace
		limit int
		want  []string
	}{
		{"runs", Runs, 0, []string{"a", "b", "c"}},
		{"runs limited", Runs, 2, []string{"a", "b"}},
		{"scripts", Scripts, 0, []string{"s"}},
		{"all", "", 0, []string{"a", "b", "c", "s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := s.List(tt.ns, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, m := range ms {
				ids = append(ids, m.GetExecutionId())
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("List(%q, %d) (-want +got):\n%s", tt.ns, tt.limit, diff)
			}
		})
	}
}

func TestCorruptDirFailsToOpenAndMovesAside(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "markers")
	s, err := Open(Config{Dir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(Runs, &hostagentv1.Marker{ExecutionId: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("this is not a manifest at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Dir: dir, Logger: testLogger(t)}); !errors.Is(err, ErrOpen) {
		t.Fatalf("Open(corrupt) = %v, want ErrOpen", err)
	}
	now := time.Unix(1700000000, 0)
	moved, err := MoveAside(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := dir + ".corrupt-1700000000"; moved != want {
		t.Errorf("MoveAside = %q, want %q", moved, want)
	}
	fresh := openStore(t, dir)
	if _, err := fresh.Get(Runs, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get in fresh store = %v, want ErrNotFound", err)
	}
}

// BenchmarkBeginComplete measures durable script markers: one Create and one
// Update per iteration, each durable (fsync'd) when it returns, at
// concurrency 1 (one sync per write: the floor) and 32 (writes waiting at
// the same time share a group commit), without and with the mirror log
// (one more fsync per group).
func BenchmarkBeginComplete(b *testing.B) {
	for _, bc := range []struct {
		name   string
		c      int
		mirror bool
	}{{"c=1", 1, false}, {"c=32", 32, false}, {"c=1/mirror", 1, true}, {"c=32/mirror", 32, true}} {
		b.Run(bc.name, func(b *testing.B) {
			c := bc.c
			dir := b.TempDir()
			cfg := Config{Dir: filepath.Join(dir, "markers"), Logger: testLogger(b)}
			if bc.mirror {
				cfg.MirrorLog = filepath.Join(dir, "scripts.log")
			}
			s, err := Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			var (
				next atomic.Int64
				wg   sync.WaitGroup
			)
			n := int64(b.N)
			start := time.Now()
			b.ResetTimer()
			for range c {
				wg.Go(func() {
					for i := next.Add(1); i <= n; i = next.Add(1) {
						id := "bench_" + itoa(int(i))
						if _, _, err := s.Create(Scripts, &hostagentv1.Marker{ExecutionId: id, State: hostagentv1.MarkerState_MARKER_STATE_BEGUN}); err != nil {
							b.Error(err)
							return
						}
						if _, err := s.Update(Scripts, id, func(m *hostagentv1.Marker) error {
							m.State = hostagentv1.MarkerState_MARKER_STATE_COMPLETED
							return nil
						}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "begin+complete/s")
		})
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var buf [20]byte
	n := len(buf)
	for i > 0 {
		n--
		buf[n] = byte('0' + i%10)
		i /= 10
	}
	return string(buf[n:])
}
