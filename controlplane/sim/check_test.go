package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// executions reads every execution from the durable store, oldest first.
func (w *world) executions() []*recordv1.Execution {
	xs, err := w.live.st.List(store.Filter{Limit: 100_000, OldestFirst: true})
	if err != nil {
		w.violate("the store cannot list executions: %v", err)
	}
	return xs
}

// intentOf is the intent x acts on (its arguments' ref), read once per
// execution: arguments never change. Callers hold w.mu.
func (w *world) intentOf(x *recordv1.Execution) string {
	if in, ok := w.intents[x.GetId()]; ok {
		return in
	}
	var args struct{ Ref string }
	_ = json.Unmarshal(x.GetArguments(), &args)
	w.intents[x.GetId()] = args.Ref
	return args.Ref
}

// saysNotHappened is a resting state that tells a caller the action did
// not happen, so calling again is safe.
func saysNotHappened(s recordv1.State) bool {
	return s == recordv1.State_STATE_NOT_EXECUTED || s == recordv1.State_STATE_CANCELLED || s == recordv1.State_STATE_REJECTED
}

// check tests the invariants on the world as it is between two steps; final
// adds what must hold once the drain is over.
func (w *world) check(final bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logFaults()
	// No second effect for an intent.
	perIntent := map[string][]*effect{}
	acted := map[string]bool{}
	for _, e := range w.effects {
		perIntent[e.intent] = append(perIntent[e.intent], e)
		acted[e.id] = true
	}
	for intent, es := range perIntent {
		if len(es) > 1 {
			var ids []string
			for _, e := range es {
				ids = append(ids, fmt.Sprintf("%s at %s by gen %d", e.id, e.target, e.gen))
			}
			w.violate("intent %s acted %d times: %s", intent, len(es), strings.Join(ids, ", "))
		}
	}
	xs := w.executions()
	byIntent := map[string][]*recordv1.Execution{}
	ids := map[string]*recordv1.Execution{}
	var digest []string
	for _, x := range xs {
		intent := w.intentOf(x)
		byIntent[intent] = append(byIntent[intent], x)
		ids[x.GetId()] = x
		digest = append(digest, intent+"="+lifecycle.Name(x.GetState()))
		// Uncertainty stays visible: an execution that acted never rests
		// at a state that says it did not.
		if acted[x.GetId()] && saysNotHappened(x.GetState()) {
			w.violate("%s (intent %s) acted at its target but rests at %s", x.GetId(), intent, lifecycle.Name(x.GetState()))
		}
	}
	// No silent re-execution: an execution is sent only when every earlier
	// one of its intent is known not to have happened.
	for intent, list := range byIntent {
		for i, x := range list {
			if x.GetDispatchedAt() == nil {
				continue
			}
			for _, prior := range list[:i] {
				if !saysNotHappened(prior.GetState()) {
					w.violate("%s of intent %s was dispatched while the earlier %s is %s", x.GetId(), intent, prior.GetId(), lifecycle.Name(prior.GetState()))
				}
			}
		}
	}
	// What a client was given survives every restart.
	for _, id := range slices.Sorted(maps.Keys(w.acked)) {
		x := ids[id]
		switch {
		case x == nil:
			w.violate("%s was given to a client and is not in the store", id)
		case w.done[id] && x.GetState() != recordv1.State_STATE_COMPLETED && x.GetState() != recordv1.State_STATE_DELIVERED:
			w.violate("%s was completed for a client and is now %s", id, lifecycle.Name(x.GetState()))
		}
	}
	w.tracef("  = %s; %d effects", strings.Join(digest, " "), len(w.effects))
	if !final {
		return
	}
	for _, x := range xs {
		if !lifecycle.Settled(x.GetState()) {
			w.violate("%s (intent %s, %s) does not rest after the drain: %s", x.GetId(), w.intentOf(x), x.GetTool(), lifecycle.Name(x.GetState()))
		}
	}
	rep, err := w.live.st.CheckState(context.Background(), store.CheckAll)
	switch {
	case err != nil:
		w.violate("state check: %v", err)
	case !rep.OK():
		w.violate("the state does not agree with the journal: %v", rep.Err())
	}
}

// allRest reports whether every execution rests.
func (w *world) allRest() bool {
	for _, x := range w.executions() {
		if !lifecycle.Settled(x.GetState()) {
			return false
		}
	}
	return true
}
