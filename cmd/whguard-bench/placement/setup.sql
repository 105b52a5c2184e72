-- Payload placement experiment (BENCHMARKS.md, "Where the payload lives"):
-- run in a database migrated by `whguard migrate`. "apart" is the journal
-- as it is (whguard_events + whguard_payloads); "inrow" is the same event
-- table with the payload's columns added to it.
DROP TABLE IF EXISTS inrow_events;
CREATE TABLE inrow_events (LIKE whguard_events INCLUDING ALL) WITH (fillfactor = 70);
ALTER TABLE inrow_events ADD COLUMN headers jsonb, ADD COLUMN body bytea, ADD COLUMN path text,
    ADD COLUMN raw_query text, ADD COLUMN scheme text;
CREATE SEQUENCE IF NOT EXISTS placement_keys;
