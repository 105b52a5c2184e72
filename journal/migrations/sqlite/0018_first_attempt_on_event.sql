-- 0018: see the PostgreSQL migration of the same number (times are unix
-- nanoseconds).
ALTER TABLE whguard_events ADD COLUMN first_started_at INTEGER;
ALTER TABLE whguard_events ADD COLUMN first_duration_ms INTEGER;
ALTER TABLE whguard_events ADD COLUMN first_status_code INTEGER;
ALTER TABLE whguard_events ADD COLUMN first_excerpt TEXT;
