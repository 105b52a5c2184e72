-- 0022: ANALYZE of the hot tables as cheap as 0015 meant it to be. The
-- payload columns added since (`day` in 0019, `scheme` before it) kept the
-- default statistics target, and the largest target of a table's columns
-- sets its sample: every ANALYZE of a payload partition read a 30 000-row
-- sample of 1 KB bodies again (233 ms for 26 000 payloads; 45 ms with
-- these two at 10, measured). A test now holds every payload column to a
-- small target, so a new column cannot undo this unnoticed.
--
-- The events table keeps the default target for the columns that queries
-- filter, join or sort on (their statuses and times choose the hot
-- statements' plans); the columns that are only ever read back get none,
-- which spares each ANALYZE their sorting and summarizing.
ALTER TABLE whguard_payloads
    ALTER COLUMN scheme SET STATISTICS 10,
    ALTER COLUMN day SET STATISTICS 10;
ALTER TABLE whguard_events
    ALTER COLUMN content_hash SET STATISTICS 0,
    ALTER COLUMN budget_base SET STATISTICS 0,
    ALTER COLUMN last_error SET STATISTICS 0,
    ALTER COLUMN reply_content_type SET STATISTICS 0,
    ALTER COLUMN reply_body SET STATISTICS 0,
    ALTER COLUMN reply_at SET STATISTICS 0,
    ALTER COLUMN order_block SET STATISTICS 0,
    ALTER COLUMN first_started_at SET STATISTICS 0,
    ALTER COLUMN first_duration_ms SET STATISTICS 0,
    ALTER COLUMN first_excerpt SET STATISTICS 0,
    ALTER COLUMN first_answer SET STATISTICS 0,
    ALTER COLUMN first_sent_headers SET STATISTICS 0,
    ALTER COLUMN trace_context SET STATISTICS 0;
