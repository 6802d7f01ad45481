package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// answeringTargets answers every dispatch (status 200), calling onAnswer
// first; queries are fakeTargets'.
type answeringTargets struct {
	*fakeTargets
	onAnswer func()
}

func (a *answeringTargets) Dispatch(ctx context.Context, c Call) Attempt {
	a.onAnswer()
	return Attempt{Class: Observed, Outcome: recordv1.Outcome_OUTCOME_SUCCEEDED, Result: &recordv1.Result{Status: 200, Body: []byte(`{"ok":true}`)}, Reason: "status 200"}
}

// TestFailedCompletionIsRecovered: when the target answered but the
// completion cannot be written (the database connection was lost, while
// this replica stays active), the execution does not stay dispatched
// until the next start: recovery takes it up and asks the target. (Found
// by controlplane/failover's database failover: two executions stayed
// dispatched for good after the PostgreSQL primary was killed.)
func TestFailedCompletionIsRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, kv := memStore(t)
		ch := &answeringTargets{fakeTargets: newFakeTargets(1), onAnswer: func() { kv.fail.Store(true) }}
		e := newRecoveryEngine(t, st, ch, RecoveryConfig{Interval: time.Hour, MinBackoff: time.Second, MaxBackoff: time.Hour})
		if err := e.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer func() { e.Close(); st.Close() }()
		id := submitOrder(t, e, "order", 1).Execution.GetId()
		synctest.Wait()
		if x, _ := st.Execution(id); x.GetState() != recordv1.State_STATE_DISPATCHED {
			t.Fatalf("state %s while the store fails, want dispatched", lifecycle.Name(x.GetState()))
		}
		kv.fail.Store(false)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		want := []string{"accepted", "authorized", "dispatched", "outcome_unknown", "completed"}
		if diff := cmp.Diff(want, transitionPath(t, st, id)); diff != "" {
			t.Errorf("transitions (-want +got):\n%s", diff)
		}
	})
}

// transitionPath is the states an execution moved through, in journal
// order (records that did not change the state left out).
func transitionPath(t *testing.T, st *store.Store, id string) []string {
	t.Helper()
	hist, err := st.History(id)
	if err != nil {
		t.Fatal(err)
	}
	var path []string
	for _, h := range hist {
		if h.GetFrom() != h.GetTo() {
			path = append(path, lifecycle.Name(h.GetTo()))
		}
	}
	return path
}
