-- 0013: per-minute delivery figures for the overview, as in PostgreSQL's
-- (minute is unix nanoseconds of the minute's start).
CREATE TABLE whguard_minutes (
    minute    INTEGER NOT NULL,
    replica   TEXT    NOT NULL,
    provider  TEXT    NOT NULL,
    delivered INTEGER NOT NULL DEFAULT 0,
    failed    INTEGER NOT NULL DEFAULT 0,
    dead      INTEGER NOT NULL DEFAULT 0,
    latency   TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (minute, replica, provider)
);
