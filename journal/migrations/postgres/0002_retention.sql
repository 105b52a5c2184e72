-- 0002: retention. The cleaner deletes done events (and their payloads)
-- by age of their last change; this index keeps that a range scan.
CREATE INDEX whguard_events_done_age ON whguard_events (updated_at, id) WHERE status = 'done';
