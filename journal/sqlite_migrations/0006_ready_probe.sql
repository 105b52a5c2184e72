-- 0006: see the PostgreSQL migration 0007.
CREATE TABLE whguard_ready_probe (
    id INTEGER PRIMARY KEY,
    at INTEGER NOT NULL
);
