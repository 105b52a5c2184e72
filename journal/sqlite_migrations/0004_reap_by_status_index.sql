-- 0004: see the PostgreSQL migration 0005.
DROP INDEX IF EXISTS whguard_events_leased;
