-- Schema 2: the active replica's lease and the fence every commit passes.
--
-- One row: the holder (a replica's name and instance), the epoch (raised by
-- every acquisition) and the expiry. A replica is active while it holds the
-- lease; every commit it makes calls latch_fence(its epoch) in the same
-- transaction, which share-locks the row (so a takeover cannot commit in
-- between) and fails with SQLSTATE LF001 once another replica has taken
-- the lease: a stale active's writes never land.
CREATE TABLE latch_lease (
    id         int PRIMARY KEY CHECK (id = 1),
    holder     text NOT NULL,
    epoch      bigint NOT NULL,
    acquired_at timestamptz NOT NULL,
    renewed_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
INSERT INTO latch_lease VALUES (1, '', 0, '-infinity', '-infinity', '-infinity');

CREATE FUNCTION latch_fence(want bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM latch_lease WHERE id = 1 AND epoch = want FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'LF001',
            MESSAGE = format('latch: fenced: epoch %s no longer holds the lease', want);
    END IF;
END
$$;
