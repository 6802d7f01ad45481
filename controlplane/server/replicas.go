package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/backend"
)

// replicaBeat records this replica in a PostgreSQL store's latch_replicas
// (for `latch store status`): at start, when it becomes active, then every
// third of the lease ttl, until stopped (then it marks the row stopped). A failed beat is logged at debug level
// only: the table is informational and the lease reports real trouble.
type replicaBeat struct {
	// holder is the name the lease is taken under, once known.
	holder atomic.Pointer[string]
	kick   chan struct{} // beat now (the holder is known)
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// startBeat starts the beat on a PostgreSQL kv; nil otherwise (stop on a
// nil beat is a no-op).
func startBeat(log hclog.Logger, cfg Config, kv store.KV) *replicaBeat {
	pg, ok := kv.(backend.ReplicaTable)
	if !ok {
		return nil
	}
	name := cfg.Replica
	if name == "" {
		name, _ = os.Hostname()
	}
	id := make([]byte, 4)
	rand.Read(id) //nolint:errcheck // crypto/rand does not fail on Linux
	instance := hex.EncodeToString(id)
	every := cfg.LeaseTTL / 3
	if every <= 0 {
		every = DefaultLeaseTTL / 3
	}
	log = log.Named("replicas")
	ctx, cancel := context.WithCancel(context.Background())
	b := &replicaBeat{cancel: cancel, done: make(chan struct{}), kick: make(chan struct{}, 1)}
	go func() {
		defer close(b.done)
		defer func() {
			sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := pg.StoppedReplica(sctx, name, instance); err != nil {
				log.Debug("could not mark this replica stopped in latch_replicas", "error", err)
			}
			scancel()
		}()
		for {
			bctx, bcancel := context.WithTimeout(ctx, every)
			var holder string
			if h := b.holder.Load(); h != nil {
				holder = *h
			}
			err := pg.SeenReplica(bctx, backend.ReplicaSeen{Name: name, Instance: instance, Holder: holder, Addr: cfg.TCPAddr})
			bcancel()
			if err != nil && ctx.Err() == nil {
				log.Debug("could not record this replica in latch_replicas", "error", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-b.kick:
			case <-time.After(every):
			}
		}
	}()
	return b
}

// setHolder tells the beat the lease holder name (so its row says
// "active" while that holder has the lease).
func (b *replicaBeat) setHolder(h string) {
	if b != nil {
		b.holder.Store(&h)
		b.now()
	}
}

// now beats at once (the role changed).
func (b *replicaBeat) now() {
	if b == nil {
		return
	}
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

func (b *replicaBeat) stop() {
	if b == nil {
		return
	}
	b.once.Do(func() {
		b.cancel()
		<-b.done
	})
}
