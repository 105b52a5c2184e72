-- 0018: the attempt that delivers an event at its first try is recorded
-- on the event's row (docs/journal.md, "Where each fact lives"); the
-- attempts table keeps retries, failures and replays. A delivered event
-- then costs one insert and one update, not an insert more. Nullable
-- columns without a default: PostgreSQL adds them without rewriting the
-- table, and rows written before keep their attempt in whguard_attempts.
ALTER TABLE whguard_events
    ADD COLUMN first_started_at  timestamptz,
    ADD COLUMN first_duration_ms integer,
    ADD COLUMN first_status_code integer,
    ADD COLUMN first_excerpt     text;
