// Package pgkv is the PostgreSQL store backend, shared by every replica of
// a control plane: the key space, the lease that makes one replica active
// (backend.Leaser), the sealed key rows (backend.KeyRows) and the replica
// table (backend.ReplicaTable). Package backends opens it for a --store
// connection string; the CLI (store migrate/status) and the auditor open
// it directly. Everything else holds it as a backend.KV and asserts the
// capability it needs.
//
// KV keeps the execution store's keys in one table, latch_kv (k bytea primary
// key, v bytea): bytea orders bytewise, so scans see Badger's key order. A
// group is one statement in one implicit transaction: the deletions, the
// upserts and the commit marker (latch_commit, which tells after a lost
// answer whether the group landed) as data-modifying parts of a WITH, and
// the fence in its main SELECT, so it runs whatever the parts find. Concurrent Gets are coalesced into one
// query (get.go). Schema versions are embedded migrations (schema/,
// table latch_schema_version). The lease (latch_lease: holder, epoch,
// expiry) makes one replica active; its commits call latch_fence(epoch) in
// the same statement, so after a takeover they fail with backend.ErrFenced.
//
// Beside the records, the tables every replica shares (secrets.go,
// replicas.go): latch_keys (the fingerprint and journal keys, sealed by
// the caller with the vault; only the journal's verifier in clear),
// latch_vault (the vault document, one row, versioned and fenced) and
// latch_replicas (replicas seen, informational). The store never sees a
// key in clear. Snapshot gives a read-only KV over one REPEATABLE READ
// transaction, for auditing a live database with a SELECT-only role.
package pgkv
