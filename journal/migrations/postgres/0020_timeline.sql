-- 0020: what happened to an event, in one place (the timeline of
-- GET /api/events/{id}; docs/journal.md, "Where each fact lives"). Each
-- fact is written where it costs least: nothing more is written for a
-- first-try delivery but a column of the row the append inserts anyway.
--
-- first_answer: the HTTP status the request that journaled the event was
-- answered with (NULL: received before this was recorded, or brought in
-- by catch-up). Written by the append, or after the answer for a sync-mode
-- sender given the backend's reply.
-- first_sent_headers and sent_headers: how the headers an attempt sent
-- differed from those whguard builds from the journaled headers (a
-- signature made afresh for the backend, one removed); NULL when they did
-- not, which is most deliveries. Nullable columns without a default:
-- added without rewriting either table.
ALTER TABLE whguard_events
    ADD COLUMN first_answer       smallint,
    ADD COLUMN first_sent_headers jsonb;
ALTER TABLE whguard_attempts ADD COLUMN sent_headers jsonb;
ALTER TABLE whguard_attempts ALTER COLUMN sent_headers SET STATISTICS 0;

-- Duplicates of an event: a row written at its first duplicate and
-- updated at each later one: how many came, and the latest ten, each with
-- its time and the status it was answered with (oldest first).
CREATE TABLE whguard_receipts (
    event_row_id bigint        PRIMARY KEY REFERENCES whguard_events (id) ON DELETE CASCADE,
    duplicates   integer       NOT NULL,
    last_at      timestamptz[] NOT NULL,
    last_answer  smallint[]    NOT NULL
);

-- Holds: a row when a delivery starts waiting without spending an attempt
-- for a reason (breaker, paused, rate, in_flight, no_backend, order, …),
-- written when it is held for another reason than its last hold's, or
-- after an attempt (attempts is the event's count when it was held);
-- holding it again for the same reason continues that hold. A hold ends
-- with the next attempt or the next hold, which the reader finds.
CREATE TABLE whguard_holds (
    id           bigserial   PRIMARY KEY,
    event_row_id bigint      NOT NULL REFERENCES whguard_events (id) ON DELETE CASCADE,
    reason       text        NOT NULL,
    from_at      timestamptz NOT NULL,
    attempts     integer     NOT NULL
);
CREATE INDEX whguard_holds_event ON whguard_holds (event_row_id, id);
