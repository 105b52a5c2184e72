-- 0011: see the PostgreSQL migration of the same number.
ALTER TABLE whguard_events ADD COLUMN reply_status INTEGER;
ALTER TABLE whguard_events ADD COLUMN reply_content_type TEXT;
ALTER TABLE whguard_events ADD COLUMN reply_body BLOB;
ALTER TABLE whguard_events ADD COLUMN reply_at INTEGER;
