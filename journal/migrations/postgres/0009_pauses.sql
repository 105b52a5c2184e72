-- 0009: paused backends and providers (whguard backends pause): while a
-- row is here no replica starts a delivery to that backend (an origin,
-- scheme://host:port) or of that provider; deliveries wait, held with
-- reason 'paused', spending no attempt. Kept here so that a pause
-- survives restarts and reaches every replica.
CREATE TABLE whguard_pauses (
    kind   text        NOT NULL CHECK (kind IN ('backend', 'provider')),
    name   text        NOT NULL,
    reason text        NOT NULL DEFAULT '',
    since  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, name)
);
