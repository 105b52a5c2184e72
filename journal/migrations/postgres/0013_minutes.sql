-- 0013: per-minute delivery figures for the overview (GET /api/overview).
-- Each replica keeps its own minute figures in memory and writes them here
-- every few seconds, replacing its previous row for that minute; the
-- overview adds the replicas' rows together. latency holds the counts of
-- a fixed-bucket histogram of ack-to-delivery times (journal.LatencyBounds),
-- comma separated. Rows older than a day are removed by the cleanup.
CREATE TABLE whguard_minutes (
    minute    timestamptz NOT NULL,
    replica   text        NOT NULL,
    provider  text        NOT NULL,
    delivered bigint      NOT NULL DEFAULT 0,
    failed    bigint      NOT NULL DEFAULT 0,
    dead      bigint      NOT NULL DEFAULT 0,
    latency   text        NOT NULL DEFAULT '',
    PRIMARY KEY (minute, replica, provider)
);
