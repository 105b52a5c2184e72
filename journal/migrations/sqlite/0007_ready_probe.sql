-- 0007: see the PostgreSQL migration of the same number.
CREATE TABLE whguard_ready_probe (
    id INTEGER PRIMARY KEY,
    at INTEGER NOT NULL
);
