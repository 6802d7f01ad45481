package backend

import (
	"context"
	"errors"
	"time"
)

// Lease errors.
var (
	// ErrFenced is returned by a commit or a renewal after another replica
	// took the lease: this replica is no longer active and must stop.
	ErrFenced = errors.New("store: fenced: another replica holds the lease")
	// ErrLeaseHeld is returned by AcquireLease while another replica's
	// lease has not expired.
	ErrLeaseHeld = errors.New("store: the lease is held by another replica")
)

// Leaser is a KV shared by several replicas, of which the one holding the
// lease is active: after a takeover the old holder's commits and renewals
// fail with ErrFenced. A backend that is a Leaser is an HA store: the
// server runs standby until it holds the lease. Implemented by *pgkv.KV.
type Leaser interface {
	KV
	// ReadLease reads the lease row (Epoch 0: never taken).
	ReadLease(ctx context.Context) (*Lease, error)
	// AcquireLease takes the lease for holder unless another holder's has
	// not expired (ErrLeaseHeld); it bumps the epoch that fences commits.
	AcquireLease(ctx context.Context, holder, address string, ttl time.Duration) (*Lease, error)
	// RenewLease extends holder's lease, or returns ErrFenced.
	RenewLease(ctx context.Context, holder string, ttl time.Duration) (*Lease, error)
	// ReleaseLease gives holder's lease up (expires it now).
	ReleaseLease(ctx context.Context, holder string) error
	// Epoch is the epoch this process's commits are fenced by (0 before
	// it acquired the lease).
	Epoch() int64
}

// Lease is the active replica's hold on a shared store.
type Lease struct {
	Holder string
	// Address is where the holder serves its API for fronts and
	// operators (its advertised host:port or unix:///path; "" when it
	// advertises none): standbys name it in their NotActive answers.
	Address string
	Epoch   int64
	Expires time.Time // the database's clock
	// Acquired and Renewed are the database's times.
	Acquired, Renewed time.Time
	// Now is the database's clock when the row was read (zero when it
	// was not: a renewal), so a reader can tell how long the lease runs
	// without comparing two machines' clocks.
	Now time.Time
}

// Remaining is how long the lease runs past its reading, by the
// database's clock (0 when expired or unknown).
func (l *Lease) Remaining() time.Duration {
	if l == nil || l.Now.IsZero() {
		return 0
	}
	return max(l.Expires.Sub(l.Now), 0)
}

// KeyRows is a store that keeps the control plane's keys for every
// replica, sealed by the caller: the store never sees a key in clear.
// Implemented by *pgkv.KV.
type KeyRows interface {
	// PutKeyIfAbsent stores key unless a key of that name exists, and
	// returns the stored key: the caller's (created true) or the one
	// another replica stored first (created false).
	PutKeyIfAbsent(ctx context.Context, key StoredKey) (StoredKey, bool, error)
	// Key reads the named key, or ErrNotFound.
	Key(ctx context.Context, name string) (StoredKey, error)
	// PublicKey reads the named key's public part (needs no vault).
	PublicKey(ctx context.Context, name string) (string, error)
}

// StoredKey is one stored key row.
type StoredKey struct {
	Name string
	// Sealed is the key sealed by the vault (opaque to the store).
	Sealed []byte
	// Public is the part that may be read in clear (the journal's
	// verifier key); empty for a secret-only key.
	Public string
	// CreatedBy is the replica that created the key; CreatedAt the
	// database's time it did.
	CreatedBy string
	CreatedAt time.Time
}

// ReplicaTable is a store that records the replicas running on it, for
// `latch store status`. Informational: the lease alone decides who is
// active. Implemented by *pgkv.KV.
type ReplicaTable interface {
	// SeenReplica upserts r's row (Name, Instance, Holder, Addr).
	SeenReplica(ctx context.Context, r ReplicaSeen) error
	// Replicas lists the replicas seen, most recent first.
	Replicas(ctx context.Context) ([]ReplicaSeen, error)
	// StoppedReplica marks the instance stopped after a clean stop.
	StoppedReplica(ctx context.Context, name, instance string) error
}

// ReplicaSeen is one row of the replica table.
type ReplicaSeen struct {
	// Name is the replica's --replica name (default its host name);
	// Instance tells its processes apart (a restart is a new instance);
	// Holder is the name it takes the lease under ("" until known).
	Name, Instance, Holder string
	// Addr is the address it serves the API on ("" when only its socket).
	Addr string
	// Role is "active" while its holder holds the lease (read live from
	// the lease), "stopped" after a clean stop, else "standby".
	Role string
	// StartedAt and LastSeen are the database's times of the process's
	// first beat and its last.
	StartedAt, LastSeen time.Time
}

// VaultRow is a store that keeps the vault document for every replica, so
// that all of them open the same vault. The document holds only sealed
// entries: the store never sees a secret in clear. The composition root
// finds it by this interface and gives the document to the vault.
// Implemented by *pgkv.KV.
type VaultRow interface {
	// VaultDocument is the vault document's place in the store.
	VaultDocument() Document
}

// Document is one document a store keeps (the vault's): the methods of
// vault.Storage, which the vault documents.
type Document interface {
	// Load returns the stored document, or an error wrapping
	// fs.ErrNotExist when there is none yet.
	Load() ([]byte, error)
	// Create stores the first document, or fails with an error wrapping
	// the vault's ErrExists when one is stored already.
	Create(data []byte) error
	// Replace stores data over the document last loaded, created or
	// replaced through this Document.
	Replace(data []byte) error
	// String names the place in logs and errors.
	String() string
}

// Snapshotter is a store that can be read live, from one consistent
// read-only view, while its active replica goes on committing: an auditor
// reads a whole journal prefix with its checkpoints, executions and
// results, never half a commit. Implemented by *pgkv.KV.
type Snapshotter interface {
	// ReadSnapshot begins the view as of now. Its Commit fails with
	// ErrReadOnly; closing it closes the store it was taken from.
	ReadSnapshot(ctx context.Context) (KV, error)
}
