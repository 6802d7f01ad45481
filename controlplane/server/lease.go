package server

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

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/store"
)

// ErrLeaseLost is returned by Run when the replica could not renew its
// lease before its local deadline, or another replica took it: the replica
// stops serving (and dispatching) rather than risk two actives.
var ErrLeaseLost = errors.New("server: the lease was lost")

// DefaultLeaseTTL is how long a PostgreSQL store's lease lasts unless
// renewed; it is renewed every third of it.
const DefaultLeaseTTL = 10 * time.Second

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

// acquireLease waits until this replica holds the lease (a standby waits
// here, retrying every quarter of the ttl but at least twice a second, so
// a released lease is taken at once), or ctx ends.
// It returns the local time the winning request was sent, which the
// renewal deadlines count from.
func acquireLease(ctx context.Context, log hclog.Logger, kv *store.PostgresKV, holder string, ttl time.Duration) (time.Time, error) {
	waiting := false
	for {
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, ttl)
		l, err := kv.AcquireLease(actx, holder, ttl)
		cancel()
		if err == nil {
			log.Info("holding the store lease: this replica is active", "holder", holder, "epoch", l.Epoch, "ttl", ttl, "took", time.Since(start))
			return start, nil
		}
		if !errors.Is(err, store.ErrLeaseHeld) {
			log.Warn("could not take the store lease; retrying", "error", err)
		} else if !waiting {
			waiting = true
			log.Info("standby: another replica holds the store lease; waiting for it to expire", "active", l.Holder, "epoch", l.Epoch, "expires", l.Expires)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("server: stopped while waiting for the store lease: %w", ctx.Err())
		case <-time.After(min(ttl/4, 500*time.Millisecond)):
		}
	}
}

// renewLease keeps the lease until ctx ends. A renewal that succeeds moves
// the local deadline to (time the renewal was sent) + ttl - ttl/4: the
// database's expiry is later than that, so stopping at the deadline stops
// this replica before a standby can take over. It returns ErrLeaseLost
// when the deadline passes or another replica holds the lease.
func renewLease(ctx context.Context, log hclog.Logger, kv *store.PostgresKV, holder string, ttl time.Duration, acquired time.Time, published *atomic.Pointer[time.Time]) error {
	deadline := acquired.Add(ttl - ttl/4)
	published.Store(&deadline)
	next := ttl / 3
	for {
		wait := min(next, max(time.Until(deadline), 0))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
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
			deadline, next = sent.Add(ttl-ttl/4), ttl/3
			d := deadline
			published.Store(&d)
		case errors.Is(err, store.ErrFenced):
			return fmt.Errorf("%w: %v", ErrLeaseLost, err)
		case ctx.Err() != nil:
			return nil
		default:
			log.Warn("store lease renewal failed; retrying until the local deadline", "error", err, "deadline", deadline)
			next = ttl / 10
		}
	}
}

// leaseKeeper renews the lease from acquisition (start-up checks can
// outlast a ttl) until stopped; lost receives the reason it stopped early.
type leaseKeeper struct {
	cancel context.CancelFunc
	lost   chan error
	done   chan struct{}
	// deadline is the local (monotonic) time by which the lease must have
	// been renewed again; past it this replica must not act.
	deadline atomic.Pointer[time.Time]
}

// holds reports whether the lease is certainly still this replica's: the
// local deadline, which falls before the database's expiry, has not passed.
func (k *leaseKeeper) holds() bool {
	d := k.deadline.Load()
	return d != nil && time.Now().Before(*d)
}

func keepLease(log hclog.Logger, kv *store.PostgresKV, holder string, ttl time.Duration, acquired time.Time) *leaseKeeper {
	ctx, cancel := context.WithCancel(context.Background())
	k := &leaseKeeper{cancel: cancel, lost: make(chan error, 1), done: make(chan struct{})}
	d := acquired.Add(ttl - ttl/4)
	k.deadline.Store(&d)
	go func() {
		defer close(k.done)
		if err := renewLease(ctx, log, kv, holder, ttl, acquired, &k.deadline); err != nil {
			log.Error("stopping: this replica no longer holds the store lease", "error", err)
			k.lost <- err
		}
	}()
	return k
}

// stop ends the renewals and waits for them.
func (k *leaseKeeper) stop() {
	k.cancel()
	<-k.done
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
