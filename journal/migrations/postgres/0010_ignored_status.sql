-- 0010: status 'ignored', for events whose type matched none of their
-- provider's event-type filter when they were received: journaled and
-- acknowledged, never leased, delivered only when replayed.
--
-- The new CHECK is looser than the one it replaces, so every existing row
-- already satisfies it: NOT VALID skips re-reading the whole table under
-- the ACCESS EXCLUSIVE lock this statement holds. New and updated rows are
-- checked as usual.
ALTER TABLE whguard_events DROP CONSTRAINT whguard_events_status_check;
ALTER TABLE whguard_events ADD CONSTRAINT whguard_events_status_check
    CHECK (status IN ('pending', 'processing', 'done', 'retry', 'dead', 'ignored')) NOT VALID;

-- Retention treats ignored events like done ones (nothing is owed on
-- them): the cleaner's age index covers both.
CREATE INDEX whguard_events_finished_age ON whguard_events (updated_at, id) WHERE status IN ('done', 'ignored');
DROP INDEX IF EXISTS whguard_events_done_age;
