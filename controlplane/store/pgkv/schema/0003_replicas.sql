-- Schema 3: the replicas seen on this database, for `latch store status`.
--
-- Each `latch serve` replica upserts its row when it starts and on every
-- lease tick (acquisition attempts while standby, renewals while active).
-- Informational only: nothing decides on it (the lease does).
CREATE TABLE latch_replicas (
    name       text PRIMARY KEY,
    instance   text NOT NULL,
    holder     text NOT NULL DEFAULT '',
    addr       text NOT NULL DEFAULT '',
    role       text NOT NULL DEFAULT '',
    started_at timestamptz NOT NULL DEFAULT now(),
    last_seen  timestamptz NOT NULL DEFAULT now()
);
