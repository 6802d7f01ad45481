package markers

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	hostagentv1 "github.com/latchhq/latch/proto/latch/hostagent/v1"
)

var errRefused = errors.New("refused by fn")

// TestGroupCommitManyWriters runs many concurrent writers (so that groups
// form), each creating, refusing and completing its own marker, with large
// results so that some groups exceed one transaction; every outcome must be
// the one a transaction per write would give, and survive a reopen.
func TestGroupCommitManyWriters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "markers")
	s := openStore(t, dir)
	const writers = 48
	big := strings.Repeat("x", 60<<10) // 48 × 60 KiB is more than one Badger batch
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			id := "g_" + strconv.Itoa(w)
			m, created, err := s.Create(Scripts, &hostagentv1.Marker{ExecutionId: id, State: hostagentv1.MarkerState_MARKER_STATE_BEGUN})
			if err != nil || !created || m.GetExecutionId() != id {
				errs <- errors.Join(errors.New(id+": create"), err)
				return
			}
			if _, created, err := s.Create(Scripts, &hostagentv1.Marker{ExecutionId: id}); err != nil || created {
				errs <- errors.Join(errors.New(id+": second create must find the first"), err)
				return
			}
			if _, err := s.Update(Scripts, id, func(*hostagentv1.Marker) error { return errRefused }); !errors.Is(err, errRefused) {
				errs <- errors.Join(errors.New(id+": refused update"), err)
				return
			}
			got, err := s.Update(Scripts, id, func(m *hostagentv1.Marker) error {
				m.State = hostagentv1.MarkerState_MARKER_STATE_COMPLETED
				m.ResultJson = big
				return nil
			})
			if err != nil || got.GetState() != hostagentv1.MarkerState_MARKER_STATE_COMPLETED {
				errs <- errors.Join(errors.New(id+": update"), err)
			}
			if _, err := s.Update(Scripts, id+"_missing", func(*hostagentv1.Marker) error { return nil }); !errors.Is(err, ErrNotFound) {
				errs <- errors.Join(errors.New(id+": update of a missing marker"), err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	ms, err := s.List(Scripts, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != writers {
		t.Fatalf("after reopen: %d markers, want %d", len(ms), writers)
	}
	for _, m := range ms {
		if m.GetState() != hostagentv1.MarkerState_MARKER_STATE_COMPLETED || m.GetResultJson() != big {
			t.Errorf("after reopen: %s is %v with a %d-byte result, want completed with the big result", m.GetExecutionId(), m.GetState(), len(m.GetResultJson()))
		}
	}
}

// TestWriteAfterCloseIsErrClosed: a write after Close is refused, not hung.
func TestWriteAfterCloseIsErrClosed(t *testing.T) {
	s, err := Open(Config{InMemory: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(Runs, &hostagentv1.Marker{ExecutionId: "x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Create after Close = %v, want ErrClosed", err)
	}
	if err := s.Put(Runs, &hostagentv1.Marker{ExecutionId: "x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close = %v, want ErrClosed", err)
	}
}
