package failover

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/testing/countingtarget"
	"github.com/latchhq/latch/internal/testing/faultproxy"
	"github.com/latchhq/latch/internal/testing/testbin"
	controlplanev1 "github.com/latchhq/latch/proto/latch/controlplane/v1"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Timing of every cluster. Every target request ends by holdFor after it
// arrived, inside the dispatch timeout, so a 404 from the status endpoint
// after dispatch timeout + settle is true absence.
const (
	leaseTTL        = 2 * time.Second
	dispatchTimeout = 2 * time.Second
	settle          = 2 * time.Second
	holdFor         = 700 * time.Millisecond
)

// The catalog: the counting target's tools, one per replay class.
var fo = countingtarget.CatalogConfig{Prefix: "fo", Timeout: dispatchTimeout, Settle: settle}

var (
	toolIdem   = fo.Tool(countingtarget.ClassIdem)
	toolStatus = fo.Tool(countingtarget.ClassStatus)
	toolReview = fo.Tool(countingtarget.ClassReview)
)

// held says whether the target holds every request of intent (for
// holdFor, whatever happens to the sender meanwhile): an intent whose name
// ends in "_h", so that a test can kill the active while the target holds
// one of its requests.
func held(intent string) bool { return strings.HasSuffix(intent, "_h") }

// actors of the agents: a front serves one; the replicas trust them all.
var actors = []string{"a0", "a1"}

// clusterOpts shapes a cluster.
type clusterOpts struct {
	replicas int
	// store is the connection string the replicas use; with proxied, each
	// replica reaches the database through a faultproxy of its own
	// instead, and store must be a postgres:// URL on pgAddr.
	store   string
	proxied bool
	pgAddr  string
	// watch is the connection string of the lease watcher (default store).
	watch string
}

// cluster is N `latch serve` replicas on one PostgreSQL database, with
// the counting target.
type cluster struct {
	t       *testing.T
	dir     string
	catalog string
	opts    clusterOpts

	tgt *countingtarget.Target

	replicas []*replica
	fronts   []*testbin.Proc
	urls     []string // the fronts' MCP URLs

	lease *leaseWatch
}

// replica is one replica's identity (name, data dir, database proxy) and
// the processes run under it, one at a time.
type replica struct {
	c     *cluster
	idx   int
	name  string
	data  string
	proxy *faultproxy.Proxy // nil unless proxied
	store string

	mu    sync.Mutex
	cur   *testbin.Proc
	count int
	all   []*testbin.Proc
}

func newCluster(t *testing.T, opts clusterOpts) *cluster {
	t.Helper()
	needBinaries(t)
	dir, err := os.MkdirTemp("", "fo-") // short: unix socket paths
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, dir: dir, catalog: filepath.Join(dir, "catalog.yaml"), opts: opts}
	t.Cleanup(func() {
		c.close()
		if t.Failed() || os.Getenv("LATCH_FAILOVER_KEEP") != "" {
			t.Logf("cluster kept for inspection: %s (r*-*.log, front*.log)", dir)
			return
		}
		os.RemoveAll(dir)
	})
	for i := range opts.replicas {
		r := &replica{c: c, idx: i, name: fmt.Sprintf("r%d", i), data: filepath.Join(dir, fmt.Sprintf("r%d", i)), store: opts.store}
		if err := os.MkdirAll(r.data, 0o700); err != nil {
			t.Fatal(err)
		}
		if opts.proxied {
			r.proxy, err = faultproxy.Start(opts.pgAddr)
			if err != nil {
				t.Fatal(err)
			}
			r.store = strings.Replace(opts.store, "@"+opts.pgAddr+"/", "@"+r.proxy.Addr()+"/", 1)
			if r.store == opts.store {
				t.Fatalf("store URL %s does not name %s", opts.store, opts.pgAddr)
			}
		}
		c.replicas = append(c.replicas, r)
	}
	// c.replicas is fixed from here on: the target reads it.
	c.tgt = countingtarget.Start(countingtarget.Config{MaxHold: holdFor, HoldEvery: held, Senders: c.pids})
	cat := fo
	cat.Addr = c.tgt.Addr()
	if err := countingtarget.WriteCatalog(c.catalog, cat); err != nil {
		t.Fatal(err)
	}
	watch := opts.watch
	if watch == "" {
		watch = opts.store
	}
	c.lease = watchLease(t, watch)
	// The first replica creates the vault and the keys in the store; the
	// others get its unlock key.
	first := c.replicas[0]
	if err := first.start(); err != nil {
		t.Fatal(err)
	}
	if !c.waitActive(first, 30*time.Second) {
		t.Fatalf("replica r0 did not become active within 30s:\n%s", first.proc().ReadLog())
	}
	for _, r := range c.replicas[1:] {
		copyKeys(t, first.data, r.data)
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// needBinaries skips t in -short mode, where TestMain builds nothing.
func needBinaries(t *testing.T) {
	t.Helper()
	if latchBin == "" {
		t.Skip("the failover tests run real binaries; not in -short mode")
	}
}

// copyKeys gives replica dir b replica dir a's vault unlock key: the
// fingerprint and journal keys and the vault itself are in the store,
// sealed under it.
func copyKeys(t *testing.T, a, b string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(a, "vault.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, "vault.key"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) close() {
	for _, f := range c.fronts {
		f.Stop()
	}
	for _, r := range c.replicas {
		if p := r.proc(); p != nil {
			p.Kill()
		}
		if r.proxy != nil {
			r.proxy.Close()
		}
	}
	if c.lease != nil {
		c.lease.close()
	}
	if c.tgt != nil {
		c.tgt.Close()
	}
}

// pids returns every replica process's PID (the target's candidates).
func (c *cluster) pids() []int {
	var out []int
	for _, r := range c.replicas {
		r.mu.Lock()
		for _, p := range r.all {
			if !p.Exited() {
				out = append(out, p.PID())
			}
		}
		r.mu.Unlock()
	}
	return out
}

// start runs a new `latch serve` process for r (it waits as a standby
// while another holds the lease).
func (r *replica) start() error {
	args := []string{"serve", "--data", r.data, "--catalog", r.c.catalog, "--vault-key-file", filepath.Join(r.data, "vault.key"),
		"--store", r.store, "--replica", r.name, "--lease-ttl", leaseTTL.String(), "--log-level", "debug"}
	for _, a := range actors {
		args = append(args, "--actor", a, "--trusted-actor", a)
	}
	r.mu.Lock()
	r.count++
	n := r.count
	r.mu.Unlock()
	p, err := testbin.StartProc(latchBin, args, filepath.Join(r.c.dir, fmt.Sprintf("%s-%d.log", r.name, n)))
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.cur = p
	r.all = append(r.all, p)
	r.mu.Unlock()
	return nil
}

func (r *replica) proc() *testbin.Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

func (r *replica) socket() string { return datadir.Socket(r.data) }

var holderLine = regexp.MustCompile(`this replica is active.*? holder=(\S+) epoch=(\d+)`)

var holders sync.Map // *testbin.Proc → epochRec, once logged

// holderOf returns the lease holder and epoch process p logged when it
// became active, or "" while it has not.
func holderOf(p *testbin.Proc) (string, int64) {
	if v, ok := holders.Load(p); ok {
		e := v.(epochRec)
		return e.Holder, e.Epoch
	}
	m := holderLine.FindStringSubmatch(p.ReadLog())
	if m == nil {
		return "", 0
	}
	e, _ := strconv.ParseInt(m[2], 10, 64)
	holders.Store(p, epochRec{Holder: m[1], Epoch: e})
	return m[1], e
}

// active returns the replica whose live process holds the current lease
// (by the lease watcher and the processes' logs), or nil.
func (c *cluster) active() (*replica, *testbin.Proc) {
	cur, ok := c.lease.current()
	if !ok {
		return nil, nil
	}
	for _, r := range c.replicas {
		p := r.proc()
		if p == nil || p.Exited() {
			continue
		}
		if h, _ := holderOf(p); h == cur.Holder {
			return r, p
		}
	}
	return nil, nil
}

// waitActive waits (bounded) until r's current process is active and its
// socket answers.
func (c *cluster) waitActive(r *replica, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if a, _ := c.active(); a == r {
			if conn, err := net.Dial("unix", r.socket()); err == nil {
				conn.Close()
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// waitAnyActive waits (bounded) until some live replica process other
// than except is active and serving, and returns it.
func (c *cluster) waitAnyActive(bound time.Duration, except *testbin.Proc) (*replica, *testbin.Proc) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if r, p := c.active(); r != nil && p != except {
			if conn, err := net.Dial("unix", r.socket()); err == nil {
				conn.Close()
				return r, p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, nil
}

// client dials a replica's API socket (as the operator: same uid).
func (r *replica) client(t testing.TB) controlplanev1.ControlPlaneClient {
	t.Helper()
	sock := r.socket()
	conn, err := grpc.NewClient("passthrough:///latch", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return controlplanev1.NewControlPlaneClient(conn)
}

// operator returns a client of the active replica, waiting (bounded) for
// one.
func (c *cluster) operator(t testing.TB) controlplanev1.ControlPlaneClient {
	t.Helper()
	r, _ := c.waitAnyActive(60*time.Second, nil)
	if r == nil {
		t.Fatalf("no replica is active and serving after 60s")
	}
	return r.client(t)
}

// restartDead starts a new process for every replica whose process has
// exited (what a supervisor such as systemd's Restart=always does).
func (c *cluster) restartDead() {
	for _, r := range c.replicas {
		if p := r.proc(); p != nil && p.Exited() {
			if err := r.start(); err != nil {
				c.t.Errorf("restart %s: %v", r.name, err)
			}
		}
	}
}

// supervise restarts exited replica processes every 200ms until the
// returned function is called.
func (c *cluster) supervise() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
				c.restartDead()
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// epochRec is one lease epoch as the watcher saw it.
type epochRec struct {
	Holder   string
	Epoch    int64
	Acquired time.Time // the database's clock (the same machine's)
}

// leaseWatch polls the lease row directly (never through a replica's
// proxy) and keeps every epoch it saw.
type leaseWatch struct {
	mu     sync.Mutex
	epochs []epochRec
	cancel context.CancelFunc
	done   chan struct{}
}

func watchLease(t *testing.T, dsn string) *leaseWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &leaseWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				conn.Close(context.Background())
			}
		}()
		for ctx.Err() == nil {
			if conn == nil {
				cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
				c, err := pgx.Connect(cctx, dsn)
				ccancel()
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				conn = c
			}
			var e epochRec
			qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
			err := conn.QueryRow(qctx, "SELECT holder, epoch, acquired_at FROM latch_lease WHERE id = 1").Scan(&e.Holder, &e.Epoch, &e.Acquired)
			qcancel()
			if err != nil {
				conn.Close(context.Background())
				conn = nil
				continue
			}
			w.mu.Lock()
			if n := len(w.epochs); e.Epoch > 0 && (n == 0 || w.epochs[n-1].Epoch != e.Epoch) {
				w.epochs = append(w.epochs, e)
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *leaseWatch) close() {
	w.cancel()
	<-w.done
}

func (w *leaseWatch) current() (epochRec, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.epochs) == 0 {
		return epochRec{}, false
	}
	return w.epochs[len(w.epochs)-1], true
}

func (w *leaseWatch) all() []epochRec {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]epochRec(nil), w.epochs...)
}

// senders maps every replica process that ever became active to its
// epoch, by PID.
func (c *cluster) senders() map[int]epochRec {
	out := map[int]epochRec{}
	for _, r := range c.replicas {
		r.mu.Lock()
		all := append([]*testbin.Proc(nil), r.all...)
		r.mu.Unlock()
		for _, p := range all {
			if h, e := holderOf(p); h != "" {
				out[p.PID()] = epochRec{Holder: h, Epoch: e}
			}
		}
	}
	return out
}

// checkFencing asserts that no request reached the target from a replica
// after a later epoch than the sender's had begun: what two actives
// dispatching at once would produce. It returns the number of violations
// and of arrivals it could not attribute.
func (c *cluster) checkFencing(t *testing.T) (violations, unattributed int) {
	t.Helper()
	epochs := c.lease.all()
	bad, unattributed := fencingViolations(epochs, c.senders(), c.tgt.Arrivals())
	for _, b := range bad {
		t.Error(b)
	}
	if len(epochs) > 0 {
		t.Logf("lease epochs seen: %d (first %d, last %d)", len(epochs), epochs[0].Epoch, epochs[len(epochs)-1].Epoch)
	}
	return len(bad), unattributed
}

// fencingViolations returns one line per arrival sent by a process that
// never held the lease, or sent after an epoch later than its own began,
// and the number of arrivals whose sender is unknown (PID 0).
func fencingViolations(epochs []epochRec, senders map[int]epochRec, arrivals []countingtarget.Arrival) (bad []string, unattributed int) {
	sorted := append([]epochRec(nil), epochs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Epoch < sorted[j].Epoch })
	for _, a := range arrivals {
		s, ok := senders[a.PID]
		switch {
		case a.PID == 0:
			unattributed++
			continue
		case !ok:
			bad = append(bad, fmt.Sprintf("execution %s (intent %s) reached the target at %s from PID %d, a replica that never held the lease",
				a.Key, a.Intent, a.At.Format(time.StampMicro), a.PID))
			continue
		}
		for _, e := range sorted {
			if e.Epoch > s.Epoch && a.At.After(e.Acquired) {
				bad = append(bad, fmt.Sprintf("execution %s (intent %s) reached the target at %s from %s (epoch %d), after epoch %d (%s) began at %s: two replicas dispatching",
					a.Key, a.Intent, a.At.Format(time.StampMicro), s.Holder, s.Epoch, e.Epoch, e.Holder, e.Acquired.Format(time.StampMicro)))
				break
			}
		}
	}
	return bad, unattributed
}

// journalOf renders an execution's journal entries on one line.
func journalOf(op controlplanev1.ControlPlaneClient, id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := op.History(ctx, &controlplanev1.HistoryRequest{ExecutionId: id})
	if err != nil {
		return id + ": no history: " + err.Error()
	}
	var b strings.Builder
	b.WriteString(id + ":")
	for _, e := range h.GetEntries() {
		fmt.Fprintf(&b, " %s→%s (%s);", lifecycle.EntryKindNameOf(e), e.GetTo(), e.GetReason())
	}
	return b.String()
}

// ack is an answer an agent saw: an execution the control plane
// acknowledged, in the state it was reported in.
type ack struct {
	ID, Intent string
	State      recordv1.State
	At         time.Time
}

// mayHaveEffect: states that say "this may have happened, or did".
var mayHaveEffect = map[recordv1.State]bool{
	recordv1.State_STATE_DISPATCHED: true, recordv1.State_STATE_OUTCOME_UNKNOWN: true, recordv1.State_STATE_NEEDS_REVIEW: true,
	recordv1.State_STATE_COMPLETED: true, recordv1.State_STATE_DELIVERED: true,
}

// unsettled: states recovery still moves on its own.
func unsettled(s recordv1.State) bool {
	return s == recordv1.State_STATE_DISPATCHED || s == recordv1.State_STATE_OUTCOME_UNKNOWN ||
		s == recordv1.State_STATE_ACCEPTED || s == recordv1.State_STATE_AUTHORIZED
}

// stateRank orders states along the lifecycle, for "not behind what the
// agent saw".
func stateRank(s recordv1.State) int {
	switch s {
	case recordv1.State_STATE_ACCEPTED:
		return 1
	case recordv1.State_STATE_AUTHORIZED, recordv1.State_STATE_AWAITING_APPROVAL:
		return 2
	case recordv1.State_STATE_DISPATCHED:
		return 3
	case recordv1.State_STATE_OUTCOME_UNKNOWN:
		return 4
	default: // completed, delivered, not executed, needs review, rejected, cancelled
		return 5
	}
}

// verify checks, after the failures: every acknowledged execution exists
// with its journal and is not behind the state the agent saw; no intent
// has two effects; every execution that reached the target and had an
// effect shows a state that says it may have happened. It waits (bounded)
// for recovery to settle first.
func (c *cluster) verify(t *testing.T, acks []ack) {
	t.Helper()
	op := c.operator(t)
	ids := map[string]bool{}
	for _, a := range acks {
		ids[a.ID] = true
	}
	for id := range c.tgt.CommittedKeys() {
		ids[id] = true
	}
	get := func(id string) (*recordv1.Execution, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := op.Get(ctx, &controlplanev1.GetRequest{ExecutionId: id})
		return r.GetExecution(), err
	}
	waitStart := time.Now()
	deadline := waitStart.Add(dispatchTimeout + settle + 30*time.Second)
	for {
		var left []string
		for id := range ids {
			if x, err := get(id); err == nil && unsettled(x.GetState()) {
				left = append(left, id)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			for _, id := range left {
				// Dispatched with nothing sending it is stuck: only
				// recovery moves it, and recovery must have by now.
				if x, err := get(id); err == nil && x.GetState() == recordv1.State_STATE_DISPATCHED {
					t.Errorf("still dispatched after waiting %s for recovery: nothing is recovering it: %s target: %s", time.Since(waitStart).Round(time.Second), journalOf(op, id), c.tgt.Describe(id))
					continue
				}
				t.Logf("still unsettled after the bound (visible as such): %s target: %s", journalOf(op, id), c.tgt.Describe(id))
			}
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	lost := 0
	final := map[string]int{}
	counted := map[string]bool{}
	for _, a := range acks {
		x, err := get(a.ID)
		if err == nil && !counted[a.ID] {
			counted[a.ID] = true
			final[strings.ToLower(strings.TrimPrefix(x.GetState().String(), "STATE_"))]++
		}
		if err != nil {
			lost++
			t.Errorf("acknowledged execution %s (intent %s, seen %s at %s) is gone after failover: %v", a.ID, a.Intent, a.State, a.At.Format(time.StampMilli), err)
			continue
		}
		if stateRank(x.GetState()) < stateRank(a.State) {
			t.Errorf("execution %s is %s, behind the %s an agent saw", a.ID, x.GetState(), a.State)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		h, err := op.History(ctx, &controlplanev1.HistoryRequest{ExecutionId: a.ID})
		cancel()
		if err != nil || len(h.GetEntries()) == 0 {
			t.Errorf("acknowledged execution %s has no journal: %v", a.ID, err)
		}
	}
	dups := 0
	for intent, n := range c.tgt.Effects() {
		if n > 1 {
			dups += n - 1
			t.Errorf("intent %s has %d effects at the target, want at most 1", intent, n)
		}
	}
	invisible := 0
	for id, intent := range c.tgt.CommittedKeys() {
		x, err := get(id)
		if err != nil || !mayHaveEffect[x.GetState()] {
			invisible++
			t.Errorf("execution %s (intent %s) had its effect at the target but shows %v (%v)", id, intent, x.GetState(), err)
		}
	}
	t.Logf("final states of the acknowledged executions: %v", final)
	t.Logf("verified %d acknowledgements of %d executions (%d lost), %d effects at the target (%d duplicate), %d invisible", len(acks), len(counted), lost, len(c.tgt.CommittedKeys()), dups, invisible)
}
