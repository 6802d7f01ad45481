package server

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/latchhq/latch/controlplane/lease"
	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/internal/replicas"
)

// ErrLeaseLost is returned by Run when the replica lost its store lease
// (lease.ErrLost).
var ErrLeaseLost = lease.ErrLost

// DefaultLeaseTTL is how long a PostgreSQL store's lease lasts unless
// renewed (lease.DefaultTTL, which gives the timings).
const DefaultLeaseTTL = lease.DefaultTTL

// stopLease stops renewing (Run did not get to serve).
func (s *Server) stopLease() {
	if s.lease != nil {
		s.lease.Stop()
	}
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
