-- 0010: see the PostgreSQL migration of the same number (status
-- 'ignored').
--
-- SQLite cannot change a CHECK constraint in place, so whguard_events is
-- rebuilt by SQLite's documented procedure for other table changes
-- (https://www.sqlite.org/lang_altertable.html#otheralter): create the new
-- shape under another name, copy the rows, drop the old table, rename the
-- new one, recreate its indexes. The runner applies migrations with
-- foreign_keys OFF (else the DROP would cascade into payloads, attempts,
-- conflicts and replays) and runs foreign_key_check before committing.
-- The tables referring to whguard_events name it, so they refer to the
-- rebuilt table once it takes the name.

CREATE TABLE whguard_events_new (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    provider         TEXT    NOT NULL,
    event_id         TEXT    NOT NULL,
    event_type       TEXT    NOT NULL DEFAULT '',
    content_hash     TEXT    NOT NULL,
    status           TEXT    NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'processing', 'done', 'retry', 'dead', 'ignored')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    budget_base      INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    lease_token      BLOB,
    lease_expires_at INTEGER,
    last_error       TEXT    NOT NULL DEFAULT '',
    received_at      INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    hold_reason      TEXT    NOT NULL DEFAULT '',
    body_guard       TEXT,
    -- The only source of truth for deduplication (docs/journal.md).
    CONSTRAINT whguard_events_key UNIQUE (provider, event_id)
);

INSERT INTO whguard_events_new (id, provider, event_id, event_type, content_hash, status, attempts, budget_base,
                                next_attempt_at, lease_token, lease_expires_at, last_error, received_at, updated_at,
                                hold_reason, body_guard)
SELECT id, provider, event_id, event_type, content_hash, status, attempts, budget_base,
       next_attempt_at, lease_token, lease_expires_at, last_error, received_at, updated_at,
       hold_reason, body_guard
FROM whguard_events;

-- AUTOINCREMENT never reuses an id, even one retention deleted: the new
-- table continues from the old table's high-water mark, not from the
-- largest id still present. (Renaming the table renames its sequence row.)
DELETE FROM sqlite_sequence WHERE name = 'whguard_events_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'whguard_events_new', seq FROM sqlite_sequence WHERE name = 'whguard_events';

DROP TABLE whguard_events;
ALTER TABLE whguard_events_new RENAME TO whguard_events;

-- Every index of the table as migrations 0001-0008 left it (0002's
-- done-age index becomes the finished-age one, as on PostgreSQL).
CREATE INDEX whguard_events_ready ON whguard_events (next_attempt_at, id) WHERE status IN ('pending', 'retry');
CREATE INDEX whguard_events_undone ON whguard_events (status, id) WHERE status <> 'done';
CREATE INDEX whguard_events_finished_age ON whguard_events (updated_at, id) WHERE status IN ('done', 'ignored');
CREATE UNIQUE INDEX whguard_events_body_guard ON whguard_events (provider, body_guard) WHERE body_guard IS NOT NULL;
