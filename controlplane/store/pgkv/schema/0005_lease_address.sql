-- Schema 5: the address the lease holder serves its API at.
--
-- Set by every acquisition (a replica's advertised host:port or
-- unix:///path, '' when it advertises none). Standbys read it and name it
-- in their Unavailable answers, so fronts and the CLI go straight to the
-- active replica.
ALTER TABLE latch_lease ADD COLUMN address text NOT NULL DEFAULT '';
