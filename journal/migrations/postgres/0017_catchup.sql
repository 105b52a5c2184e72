-- 0017: catch-up (docs/catchup.md).
-- How an event came in: 'webhook' (the sender delivered it) or 'catchup'
-- (catch-up listed it through the provider's API, or asked the provider
-- to redeliver it). A constant default: PostgreSQL adds the column
-- without rewriting the table.
ALTER TABLE whguard_events ADD COLUMN source text NOT NULL DEFAULT 'webhook';
-- One row per provider with catch-up: the lease that lets one replica
-- run a pass at a time, when the next pass is due, and what the last
-- passes did (JSON as the API shows it).
CREATE TABLE whguard_catchup (
    provider     text PRIMARY KEY,
    lease_owner  text,
    lease_until  timestamptz,
    next_pass    timestamptz,
    last_success timestamptz,
    last_pass    jsonb,
    last_error   jsonb
);
-- The GitHub deliveries catch-up asked to be redelivered: how often, the
-- last time, and whether it gave up on them. A row goes when its GUID
-- arrives or leaves the provider's window.
CREATE TABLE whguard_catchup_requests (
    provider    text        NOT NULL,
    guid        text        NOT NULL,
    delivery_id bigint      NOT NULL,
    requests    integer     NOT NULL,
    last_at     timestamptz NOT NULL,
    gave_up     boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (provider, guid)
);
