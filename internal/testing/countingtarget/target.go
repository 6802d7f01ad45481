// Package countingtarget is the counting HTTP target of the fault suite
// (controlplane/faultsuite) and the failover tests (controlplane/failover):
// the ground truth those suites hold the control plane's answers against.
// It knows which execution IDs (the Idempotency-Key) reached it, for which
// intent, from which process, and which of them had an effect. Test code
// only: no binary may link it (internal/testing/testbin.TestSupport).
//
// It serves one effect endpoint per replay class and a status endpoint
// keyed by the Idempotency-Key:
//
//	POST /{class}/effect   body {"intent": ...}, header Idempotency-Key
//	GET  /{class}/by-key/{key}
//
// Only the "idem" class honours the key (a second request with a key it
// committed gets the stored answer, one with a key in flight gets 409); the
// others count every request that reaches the handler as an effect, so a
// blind re-send by the control plane shows as a duplicate. The status
// endpoint answers 200 with the stored answer of a committed key and 404
// for anything else: unknown, held, pending a late commit or rolled back
// (the hard case of issue 10, a 404 for a key the target has received).
//
// A request can be held before its effect: the first request of an intent
// given to Plan, or every request of an intent Config.HoldEvery names. A
// held request ends at Config.MaxHold after its arrival at the latest (it
// commits then), so a 404 seen after that point is true absence. Before
// that, ReleaseFirst ends the first one: commit and answer, commit and close
// without answering, close and commit later (a queue in front of the
// database), or roll back. Close ends what is still held as a crash of the
// target before its commit would (rolled back), so the counts are final.
//
// The catalog of the three classes is Catalog (catalog.go).
package countingtarget

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// The replay classes, each an endpoint of the target and a target of the
// catalog.
const (
	ClassIdem   = "idem"   // replay: idempotency_key; the target honours the key
	ClassStatus = "status" // replay: status_query
	ClassReview = "review" // replay: review
)

// KeyState is what the target did with one execution ID.
type KeyState int

const (
	Held      KeyState = iota // received, no effect yet (held or pending a late commit)
	Committed                 // the effect happened
	Aborted                   // rolled back: no effect, never will be
)

func (s KeyState) String() string {
	return [...]string{"held", "committed", "aborted"}[s]
}

// How is how a held request ends.
type How int

const (
	Commit      How = iota // commit, then answer
	CommitLate             // close the connection, commit after a delay
	Abort                  // close the connection, no effect
	CommitClose            // commit, then close without answering
)

// Release is how ReleaseFirst ends a held request.
type Release struct {
	How   How
	Delay time.Duration // CommitLate: how long after the close it commits (at most until MaxHold)
}

// Config shapes a Target.
type Config struct {
	// MaxHold is how long a held request waits at the most: it commits at
	// MaxHold after its arrival unless released otherwise first.
	MaxHold time.Duration
	// HoldEvery, when set, says whether every request of an intent is held
	// (until MaxHold) rather than only the first one Plan names.
	HoldEvery func(intent string) bool
	// Senders, when set, lists the processes that may send (by PID): each
	// arrival names the one holding the sending socket (found in /proc), 0
	// when none does.
	Senders func() []int
	// Keyless accepts requests without an Idempotency-Key, as a target
	// that knows no idempotency would: each is an effect of its own, under
	// a key the target names (keyless-N). Observe mode sends no key.
	// Unset, such a request is refused (400): in enforce mode a missing
	// key is a bug.
	Keyless bool
}

// Arrival is one request that reached an effect endpoint.
type Arrival struct {
	Key, Intent, Class string
	At                 time.Time
	PID                int // 0: the sender is not known (no Config.Senders, or not among them)
}

// KeyView is one execution ID as the target saw it.
type KeyView struct {
	Key   string
	State KeyState
}

type keyRec struct {
	state   KeyState
	arrived time.Time
	rel     chan Release // planned hold only
	body    []byte       // stored answer once committed
}

type intentRec struct {
	keys    map[string]*keyRec
	order   []string // keys in arrival order
	effects int
	// hold: the first request of this intent is held until released.
	hold bool
	// answered is called after the first request's committed answer was
	// written and flushed.
	answered func()
	arrival  chan struct{} // closed at the first arrival
}

// Target is the counting HTTP target, served on a loopback port.
type Target struct {
	cfg Config
	srv *httptest.Server

	mu       sync.Mutex
	intents  map[string]*intentRec
	arrivals []Arrival
	// onHeld and onAnswered, when set, are called (outside mu) with the
	// sender's PID when any request is held and after any committed answer
	// was written and flushed.
	onHeld, onAnswered func(pid int)
	stop               chan struct{}
	stopped            bool // under mu: no late commit starts after Close
	keyless            int  // under mu: requests without a key so far (Config.Keyless)
	wg                 sync.WaitGroup
	closeOnce          sync.Once
}

// Start serves a new target on 127.0.0.1 on a free port.
func Start(cfg Config) *Target {
	t := New(cfg)
	t.srv = httptest.NewUnstartedServer(t)
	t.srv.Config.ConnContext = t.connContext
	t.srv.Config.ReadHeaderTimeout = 10 * time.Second
	t.srv.Start()
	return t
}

// New returns a target that is not served: its ServeHTTP is the handler.
// Start is New with a server.
func New(cfg Config) *Target {
	return &Target{cfg: cfg, intents: map[string]*intentRec{}, stop: make(chan struct{})}
}

// Addr is the host:port the target serves on (Start only).
func (t *Target) Addr() string { return t.srv.Listener.Addr().String() }

// URL is http://Addr (Start only).
func (t *Target) URL() string { return t.srv.URL }

// Close commits nothing more: held requests end as they would on a crash
// of the target before commit (aborted), late commits still pending happen
// now, so the counts are final; then the server (if any) stops.
func (t *Target) Close() {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.stopped = true
		t.mu.Unlock()
		close(t.stop)
		t.wg.Wait()
		if t.srv != nil {
			t.srv.Close()
		}
	})
}

type pidKey struct{}

// connContext finds the sending process of a new connection.
func (t *Target) connContext(ctx context.Context, c net.Conn) context.Context {
	if t.cfg.Senders == nil {
		return ctx
	}
	r, ok1 := c.RemoteAddr().(*net.TCPAddr)
	l, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return ctx
	}
	return context.WithValue(ctx, pidKey{}, socketOwner(r, l, t.cfg.Senders()))
}

// SetHooks sets the functions called with the sender's PID when a request
// is held and after a committed answer was written and flushed; nil clears
// one.
func (t *Target) SetHooks(onHeld, onAnswered func(pid int)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.onHeld, t.onAnswered = onHeld, onAnswered
}

func (t *Target) intentLocked(intent string) *intentRec {
	ir := t.intents[intent]
	if ir == nil {
		ir = &intentRec{keys: map[string]*keyRec{}, arrival: make(chan struct{})}
		t.intents[intent] = ir
	}
	return ir
}

// Plan registers how the first request of intent is treated: held until
// ReleaseFirst (or MaxHold) when hold is set, answered (when not nil)
// called after its committed answer was written. The channel is closed at
// the intent's first arrival.
func (t *Target) Plan(intent string, hold bool, answered func()) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	ir := t.intentLocked(intent)
	ir.hold, ir.answered = hold, answered
	return ir.arrival
}

// ReleaseFirst ends the held first request of intent (no-op if it is not
// held any more).
func (t *Target) ReleaseFirst(intent string, m Release) {
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

// Truth returns the keys of intent in arrival order and its effect count.
func (t *Target) Truth(intent string) ([]KeyView, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ir := t.intents[intent]
	if ir == nil {
		return nil, 0
	}
	out := make([]KeyView, 0, len(ir.order))
	for _, k := range ir.order {
		out = append(out, KeyView{Key: k, State: ir.keys[k].state})
	}
	return out, ir.effects
}

// AnyLive reports whether intent has a key other than except that is held
// or committed: an execution that has or may still have an effect.
func (t *Target) AnyLive(intent, except string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ir := t.intents[intent]
	if ir == nil {
		return "", false
	}
	for _, k := range ir.order {
		if k != except && ir.keys[k].state != Aborted {
			return k, true
		}
	}
	return "", false
}

// Effects returns the committed effects per intent (intents with none
// left out).
func (t *Target) Effects() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for intent, ir := range t.intents {
		if ir.effects > 0 {
			out[intent] = ir.effects
		}
	}
	return out
}

// Arrivals returns every arrival so far, in order.
func (t *Target) Arrivals() []Arrival {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Arrival(nil), t.arrivals...)
}

// CommittedKeys returns the execution IDs that had an effect, each with
// its intent.
func (t *Target) CommittedKeys() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]string{}
	for intent, ir := range t.intents {
		for key, k := range ir.keys {
			if k.state == Committed {
				out[key] = intent
			}
		}
	}
	return out
}

// Describe says what the target saw of one execution ID, for a failure
// message.
func (t *Target) Describe(key string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	for _, a := range t.arrivals {
		if a.Key == key {
			fmt.Fprintf(&b, "arrived %s from PID %d (%s); ", a.At.Format(time.StampMilli), a.PID, a.Class)
		}
	}
	if k := t.keyLocked(key); k != nil {
		fmt.Fprintf(&b, "%s", k.state)
	} else {
		b.WriteString("never arrived")
	}
	return b.String()
}

func (t *Target) keyLocked(key string) *keyRec {
	for _, ir := range t.intents {
		if k := ir.keys[key]; k != nil {
			return k
		}
	}
	return nil
}

func (t *Target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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

func (t *Target) status(w http.ResponseWriter, key string) {
	t.mu.Lock()
	var body []byte
	if k := t.keyLocked(key); k != nil && k.state == Committed {
		body = k.body
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

func (t *Target) effect(w http.ResponseWriter, r *http.Request, class string) {
	var in struct {
		Intent string `json:"intent"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Intent == "" {
		http.Error(w, `body must be {"intent": ...}`, http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" && !t.cfg.Keyless {
		http.Error(w, "Idempotency-Key required", http.StatusBadRequest)
		return
	}
	pid, _ := r.Context().Value(pidKey{}).(int)
	t.mu.Lock()
	if key == "" {
		t.keyless++
		key = fmt.Sprintf("keyless-%d", t.keyless)
	}
	if t.stopped {
		t.mu.Unlock()
		http.Error(w, "the counting target is closed", http.StatusServiceUnavailable)
		return
	}
	t.arrivals = append(t.arrivals, Arrival{Key: key, Intent: in.Intent, Class: class, At: time.Now(), PID: pid})
	ir := t.intentLocked(in.Intent)
	if k := ir.keys[key]; k != nil && class == ClassIdem {
		switch k.state {
		case Committed:
			body := k.body
			t.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
			return
		case Held:
			t.mu.Unlock()
			http.Error(w, "a request with this key is in progress", http.StatusConflict)
			return
		}
		// aborted: the key is free again; process it as new.
	}
	first := len(ir.order) == 0
	k := &keyRec{state: Held, arrived: time.Now()}
	if _, seen := ir.keys[key]; !seen {
		ir.order = append(ir.order, key)
	}
	ir.keys[key] = k
	planned := first && ir.hold
	hold := planned || (t.cfg.HoldEvery != nil && t.cfg.HoldEvery(in.Intent))
	if planned {
		k.rel = make(chan Release, 1)
	}
	if first {
		close(ir.arrival)
	}
	answered := ir.answered
	onHeld, onAnswered := t.onHeld, t.onAnswered
	t.wg.Add(1)
	t.mu.Unlock()
	defer t.wg.Done()

	m := Release{How: Commit}
	if hold {
		if onHeld != nil {
			onHeld(pid)
		}
		timer := time.NewTimer(t.cfg.MaxHold)
		select {
		case m = <-k.rel: // never ready when k.rel is nil
		case <-timer.C:
		case <-t.stop:
			m = Release{How: Abort}
		}
		timer.Stop()
	}
	switch m.How {
	case Abort:
		t.finish(in.Intent, key, false)
		hijackClose(w)
	case CommitLate:
		left := t.cfg.MaxHold - time.Since(k.arrived)
		d := min(m.Delay, max(left, 0))
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
	case CommitClose:
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
		if onAnswered != nil {
			onAnswered(pid)
		}
	}
}

// finish records the end of key: committed (an effect) or aborted.
func (t *Target) finish(intent, key string, commit bool) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	ir := t.intentLocked(intent)
	k := ir.keys[key]
	if !commit {
		k.state = Aborted
		return nil
	}
	ir.effects++
	k.state = Committed
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
