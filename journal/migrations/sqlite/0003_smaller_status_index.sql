-- 0003: see the PostgreSQL migration of the same number.
DROP INDEX IF EXISTS whguard_events_status_id;
CREATE INDEX whguard_events_undone ON whguard_events (status, id) WHERE status <> 'done';
