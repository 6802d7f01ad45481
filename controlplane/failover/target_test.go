package failover

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The counting target: the ground truth. One effect endpoint per replay
// class (idem honours the Idempotency-Key: a key it committed gets the
// stored answer, a key in flight 409; status and review count every
// request that reaches them), a status endpoint by key, and for every
// request the process that sent it, found by its socket in /proc.
//
// An intent whose name ends in "_h" is held: its requests wait holdFor
// before committing (whatever happens to the sender meanwhile), so a test
// can kill the active while the target holds a request. Every request ends
// by holdFor after its arrival, well inside dispatch timeout + settle.

// arrival is one request that reached an effect endpoint.
type arrival struct {
	Key, Intent, Class string
	At                 time.Time
	PID                int // 0: the sender could not be found
}

type keyRec struct {
	committed bool
	inflight  bool
	body      []byte
}

type target struct {
	holdFor time.Duration
	// pids lists the processes that may send (the replicas'); a sender is
	// looked up among them.
	pids func() []int

	mu       sync.Mutex
	keys     map[string]*keyRec
	effects  map[string]int // intent → committed effects
	arrivals []arrival
	// onHeld and onAnswered, when set, are called (outside mu) when a held
	// request arrives and after an answer was written and flushed.
	onHeld, onAnswered func(pid int)
	stop               chan struct{}
	wg                 sync.WaitGroup
}

func newTarget(holdFor time.Duration, pids func() []int) *target {
	return &target{holdFor: holdFor, pids: pids, keys: map[string]*keyRec{}, effects: map[string]int{}, stop: make(chan struct{})}
}

type pidKey struct{}

// connContext finds the sending process of a new connection.
func (t *target) connContext(ctx context.Context, c net.Conn) context.Context {
	r, ok1 := c.RemoteAddr().(*net.TCPAddr)
	l, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return ctx
	}
	return context.WithValue(ctx, pidKey{}, socketOwner(r, l, t.pids()))
}

// hooks sets the callbacks.
func (t *target) hooks(onHeld, onAnswered func(pid int)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.onHeld, t.onAnswered = onHeld, onAnswered
}

func (t *target) close() {
	close(t.stop)
	t.wg.Wait()
}

// effectsOf returns the committed effects per intent.
func (t *target) effectsOf() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.effects))
	for k, v := range t.effects {
		out[k] = v
	}
	return out
}

// arrivalsSoFar returns every arrival in order.
func (t *target) arrivalsSoFar() []arrival {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]arrival(nil), t.arrivals...)
}

// committedKeys returns the execution IDs that had an effect, by intent.
func (t *target) committedKeys() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]string{}
	for _, a := range t.arrivals {
		if k := t.keys[a.Key]; k != nil && k.committed {
			out[a.Key] = a.Intent
		}
	}
	return out
}

// describe says what the target saw of one execution ID.
func (t *target) describe(key string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	for _, a := range t.arrivals {
		if a.Key == key {
			fmt.Fprintf(&b, "arrived %s from PID %d (%s); ", a.At.Format(time.StampMilli), a.PID, a.Class)
		}
	}
	if k := t.keys[key]; k != nil {
		fmt.Fprintf(&b, "committed %v", k.committed)
	} else {
		b.WriteString("never arrived")
	}
	return b.String()
}

func (t *target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPost && len(parts) == 2 && parts[1] == "effect":
		t.effect(w, r, parts[0])
	case r.Method == http.MethodGet && len(parts) == 3 && parts[1] == "by-key":
		t.mu.Lock()
		k := t.keys[parts[2]]
		var body []byte
		if k != nil && k.committed {
			body = k.body
		}
		t.mu.Unlock()
		if body == nil {
			http.Error(w, "no such key", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	default:
		http.Error(w, "no such endpoint", http.StatusNotFound)
	}
}

func (t *target) effect(w http.ResponseWriter, r *http.Request, class string) {
	var in struct {
		Intent string `json:"intent"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Intent == "" {
		http.Error(w, `body must be {"intent": ...}`, http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		http.Error(w, "Idempotency-Key required", http.StatusBadRequest)
		return
	}
	pid, _ := r.Context().Value(pidKey{}).(int)
	t.mu.Lock()
	t.arrivals = append(t.arrivals, arrival{Key: key, Intent: in.Intent, Class: class, At: time.Now(), PID: pid})
	k := t.keys[key]
	if k != nil && class == "idem" {
		switch {
		case k.committed:
			body := k.body
			t.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
			return
		case k.inflight:
			t.mu.Unlock()
			http.Error(w, "a request with this key is in progress", http.StatusConflict)
			return
		}
	}
	if k == nil {
		k = &keyRec{}
		t.keys[key] = k
	}
	k.inflight = true
	held := strings.HasSuffix(in.Intent, "_h")
	onHeld, onAnswered := t.onHeld, t.onAnswered
	t.wg.Add(1)
	t.mu.Unlock()
	defer t.wg.Done()

	if held {
		if onHeld != nil {
			onHeld(pid)
		}
		select {
		case <-time.After(t.holdFor):
		case <-t.stop:
		}
	}
	t.mu.Lock()
	t.effects[in.Intent]++
	k.inflight, k.committed = false, true
	k.body = []byte(fmt.Sprintf(`{"intent":%q,"key":%q,"effect":%d}`, in.Intent, key, t.effects[in.Intent]))
	body := k.body
	t.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if onAnswered != nil {
		onAnswered(pid)
	}
}

// socketOwner returns which of pids holds the TCP socket from remote (the
// sender's end) to local (ours), by its inode in /proc/net/tcp and the
// processes' fd tables; 0 when none does (the sender exited, or is not
// among pids).
func socketOwner(remote, local *net.TCPAddr, pids []int) int {
	inode := tcpInode(remote, local)
	if inode == "" {
		return 0
	}
	want := "socket:[" + inode + "]"
	for _, pid := range pids {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name())); err == nil && l == want {
				return pid
			}
		}
	}
	return 0
}

// tcpInode finds the inode of the IPv4 socket whose local end is from and
// whose remote end is to.
func tcpInode(from, to *net.TCPAddr) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	wantL, wantR := procAddr(from), procAddr(to)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 9 && fs[1] == wantL && fs[2] == wantR {
			return fs[9]
		}
	}
	return ""
}

// procAddr is an IPv4 address as /proc/net/tcp writes it: the address as a
// little-endian hex word, the port big-endian.
func procAddr(a *net.TCPAddr) string {
	ip := a.IP.To4()
	if ip == nil {
		return ""
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], a.Port)
}
