-- 0020: see the PostgreSQL migration of the same number (times are unix
-- nanoseconds; the latest duplicates' times and answers are JSON arrays).
ALTER TABLE whguard_events ADD COLUMN first_answer INTEGER;
ALTER TABLE whguard_events ADD COLUMN first_sent_headers TEXT;
ALTER TABLE whguard_attempts ADD COLUMN sent_headers TEXT;
CREATE TABLE whguard_receipts (
    event_row_id INTEGER PRIMARY KEY REFERENCES whguard_events (id) ON DELETE CASCADE,
    duplicates   INTEGER NOT NULL,
    last_at      TEXT    NOT NULL,
    last_answer  TEXT    NOT NULL
);
CREATE TABLE whguard_holds (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    event_row_id INTEGER NOT NULL REFERENCES whguard_events (id) ON DELETE CASCADE,
    reason       TEXT    NOT NULL,
    from_at      INTEGER NOT NULL,
    attempts     INTEGER NOT NULL
);
CREATE INDEX whguard_holds_event ON whguard_holds (event_row_id, id);
