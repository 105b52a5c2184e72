-- 0007: readiness commits a write here (one row), so /readyz follows the
-- journal's ability to commit, not only to answer reads.
CREATE TABLE whguard_ready_probe (
    id integer     PRIMARY KEY,
    at timestamptz NOT NULL
);
