-- Schema 1: the ordered key-value space the store's records, indexes and
-- journal live in, and the commit marker that resolves a commit whose
-- outcome the connection lost.
--
-- bytea compares bytewise (memcmp, then length) whatever the database's
-- collation, so ORDER BY k is the key order Badger and the in-memory
-- backend use.
CREATE TABLE latch_kv (
    k bytea PRIMARY KEY,
    v bytea NOT NULL
);

-- One row. Every commit writes a fresh token here in its own transaction:
-- after a lost COMMIT answer the backend reads it back to learn whether the
-- commit happened.
CREATE TABLE latch_commit (
    id    int PRIMARY KEY CHECK (id = 1),
    token bytea NOT NULL,
    at    timestamptz NOT NULL DEFAULT now()
);
INSERT INTO latch_commit (id, token) VALUES (1, '\x00');
