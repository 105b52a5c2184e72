-- 0015: cheaper ANALYZE of the payload and attempt tables. whguard analyzes
-- its hot tables as a new journal grows (postgres_plans.go) and vacuums
-- them with ANALYZE after each retention pass. Nothing filters, joins or
-- sorts on a payload's headers or body or on an attempt's texts, yet their
-- statistics cost most of the time: ANALYZE read and summarized a 30 000-
-- row sample of 1 KB bodies (330 ms for 20 000 payloads, measured). The
-- planner needs only these tables' sizes and the distribution of their
-- row keys: no statistics for the large columns, and a small target (a
-- 3 000-row sample) for the rest. The events table keeps the default:
-- its statuses and times choose the hot statements' plans.
ALTER TABLE whguard_payloads
    ALTER COLUMN headers SET STATISTICS 0,
    ALTER COLUMN body SET STATISTICS 0,
    ALTER COLUMN event_row_id SET STATISTICS 10,
    ALTER COLUMN path SET STATISTICS 10,
    ALTER COLUMN raw_query SET STATISTICS 10;
ALTER TABLE whguard_attempts
    ALTER COLUMN error SET STATISTICS 0,
    ALTER COLUMN response_excerpt SET STATISTICS 0;
