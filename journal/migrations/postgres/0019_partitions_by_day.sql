-- 0019: payloads and attempts are partitioned by the UTC day their event
-- was received, so retention drops a whole day's partition instead of
-- deleting its rows one by one (docs/journal.md, "Partitions and
-- retention"). Each table has one partition per day, created ahead by
-- whguard (journal/postgres_partitions.go), and one "held" partition for
-- the rows that outlive their day: those of dead, undelivered and recently
-- replayed events, moved there before their day is dropped, and every row
-- written before this migration. Held rows carry the day '-infinity'.
-- whguard_events, which holds the unique (provider, event_id) key, stays
-- one table: PostgreSQL would require the partition key in that key.
--
-- In place: the old tables become the held partitions. Adding the day
-- column with a constant default rewrites nothing; attaching them scans
-- them once, and the new primary keys (which must name the day) are built
-- once, under this migration's lock (docs/journal.md gives the time per
-- million rows).

-- The partitions that exist now, per parent: the days from first_day to
-- last_day, both included (NULL: none yet). Written only together with
-- creating or dropping a partition, under the parent's lock; a row's day
-- outside this range is written as held, so no write ever lacks a
-- partition.
CREATE TABLE whguard_partition_days (
    parent    text PRIMARY KEY,
    first_day date,
    last_day  date
);
INSERT INTO whguard_partition_days (parent) VALUES ('whguard_payloads'), ('whguard_attempts');

ALTER TABLE whguard_payloads RENAME TO whguard_payloads_held;
ALTER TABLE whguard_payloads_held DROP CONSTRAINT whguard_payloads_pkey;
ALTER TABLE whguard_payloads_held ADD COLUMN day date NOT NULL DEFAULT '-infinity';
CREATE TABLE whguard_payloads (
    event_row_id bigint NOT NULL,
    headers      jsonb  NOT NULL,
    body         bytea  NOT NULL,
    path         text   NOT NULL,
    raw_query    text   NOT NULL DEFAULT '',
    scheme       text,
    day          date   NOT NULL DEFAULT '-infinity',
    CONSTRAINT whguard_payloads_pkey PRIMARY KEY (event_row_id, day)
) PARTITION BY RANGE (day);
ALTER TABLE whguard_payloads
    ALTER COLUMN event_row_id SET STATISTICS 10,
    ALTER COLUMN headers SET STATISTICS 0,
    ALTER COLUMN body SET STATISTICS 0,
    ALTER COLUMN path SET STATISTICS 10,
    ALTER COLUMN raw_query SET STATISTICS 10;
ALTER TABLE whguard_payloads ATTACH PARTITION whguard_payloads_held FOR VALUES FROM (MINVALUE) TO ('2000-01-01');

ALTER TABLE whguard_attempts RENAME TO whguard_attempts_held;
ALTER TABLE whguard_attempts_held DROP CONSTRAINT whguard_attempts_pkey;
ALTER INDEX whguard_attempts_event RENAME TO whguard_attempts_held_event;
ALTER TABLE whguard_attempts_held ADD COLUMN day date NOT NULL DEFAULT '-infinity';
CREATE TABLE whguard_attempts (
    id               bigint      NOT NULL DEFAULT nextval('whguard_attempts_id_seq'),
    event_row_id     bigint      NOT NULL,
    number           integer     NOT NULL,
    started_at       timestamptz NOT NULL,
    duration_ms      integer     NOT NULL,
    status_code      integer     NOT NULL DEFAULT 0,
    error            text        NOT NULL DEFAULT '',
    response_excerpt text        NOT NULL DEFAULT '',
    day              date        NOT NULL DEFAULT '-infinity',
    CONSTRAINT whguard_attempts_pkey PRIMARY KEY (id, day)
) PARTITION BY RANGE (day);
ALTER TABLE whguard_attempts
    ALTER COLUMN error SET STATISTICS 0,
    ALTER COLUMN response_excerpt SET STATISTICS 0;
CREATE INDEX whguard_attempts_event ON whguard_attempts (event_row_id, number);
ALTER TABLE whguard_attempts ATTACH PARTITION whguard_attempts_held FOR VALUES FROM (MINVALUE) TO ('2000-01-01');
ALTER SEQUENCE whguard_attempts_id_seq OWNED BY whguard_attempts.id;
