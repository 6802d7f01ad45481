package pgkv

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchhq/latch/controlplane/store/backend"
)

// Replicas seen on a PostgreSQL store (schema 3), for `latch store
// status`. Informational: the lease alone decides who is active.

// SeenReplica upserts r's row (Name, Instance, Holder, Addr; the rest is
// the database's): a new instance (a restarted process) restarts
// StartedAt. The role is computed from the lease in the same statement, so
// it is what the lease said at that moment.
func (k *KV) SeenReplica(ctx context.Context, r backend.ReplicaSeen) error {
	if r.Name == "" || r.Instance == "" {
		return errors.New("store: SeenReplica needs the replica's name and instance")
	}
	_, err := k.pool.Exec(ctx, `INSERT INTO latch_replicas AS r (name, instance, holder, addr, role, started_at, last_seen)
		SELECT $1, $2, $3, $4, CASE WHEN $3 <> '' AND l.holder = $3 AND l.expires_at > now() THEN 'active' ELSE 'standby' END, now(), now()
		FROM latch_lease l WHERE l.id = 1
		ON CONFLICT (name) DO UPDATE SET instance = EXCLUDED.instance, holder = EXCLUDED.holder, addr = EXCLUDED.addr,
			role = EXCLUDED.role, last_seen = EXCLUDED.last_seen,
			started_at = CASE WHEN r.instance = EXCLUDED.instance THEN r.started_at ELSE EXCLUDED.started_at END`, r.Name, r.Instance, r.Holder, r.Addr)
	if err != nil {
		return fmt.Errorf("store: record this replica in latch_replicas: %w", err)
	}
	return nil
}

// Replicas lists the replicas seen, most recently seen first.
func (k *KV) Replicas(ctx context.Context) ([]backend.ReplicaSeen, error) {
	rows, err := k.pool.Query(ctx, `SELECT r.name, r.instance, r.holder, r.addr,
		CASE WHEN r.holder <> '' AND r.holder = l.holder AND l.expires_at > now() THEN 'active'
			WHEN r.role = 'stopped' THEN 'stopped' ELSE 'standby' END,
		r.started_at, r.last_seen
		FROM latch_replicas r CROSS JOIN latch_lease l WHERE l.id = 1
		ORDER BY r.last_seen DESC, r.name LIMIT 1000`)
	if err != nil {
		return nil, fmt.Errorf("store: read latch_replicas: %w", err)
	}
	defer rows.Close()
	var out []backend.ReplicaSeen
	for rows.Next() {
		var r backend.ReplicaSeen
		if err := rows.Scan(&r.Name, &r.Instance, &r.Holder, &r.Addr, &r.Role, &r.StartedAt, &r.LastSeen); err != nil {
			return nil, fmt.Errorf("store: read latch_replicas: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read latch_replicas: %w", err)
	}
	return out, nil
}

// StoppedReplica marks the replica's row stopped (its process ended
// cleanly); a later process of that name beats it back.
func (k *KV) StoppedReplica(ctx context.Context, name, instance string) error {
	_, err := k.pool.Exec(ctx, "UPDATE latch_replicas SET role = 'stopped', last_seen = now() WHERE name = $1 AND instance = $2", name, instance)
	if err != nil {
		return fmt.Errorf("store: mark this replica stopped in latch_replicas: %w", err)
	}
	return nil
}
