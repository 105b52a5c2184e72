-- 0003: every state change of an event rewrites its row (status is
-- indexed, so no update is HOT) and inserts into each index that covers the
-- new version. The (status, id) index covered every row, done ones
-- included; the inspector only needs it for the small sets (pending,
-- processing, retry, dead). Listing done events walks the primary key.
DROP INDEX IF EXISTS whguard_events_status_id;
CREATE INDEX whguard_events_undone ON whguard_events (status, id) WHERE status <> 'done';
