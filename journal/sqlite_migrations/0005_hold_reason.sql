-- 0005: see the PostgreSQL migration 0006.
ALTER TABLE whguard_events ADD COLUMN hold_reason TEXT NOT NULL DEFAULT '';
