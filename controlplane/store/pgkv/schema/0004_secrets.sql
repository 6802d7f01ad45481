-- Schema 4: what every replica must share besides the records: the
-- control plane's keys and the vault, so a replica starts with its config
-- and the vault's unlock key and nothing else local.
--
-- latch_keys: one row per key ("fingerprint", the intent-fingerprint HMAC
-- key; "journal", the checkpoint signing key). sealed is the key sealed
-- (XChaCha20-Poly1305) under a key derived from the vault's data key, the
-- key's name as associated data: never a key in clear. public is what may be
-- read in clear: the journal's verifier key, so `latch audit verify` works
-- with a role that can only SELECT. Rows are inserted once (the first
-- replica to start, insert-if-absent) and never updated.
CREATE TABLE latch_keys (
    name       text PRIMARY KEY,
    sealed     bytea NOT NULL,
    public     text NOT NULL DEFAULT '',
    created_by text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);

-- latch_vault: one row, the vault document (its entries sealed under the
-- vault's data key, which is itself sealed under the unlock key: the same
-- bytes as a vault file). generation rises with every write, so a replica
-- never overwrites a version it has not read.
CREATE TABLE latch_vault (
    id         int PRIMARY KEY CHECK (id = 1),
    doc        bytea NOT NULL,
    generation bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
