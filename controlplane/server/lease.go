package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/internal/replicas"
)

// ErrLeaseLost is returned by Run when the replica could not renew its
// lease before its local deadline, or another replica took it: the replica
// stops serving (and dispatching) rather than risk two actives.
var ErrLeaseLost = errors.New("server: the lease was lost")

// DefaultLeaseTTL is how long a PostgreSQL store's lease lasts unless
// renewed.
//
// The numbers, all fractions of the ttl (2 s by default):
//   - the active renews every ttl/8 (250 ms), and after a failed renewal
//     every ttl/10, each renewal bounded by its local deadline;
//   - its local deadline is (time the last successful renewal was sent) +
//     3/4 ttl (1.5 s): past it, it sends nothing (fencedChannel) and stops.
//     The database's expiry is at least ttl after that send, so the active
//     stops starting sends at least ttl/4 (500 ms) before any standby can
//     take over; a database or network stall shorter than ~5/8 ttl
//     (1.25 s) costs nothing;
//   - a standby reads the expiry and tries again the moment it passes (by
//     the database's clock, never comparing two machines' clocks).
//
// So after an active is killed, a standby holds the lease within ttl -
// ttl/8 to ttl (1.75–2 s) and serves once it loaded the state. Like etcd's
// 100 ms heartbeats in a 1 s election timeout, the lease is renewed many
// times within one ttl. A database with slower failovers or stalls wants
// a longer --lease-ttl, at the price of a longer takeover.
const DefaultLeaseTTL = 2 * time.Second

// Lease timing as fractions of the ttl (see DefaultLeaseTTL).
func renewEvery(ttl time.Duration) time.Duration    { return ttl / 8 }
func retryEvery(ttl time.Duration) time.Duration    { return ttl / 10 }
func localDeadline(ttl time.Duration) time.Duration { return ttl - ttl/4 }

// standbyWait is how long a standby waits before trying for the lease
// again: until the current lease expires by the database's clock (plus a
// few ms), at most a quarter of the ttl, so it also notices a new holder
// (and its address) promptly.
func standbyWait(l *backend.Lease, ttl time.Duration) time.Duration {
	const margin = 5 * time.Millisecond
	w := margin
	if l != nil {
		w = l.Remaining() + margin
	}
	return min(max(w, margin), ttl/4)
}

// holderName is the lease holder for this process: the replica's name and
// a random instance, so a restarted replica never mistakes its
// predecessor's lease for its own.
func holderName(replica string) string {
	if replica == "" {
		replica, _ = os.Hostname()
	}
	b := make([]byte, 4)
	rand.Read(b) //nolint:errcheck // crypto/rand does not fail on Linux
	return replica + "/" + hex.EncodeToString(b)
}

// acquireLease waits until this replica holds the lease, or ctx ends. A
// standby waits here (standbyWait), telling seen every lease it reads. It
// returns the local time the winning request was sent, which the renewal
// deadlines count from.
func acquireLease(ctx context.Context, log hclog.Logger, kv backend.Leaser, holder, address string, ttl time.Duration, seen func(*backend.Lease, time.Time)) (time.Time, error) {
	var lastHolder string
	failures := 0
	for {
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, ttl)
		l, err := kv.AcquireLease(actx, holder, address, ttl)
		cancel()
		if err == nil {
			log.Info("holding the store lease: this replica is active", "holder", holder, "epoch", l.Epoch, "address", address, "ttl", ttl, "took", time.Since(start))
			return start, nil
		}
		wait := ttl / 4
		switch {
		case errors.Is(err, backend.ErrLeaseHeld):
			failures = 0
			seen(l, start)
			wait = standbyWait(l, ttl)
			if l.Holder != lastHolder {
				lastHolder = l.Holder
				log.Info("standby: another replica holds the store lease; serving as a standby until it expires", "active", l.Holder, "address", l.Address, "epoch", l.Epoch, "expires", l.Expires)
			}
		case ctx.Err() != nil:
		default:
			// Logged at once, then every 20th try (about every 5 ttl).
			if failures%20 == 0 {
				log.Warn("could not take the store lease; retrying", "error", err, "failures", failures+1)
			}
			failures++
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return time.Time{}, fmt.Errorf("server: stopped while waiting for the store lease: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// renewLease keeps the lease until ctx ends. A renewal that succeeds moves
// the local deadline to (time the renewal was sent) + localDeadline: the
// database's expiry is later than that, so stopping at the deadline stops
// this replica before a standby can take over. It returns ErrLeaseLost
// when the deadline passes or another replica holds the lease.
func renewLease(ctx context.Context, log hclog.Logger, kv backend.Leaser, holder string, ttl time.Duration, acquired time.Time, published *atomic.Pointer[time.Time]) error {
	deadline := acquired.Add(localDeadline(ttl))
	published.Store(&deadline)
	next := renewEvery(ttl)
	for {
		wait := min(next, max(time.Until(deadline), 0))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w: no renewal reached the database before the local deadline %s; stopping before the lease can expire (a standby takes over)", ErrLeaseLost, deadline.Format(time.RFC3339Nano))
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(ctx, deadline)
		_, err := kv.RenewLease(rctx, holder, ttl)
		cancel()
		switch {
		case err == nil:
			deadline, next = sent.Add(localDeadline(ttl)), renewEvery(ttl)
			d := deadline
			published.Store(&d)
		case errors.Is(err, backend.ErrFenced):
			return fmt.Errorf("%w: %v", ErrLeaseLost, err)
		case ctx.Err() != nil:
			return nil
		default:
			log.Warn("store lease renewal failed; retrying until the local deadline", "error", err, "deadline", deadline)
			next = retryEvery(ttl)
		}
	}
}

// leaseKeeper renews the lease from acquisition (start-up checks can
// outlast a ttl) until stopped; lost receives the reason it stopped early.
// It exists from New on (the fenced channels hold it); start begins the
// renewals once the lease is taken.
type leaseKeeper struct {
	cancel context.CancelFunc
	lost   chan error
	done   chan struct{}
	// deadline is the local (monotonic) time by which the lease must have
	// been renewed again; past it (or before the lease is taken: nil) this
	// replica must not act.
	deadline atomic.Pointer[time.Time]
}

func newLeaseKeeper() *leaseKeeper { return &leaseKeeper{lost: make(chan error, 1)} }

// holds reports whether the lease is certainly still this replica's: the
// local deadline, which falls before the database's expiry, has not passed.
func (k *leaseKeeper) holds() bool {
	d := k.deadline.Load()
	return d != nil && time.Now().Before(*d)
}

// start begins the renewals of a lease acquired (sent) at acquired.
func (k *leaseKeeper) start(log hclog.Logger, kv backend.Leaser, holder string, ttl time.Duration, acquired time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel, k.done = cancel, make(chan struct{})
	d := acquired.Add(localDeadline(ttl))
	k.deadline.Store(&d)
	go func() {
		defer close(k.done)
		if err := renewLease(ctx, log, kv, holder, ttl, acquired, &k.deadline); err != nil {
			log.Error("stopping: this replica no longer holds the store lease", "error", err)
			k.lost <- err
		}
	}()
}

// started reports whether start was called.
func (k *leaseKeeper) started() bool { return k != nil && k.done != nil }

// stop ends the renewals and waits for them; the deadline is withdrawn so
// nothing is sent after.
func (k *leaseKeeper) stop() {
	if !k.started() {
		return
	}
	k.cancel()
	<-k.done
	k.deadline.Store(nil)
}

// stopLease stops renewing (Run did not get to serve).
func (s *Server) stopLease() {
	if s.lease != nil {
		s.lease.stop()
	}
}

// fencedChannel refuses to send once the lease's local deadline has
// passed: checked before every dispatch, so a replica that could not renew
// sends nothing a standby might send again after taking over. Queries only
// ask and pass through.
type fencedChannel struct {
	engine.Channel
	lease *leaseKeeper
}

func (c fencedChannel) Dispatch(ctx context.Context, call engine.Call) engine.Attempt {
	if !c.lease.holds() {
		return engine.Attempt{Class: engine.NotSent, Reason: "this replica's store lease could not be renewed in time: nothing was sent (the active replica dispatches it)"}
	}
	return c.Channel.Dispatch(ctx, call)
}

// Roles of a replica (Role.Role).
const (
	RoleSingle     = "single"      // a Badger store: no lease, always active
	RoleStandby    = "standby"     // another replica holds the lease, or nobody yet
	RoleTakingOver = "taking-over" // holds the lease, loading state and recovering
	RoleActive     = "active"      // holds the lease and serves
)

// Role is what a replica says about itself (health, NotActive answers).
type Role struct {
	Role string
	// Holder and Epoch are this replica's lease when it holds it, else the
	// lease it last read; Active is the active replica's advertised address
	// ("" when unknown, or the last lease read has expired).
	Holder string
	Epoch  int64
	Active string
	// Self is this replica's lease holder name and advertised address.
	Self, Address string
}

// Fields are the role as key/value pairs (the ops listener's /healthz).
func (r Role) Fields() map[string]string {
	m := map[string]string{"role": r.Role}
	if r.Self != "" {
		m["replica"] = r.Self
	}
	if r.Address != "" {
		m["address"] = r.Address
	}
	if r.Holder != "" {
		m["holder"] = r.Holder
		m["epoch"] = strconv.FormatInt(r.Epoch, 10)
	}
	if r.Active != "" {
		m["active_address"] = r.Active
	}
	return m
}

// roleState tracks the role and the lease a standby last read.
type roleState struct {
	mu      sync.Mutex
	role    string
	seen    *backend.Lease
	seenAt  time.Time // local time of the read (its request's start)
	epoch   int64     // this replica's, once it holds the lease
	address string
}

func (r *roleState) set(role string, epoch int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.role = role
	if epoch > 0 {
		r.epoch = epoch
	}
}

func (r *roleState) observe(l *backend.Lease, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen, r.seenAt = l, at
}

// Role reports the replica's role now.
func (s *Server) Role() Role {
	r := &s.role
	r.mu.Lock()
	defer r.mu.Unlock()
	out := Role{Role: r.role, Self: s.holder, Address: r.address}
	switch r.role {
	case RoleActive, RoleTakingOver:
		out.Holder, out.Epoch = s.holder, s.pg.Epoch()
		if r.role == RoleActive {
			out.Active = r.address
		}
	case RoleStandby:
		if l := r.seen; l != nil && l.Holder != "" {
			out.Holder, out.Epoch = l.Holder, l.Epoch
			// Name the address only while that lease runs (by the
			// database's clock, counted from the local read): a killed
			// active's address would send callers to a dead replica.
			if time.Since(r.seenAt) < l.Remaining() {
				out.Active = l.Address
			}
		}
	}
	return out
}

// notActive is a standby's answer to an RPC it does not serve.
func (s *Server) notActive() error {
	r := s.Role()
	if r.Role == RoleTakingOver {
		return replicas.NotActive("", "", 0)
	}
	return replicas.NotActive(r.Active, r.Holder, r.Epoch)
}

// advertise is the address this replica tells others to reach it at:
// Config.Advertise, else the bound TCP listener (the host name for a
// wildcard host), else its unix socket.
func (s *Server) advertise() string {
	if s.cfg.Advertise != "" {
		return s.cfg.Advertise
	}
	if a := s.TCPAddr(); a != "" {
		host, port, err := net.SplitHostPort(a)
		if err == nil && (host == "" || net.ParseIP(host).IsUnspecified()) {
			if h, err := os.Hostname(); err == nil {
				return net.JoinHostPort(h, port)
			}
		}
		return a
	}
	sock, err := filepath.Abs(s.cfg.Socket)
	if err != nil {
		sock = s.cfg.Socket
	}
	return "unix://" + sock
}
