package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/internal/testing/storetest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// TestStartupGateChecksBeforeActing: while the gate is open and its pass
// has not run, an update reading a forged unsettled execution fails with a
// confirmed mismatch (and Failed closes), a plain read of it fails, a sound
// unsettled execution reads fine; a forged settled one is left to the full
// check. The pass then reports the forgery and keeps the gate; on a sound
// store it removes the gate.
func TestStartupGateChecksBeforeActing(t *testing.T) {
	dir := t.TempDir()
	kv, s := openBadger(t, dir)
	build(t, s, 30, 10) // 0, 10, 20 stay dispatched
	s.Close()
	kv, err := badgerkv.Open(dir, badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	forged, sound, settled := idOf(0), idOf(10), idOf(1)
	for _, id := range []string{forged, settled} {
		if err := storetest.Rewrite(kv, id, func(x *recordv1.Execution) { x.Arguments = []byte(`{"version":"forged"}`) }); err != nil {
			t.Fatal(err)
		}
	}
	kv.Close()
	_, s = openBadger(t, dir)
	defer s.Close()
	g := s.OpenStartupGate()
	if _, err := s.Execution(forged); !errors.Is(err, store.ErrStateMismatch) {
		t.Errorf("Execution(forged unsettled) = %v, want an error matching ErrStateMismatch", err)
	}
	select {
	case <-g.Failed():
		t.Errorf("a plain read confirmed a mismatch; only the writer's view may")
	default:
	}
	if _, err := s.Execution(sound); err != nil {
		t.Errorf("Execution(sound unsettled) = %v", err)
	}
	if _, err := s.Execution(settled); err != nil {
		t.Errorf("Execution(forged settled) = %v; settled executions are the full check's", err)
	}
	err = s.Update(context.Background(), func(tx *store.Tx) error {
		_, err := tx.Execution(forged)
		return err
	})
	if !errors.Is(err, store.ErrStateMismatch) {
		t.Errorf("an update reading the forged execution = %v, want ErrStateMismatch", err)
	}
	select {
	case <-g.Failed():
	default:
		t.Errorf("the update's mismatch did not close Failed")
	}
	if err := s.Update(context.Background(), func(tx *store.Tx) error {
		_, err := tx.Execution(sound)
		return err
	}); err != nil {
		t.Errorf("an update reading the sound execution = %v", err)
	}
	rep, err := g.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(rep.Mismatches); len(got) == 0 || got[0].ID != forged {
		t.Errorf("pass mismatches = %v, want the forged execution %s", got, forged)
	}
	if rep.Executions != 3 {
		t.Errorf("pass checked %d executions, want the 3 unsettled", rep.Executions)
	}
	if _, err := s.Execution(forged); !errors.Is(err, store.ErrStateMismatch) {
		t.Errorf("after a failed pass, Execution(forged) = %v; the gate must stay", err)
	}

	_, clean := openBadger(t, t.TempDir())
	defer clean.Close()
	build(t, clean, 30, 10)
	g = clean.OpenStartupGate()
	if rep, err := g.Run(t.Context()); err != nil || !rep.OK() || rep.Executions != 3 {
		t.Fatalf("pass on a sound store = %v, %v; want ok over 3 executions", rep, err)
	}
	<-g.Done()
	if clean.StartupGateOpen() {
		t.Errorf("after a clean pass the gate is still open")
	}
}
