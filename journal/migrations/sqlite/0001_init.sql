-- 0001: the embedded journal, the same shape as PostgreSQL's. Times are
-- unix nanoseconds (INTEGER): sortable, exact, no time-zone parsing.

CREATE TABLE whguard_events (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    provider         TEXT    NOT NULL,
    event_id         TEXT    NOT NULL,
    event_type       TEXT    NOT NULL DEFAULT '',
    content_hash     TEXT    NOT NULL,
    status           TEXT    NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'processing', 'done', 'retry', 'dead')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    budget_base      INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    lease_token      BLOB,
    lease_expires_at INTEGER,
    last_error       TEXT    NOT NULL DEFAULT '',
    received_at      INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    -- The only source of truth for deduplication (docs/journal.md).
    CONSTRAINT whguard_events_key UNIQUE (provider, event_id)
);
CREATE INDEX whguard_events_ready ON whguard_events (next_attempt_at, id) WHERE status IN ('pending', 'retry');
CREATE INDEX whguard_events_leased ON whguard_events (lease_expires_at) WHERE status = 'processing';
CREATE INDEX whguard_events_status_id ON whguard_events (status, id);

CREATE TABLE whguard_payloads (
    event_row_id INTEGER PRIMARY KEY REFERENCES whguard_events (id) ON DELETE CASCADE,
    headers      TEXT    NOT NULL,
    body         BLOB    NOT NULL,
    path         TEXT    NOT NULL,
    raw_query    TEXT    NOT NULL DEFAULT ''
);

CREATE TABLE whguard_conflicts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    event_row_id INTEGER NOT NULL REFERENCES whguard_events (id) ON DELETE CASCADE,
    content_hash TEXT    NOT NULL,
    headers      TEXT    NOT NULL,
    body         BLOB    NOT NULL,
    received_at  INTEGER NOT NULL
);
CREATE INDEX whguard_conflicts_event ON whguard_conflicts (event_row_id);

CREATE TABLE whguard_attempts (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    event_row_id     INTEGER NOT NULL REFERENCES whguard_events (id) ON DELETE CASCADE,
    number           INTEGER NOT NULL,
    started_at       INTEGER NOT NULL,
    duration_ms      INTEGER NOT NULL,
    status_code      INTEGER NOT NULL DEFAULT 0,
    error            TEXT    NOT NULL DEFAULT '',
    response_excerpt TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX whguard_attempts_event ON whguard_attempts (event_row_id, number);

CREATE TABLE whguard_replays (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    event_row_id INTEGER NOT NULL REFERENCES whguard_events (id) ON DELETE CASCADE,
    from_status  TEXT    NOT NULL,
    reason       TEXT    NOT NULL,
    replayed_at  INTEGER NOT NULL
);
CREATE INDEX whguard_replays_event ON whguard_replays (event_row_id);
