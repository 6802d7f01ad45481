package stack

import (
	"testing"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/memkv"
	"github.com/latchhq/latch/controlplane/tokens"
)

// TestActorSet: the actor rule knows configured actors, front-bound
// actors, actors with a live token, and every actor once a front is bound
// to "*".
func TestActorSet(t *testing.T) {
	st, err := store.New(store.Config{KV: memkv.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts, err := tokens.New(tokens.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ts.Create(t.Context(), "bob", 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ts.Create(t.Context(), "carol", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Revoke(t.Context(), "carol", "test"); err != nil {
		t.Fatal(err)
	}
	a := &actorSet{fixed: setOf([]string{"alice"}), tokens: ts}
	for actor, want := range map[string]bool{"alice": true, "bob": true, "carol": false, "mallory": false} {
		if got := a.Known(actor); got != want {
			t.Errorf("Known(%s) = %v, want %v", actor, got, want)
		}
	}
	if (&actorSet{fixed: setOf(nil)}).Known("bob") {
		t.Error("Known(bob) before the token store is wired = true, want false")
	}
	if !(&actorSet{any: true}).Known("mallory") {
		t.Error("Known(mallory) with a front bound to * = false, want true")
	}
}
