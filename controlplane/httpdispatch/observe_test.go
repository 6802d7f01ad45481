package httpdispatch

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestNoIdempotencyKey: a call in observe mode reaches a target that has
// an idempotency header without it; the same call enforced carries it.
func TestNoIdempotencyKey(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	d := newDispatcher(t, Config{})
	tg := demoTarget("http", srv.Listener.Addr().String())

	observed := releaseCall(tg, "exec-01", "1")
	observed.NoIdempotencyKey = true
	if _, err := d.Send(t.Context(), observed); err != nil {
		t.Fatalf("Send(observed) = %v", err)
	}
	if _, err := d.Send(t.Context(), releaseCall(tg, "exec-02", "1")); err != nil {
		t.Fatalf("Send(enforced) = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != "" || got[1] != "exec-02" {
		t.Errorf("Idempotency-Key headers seen = %q, want [\"\" \"exec-02\"]", got)
	}
}
