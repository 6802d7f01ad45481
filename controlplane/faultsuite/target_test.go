package faultsuite

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The counting target: the ground truth of every trial. It serves one
// effect endpoint per replay class and a status endpoint keyed by the
// Idempotency-Key. It can hold a request until the trial releases it, and
// then commit and answer, commit and close without answering, commit later
// after closing (a queue in front of the database: the status endpoint
// answers 404 until the commit), or roll back.
//
// Only the idempotency_key class honours the key (a second request with a
// key it committed gets the stored answer, one with a key in flight gets
// 409); the others count every request that reaches the handler as an
// effect, so a blind re-send by the control plane shows as a duplicate.

// keyState is what the target did with one execution ID.
type keyState int

const (
	keyHeld      keyState = iota // received, no effect yet (held or pending commit)
	keyCommitted                 // the effect happened
	keyAborted                   // rolled back: no effect, never will be
)

func (s keyState) String() string {
	return [...]string{"held", "committed", "aborted"}[s]
}

// release is how a held request ends.
type release int

const (
	relCommit      release = iota // commit, then answer
	relCommitLate                 // close the connection, commit after a delay
	relAbort                      // close the connection, no effect
	relCommitClose                // commit, then close without answering
)

type keyRec struct {
	state   keyState
	arrived time.Time
	rel     chan releaseMsg
	body    []byte // stored answer once committed
}

type releaseMsg struct {
	how   release
	delay time.Duration // relCommitLate
}

type intentRec struct {
	keys    map[string]*keyRec
	order   []string // keys in arrival order
	effects int
	// hold: the first request of this intent is held until released.
	hold bool
	// answered is called after a committed answer was written and flushed.
	answered func()
	arrival  chan struct{} // closed at the first arrival
}

// target is the counting HTTP target.
type target struct {
	maxHold time.Duration // a held request is committed after this at the latest

	mu      sync.Mutex
	intents map[string]*intentRec
	stop    chan struct{}
	stopped bool // under mu: no late commit starts after close
	wg      sync.WaitGroup
}

func newTarget(maxHold time.Duration) *target {
	return &target{maxHold: maxHold, intents: map[string]*intentRec{}, stop: make(chan struct{})}
}

// close commits nothing more: held requests end as they would on a crash of
// the target before commit (aborted), and late commits still pending happen
// now, so the counts are final.
func (t *target) close() {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	close(t.stop)
	t.wg.Wait()
}

func (t *target) intentLocked(intent string) *intentRec {
	ir := t.intents[intent]
	if ir == nil {
		ir = &intentRec{keys: map[string]*keyRec{}, arrival: make(chan struct{})}
		t.intents[intent] = ir
	}
	return ir
}

// plan registers how the first request of intent is treated.
func (t *target) plan(intent string, hold bool, answered func()) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	ir := t.intentLocked(intent)
	ir.hold, ir.answered = hold, answered
	return ir.arrival
}

// releaseFirst ends the held first request of intent (no-op if it is not
// held any more).
func (t *target) releaseFirst(intent string, m releaseMsg) {
	t.mu.Lock()
	ir := t.intentLocked(intent)
	var k *keyRec
	if len(ir.order) > 0 {
		k = ir.keys[ir.order[0]]
	}
	t.mu.Unlock()
	if k == nil || k.rel == nil {
		return
	}
	select {
	case k.rel <- m:
	default: // already released
	}
}

// keyView is one execution ID as the target saw it.
type keyView struct {
	Key   string
	State keyState
}

// truth returns the keys of intent in arrival order and its effect count.
func (t *target) truth(intent string) ([]keyView, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ir := t.intents[intent]
	if ir == nil {
		return nil, 0
	}
	out := make([]keyView, 0, len(ir.order))
	for _, k := range ir.order {
		out = append(out, keyView{Key: k, State: ir.keys[k].state})
	}
	return out, ir.effects
}

// anyLive reports whether intent has a key other than except that is held
// or committed: an execution that has or may still have an effect.
func (t *target) anyLive(intent, except string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ir := t.intents[intent]
	if ir == nil {
		return "", false
	}
	for _, k := range ir.order {
		if k != except && ir.keys[k].state != keyAborted {
			return k, true
		}
	}
	return "", false
}

func (t *target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPost && len(parts) == 2 && parts[1] == "effect":
		t.effect(w, r, parts[0])
	case r.Method == http.MethodGet && len(parts) == 3 && parts[1] == "by-key":
		t.status(w, parts[2])
	default:
		http.Error(w, "no such endpoint", http.StatusNotFound)
	}
}

func (t *target) status(w http.ResponseWriter, key string) {
	t.mu.Lock()
	var body []byte
	for _, ir := range t.intents {
		if k := ir.keys[key]; k != nil && k.state == keyCommitted {
			body = k.body
		}
	}
	t.mu.Unlock()
	if body == nil {
		// Unknown, held, pending commit or rolled back: the hard case of
		// issue 10 (a 404 for a key the target has received).
		http.Error(w, "no such key", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

func (t *target) effect(w http.ResponseWriter, r *http.Request, class string) {
	var in struct {
		Intent string `json:"intent"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Intent == "" {
		http.Error(w, "body must be {\"intent\": ...}", http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		http.Error(w, "Idempotency-Key required", http.StatusBadRequest)
		return
	}
	t.mu.Lock()
	ir := t.intentLocked(in.Intent)
	if k := ir.keys[key]; k != nil && class == "idem" {
		switch k.state {
		case keyCommitted:
			body := k.body
			t.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
			return
		case keyHeld:
			t.mu.Unlock()
			http.Error(w, "a request with this key is in progress", http.StatusConflict)
			return
		}
		// aborted: the key is free again; process it as new.
	}
	first := len(ir.order) == 0
	k := &keyRec{state: keyHeld, arrived: time.Now()}
	if _, seen := ir.keys[key]; !seen {
		ir.order = append(ir.order, key)
	}
	ir.keys[key] = k
	hold := first && ir.hold
	if hold {
		k.rel = make(chan releaseMsg, 1)
	}
	if first {
		close(ir.arrival)
	}
	answered := ir.answered
	t.mu.Unlock()

	m := releaseMsg{how: relCommit}
	if hold {
		timer := time.NewTimer(t.maxHold)
		select {
		case m = <-k.rel:
		case <-timer.C:
		case <-t.stop:
			m = releaseMsg{how: relAbort}
		}
		timer.Stop()
	}
	switch m.how {
	case relAbort:
		t.finish(in.Intent, key, false)
		hijackClose(w)
	case relCommitLate:
		left := t.maxHold - time.Since(k.arrived)
		d := min(m.delay, max(left, 0))
		t.mu.Lock()
		if t.stopped {
			t.mu.Unlock()
			t.finish(in.Intent, key, true)
			hijackClose(w)
			return
		}
		t.wg.Add(1)
		t.mu.Unlock()
		hijackClose(w)
		go func() {
			defer t.wg.Done()
			select {
			case <-time.After(d):
			case <-t.stop:
			}
			t.finish(in.Intent, key, true)
		}()
	case relCommitClose:
		t.finish(in.Intent, key, true)
		hijackClose(w)
	default:
		body := t.finish(in.Intent, key, true)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		if first && answered != nil {
			answered()
		}
	}
}

// finish records the end of key: committed (an effect) or aborted.
func (t *target) finish(intent, key string, commit bool) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	ir := t.intentLocked(intent)
	k := ir.keys[key]
	if !commit {
		k.state = keyAborted
		return nil
	}
	ir.effects++
	k.state = keyCommitted
	k.body = []byte(fmt.Sprintf(`{"intent":%q,"key":%q,"effect":%d}`, intent, key, ir.effects))
	return k.body
}

// hijackClose drops the connection without an answer.
func hijackClose(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}
