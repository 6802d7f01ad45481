// Package lease keeps a replica's hold on an HA store's lease: it waits for
// the lease as a standby (Acquire), renews it while active and tells when
// it is certainly still held (Keeper), with the timings of DefaultTTL. It
// knows the store only as a backend.Leaser, the capability a backend has
// when several replicas share it (PostgreSQL); the server finds it by
// interface and uses this package. Imported by server; imports nothing of
// the control plane but store/backend.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/store/backend"
)

// ErrLost is what a Keeper reports (Lost) when it could not renew the
// lease before its local deadline, or another replica took it: the replica
// stops serving (and dispatching) rather than risk two actives.
var ErrLost = errors.New("lease: the lease was lost")

// DefaultTTL is how long a PostgreSQL store's lease lasts unless
// renewed.
//
// The numbers, all fractions of the ttl (2 s by default):
//   - the active renews every ttl/8 (250 ms), and after a failed renewal
//     every ttl/10, each renewal bounded by its local deadline;
//   - its local deadline is (time the last successful renewal was sent) +
//     3/4 ttl (1.5 s): past it, it sends nothing (Holds is false) and stops.
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
const DefaultTTL = 2 * time.Second

// Lease timing as fractions of the ttl (see DefaultTTL).
func renewEvery(ttl time.Duration) time.Duration    { return ttl / 8 }
func retryEvery(ttl time.Duration) time.Duration    { return ttl / 10 }
func localDeadline(ttl time.Duration) time.Duration { return ttl - ttl/4 }

// StandbyWait is how long a standby waits before trying for the lease
// again: until the current lease expires by the database's clock (plus a
// few ms), at most a quarter of the ttl, so it also notices a new holder
// (and its address) promptly.
func StandbyWait(l *backend.Lease, ttl time.Duration) time.Duration {
	const margin = 5 * time.Millisecond
	w := margin
	if l != nil {
		w = l.Remaining() + margin
	}
	return min(max(w, margin), ttl/4)
}

// HolderName is the lease holder for this process: the replica's name and
// a random instance, so a restarted replica never mistakes its
// predecessor's lease for its own.
func HolderName(replica string) string {
	if replica == "" {
		replica, _ = os.Hostname()
	}
	b := make([]byte, 4)
	rand.Read(b) //nolint:errcheck // crypto/rand does not fail on Linux
	return replica + "/" + hex.EncodeToString(b)
}

// Acquire waits until this replica holds the lease, or ctx ends. A
// standby waits here (StandbyWait), telling seen every lease it reads. It
// returns the local time the winning request was sent, which the renewal
// deadlines count from.
func Acquire(ctx context.Context, log hclog.Logger, kv backend.Leaser, holder, address string, ttl time.Duration, seen func(*backend.Lease, time.Time)) (time.Time, error) {
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
			wait = StandbyWait(l, ttl)
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
			return time.Time{}, fmt.Errorf("lease: stopped while waiting for the store lease: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// renew keeps the lease until ctx ends. A renewal that succeeds moves
// the local deadline to (time the renewal was sent) + localDeadline: the
// database's expiry is later than that, so stopping at the deadline stops
// this replica before a standby can take over. It returns ErrLost
// when the deadline passes or another replica holds the lease.
func renew(ctx context.Context, log hclog.Logger, kv backend.Leaser, holder string, ttl time.Duration, acquired time.Time, published *atomic.Pointer[time.Time]) error {
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
			return fmt.Errorf("%w: no renewal reached the database before the local deadline %s; stopping before the lease can expire (a standby takes over)", ErrLost, deadline.Format(time.RFC3339Nano))
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
			return fmt.Errorf("%w: %w", ErrLost, err)
		case ctx.Err() != nil:
			return nil
		default:
			log.Warn("store lease renewal failed; retrying until the local deadline", "error", err, "deadline", deadline)
			next = retryEvery(ttl)
		}
	}
}

// Keeper renews the lease from acquisition (start-up checks can
// outlast a ttl) until stopped; Lost receives the reason it stopped early.
// It can exist before the lease is taken (a server's fenced channels hold
// it from New on); Start begins the renewals once it is.
type Keeper struct {
	cancel context.CancelFunc
	lost   chan error
	done   chan struct{}
	// deadline is the local (monotonic) time by which the lease must have
	// been renewed again; past it (or before the lease is taken: nil) this
	// replica must not act.
	deadline atomic.Pointer[time.Time]
}

// NewKeeper returns a Keeper that holds nothing yet.
func NewKeeper() *Keeper { return &Keeper{lost: make(chan error, 1)} }

// Lost receives the reason the renewals stopped early (once).
func (k *Keeper) Lost() <-chan error { return k.lost }

// Holds reports whether the lease is certainly still this replica's: the
// local deadline, which falls before the database's expiry, has not passed.
func (k *Keeper) Holds() bool {
	d := k.deadline.Load()
	return d != nil && time.Now().Before(*d)
}

// Start begins the renewals of a lease acquired (sent) at acquired.
func (k *Keeper) Start(log hclog.Logger, kv backend.Leaser, holder string, ttl time.Duration, acquired time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel, k.done = cancel, make(chan struct{})
	d := acquired.Add(localDeadline(ttl))
	k.deadline.Store(&d)
	go func() {
		defer close(k.done)
		if err := renew(ctx, log, kv, holder, ttl, acquired, &k.deadline); err != nil {
			log.Error("stopping: this replica no longer holds the store lease", "error", err)
			k.lost <- err
		}
	}()
}

// Started reports whether Start was called.
func (k *Keeper) Started() bool { return k != nil && k.done != nil }

// Stop ends the renewals and waits for them; the deadline is withdrawn so
// nothing is sent after.
func (k *Keeper) Stop() {
	if !k.Started() {
		return
	}
	k.cancel()
	<-k.done
	k.deadline.Store(nil)
}
