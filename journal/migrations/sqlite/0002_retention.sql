-- 0002: retention (see the PostgreSQL migration of the same number).
CREATE INDEX whguard_events_done_age ON whguard_events (updated_at, id) WHERE status = 'done';
