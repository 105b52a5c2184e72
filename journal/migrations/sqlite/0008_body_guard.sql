-- 0008: see the PostgreSQL migration of the same number.
ALTER TABLE whguard_events ADD COLUMN body_guard TEXT;
CREATE UNIQUE INDEX whguard_events_body_guard ON whguard_events (provider, body_guard) WHERE body_guard IS NOT NULL;
