-- 0017: see the PostgreSQL migration of the same number (times are unix
-- nanoseconds, JSON is text).
ALTER TABLE whguard_events ADD COLUMN source TEXT NOT NULL DEFAULT 'webhook';
CREATE TABLE whguard_catchup (
    provider     TEXT PRIMARY KEY,
    lease_owner  TEXT,
    lease_until  INTEGER,
    next_pass    INTEGER,
    last_success INTEGER,
    last_pass    TEXT,
    last_error   TEXT
);
CREATE TABLE whguard_catchup_requests (
    provider    TEXT    NOT NULL,
    guid        TEXT    NOT NULL,
    delivery_id INTEGER NOT NULL,
    requests    INTEGER NOT NULL,
    last_at     INTEGER NOT NULL,
    gave_up     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (provider, guid)
);
