-- 0021: see the PostgreSQL migration of the same number.
ALTER TABLE whguard_events ADD COLUMN trace_context TEXT;
