-- 0006: see the PostgreSQL migration of the same number.
ALTER TABLE whguard_events ADD COLUMN hold_reason TEXT NOT NULL DEFAULT '';
