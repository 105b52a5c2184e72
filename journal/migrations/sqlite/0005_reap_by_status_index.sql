-- 0005: see the PostgreSQL migration of the same number.
DROP INDEX IF EXISTS whguard_events_leased;
