-- 0001: the journal. The small, hot delivery-state row lives in
-- whguard_events; the payload (headers, raw body) lives apart in
-- whguard_payloads so state changes never copy ~1 KB of payload into WAL
-- (docs/journal.md, "Payloads apart from the hot row").

CREATE TABLE whguard_events (
    id               bigserial   PRIMARY KEY,
    provider         text        NOT NULL,
    event_id         text        NOT NULL,
    event_type       text        NOT NULL DEFAULT '',
    content_hash     text        NOT NULL,
    status           text        NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'processing', 'done', 'retry', 'dead')),
    attempts         integer     NOT NULL DEFAULT 0,
    -- attempts spent before the current budget began (a replay moves it up
    -- to attempts, giving a fresh budget while X-Whguard-Attempt keeps counting).
    budget_base      integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_token      uuid,
    lease_expires_at timestamptz,
    last_error       text        NOT NULL DEFAULT '',
    received_at      timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    -- The only source of truth for deduplication (docs/journal.md).
    CONSTRAINT whguard_events_key UNIQUE (provider, event_id)
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

-- Ready rows, in the order the forwarder leases them.
CREATE INDEX whguard_events_ready ON whguard_events (next_attempt_at, id)
    WHERE status IN ('pending', 'retry');
-- Expired leases, for the reaper.
CREATE INDEX whguard_events_leased ON whguard_events (lease_expires_at)
    WHERE status = 'processing';
-- Inspector listing: newest first, optionally by status.
CREATE INDEX whguard_events_status_id ON whguard_events (status, id);

CREATE TABLE whguard_payloads (
    event_row_id bigint PRIMARY KEY REFERENCES whguard_events (id) ON DELETE CASCADE,
    headers      jsonb  NOT NULL,
    body         bytea  NOT NULL,
    path         text   NOT NULL,
    raw_query    text   NOT NULL DEFAULT ''
);

-- Same key, different content: the first payload is kept in whguard_payloads,
-- every conflicting one is recorded here for inspection.
CREATE TABLE whguard_conflicts (
    id           bigserial   PRIMARY KEY,
    event_row_id bigint      NOT NULL REFERENCES whguard_events (id) ON DELETE CASCADE,
    content_hash text        NOT NULL,
    headers      jsonb       NOT NULL,
    body         bytea       NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX whguard_conflicts_event ON whguard_conflicts (event_row_id);

CREATE TABLE whguard_attempts (
    id               bigserial   PRIMARY KEY,
    event_row_id     bigint      NOT NULL REFERENCES whguard_events (id) ON DELETE CASCADE,
    number           integer     NOT NULL,
    started_at       timestamptz NOT NULL,
    duration_ms      integer     NOT NULL,
    status_code      integer     NOT NULL DEFAULT 0,
    error            text        NOT NULL DEFAULT '',
    response_excerpt text        NOT NULL DEFAULT ''
);
CREATE INDEX whguard_attempts_event ON whguard_attempts (event_row_id, number);

CREATE TABLE whguard_replays (
    id           bigserial   PRIMARY KEY,
    event_row_id bigint      NOT NULL REFERENCES whguard_events (id) ON DELETE CASCADE,
    from_status  text        NOT NULL,
    reason       text        NOT NULL,
    replayed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX whguard_replays_event ON whguard_replays (event_row_id);
