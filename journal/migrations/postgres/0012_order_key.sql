-- 0012: per-key ordering (WHGUARD_<NAME>_ORDER_KEY). order_key is the
-- value found at the provider's order key (NULL: the event is unordered).
-- order_holds says the row still holds its key: true from insert until it
-- is done, or dead when order_block is false (ORDER_ON_DEAD=skip), or
-- skipped; a replay makes it hold again. A row with a key is leased only
-- while no earlier row of its provider and key holds it (and none is being
-- delivered). The partial index holds only holding rows, so unordered
-- rows never enter it and their hot path is unchanged. A row that waits
-- for its turn is parked (next_attempt_at far ahead) until the row
-- before it releases the key (docs/delivery.md, "Per-key order").
ALTER TABLE whguard_events ADD COLUMN order_key text;
ALTER TABLE whguard_events ADD COLUMN order_block boolean NOT NULL DEFAULT false;
ALTER TABLE whguard_events ADD COLUMN order_holds boolean NOT NULL DEFAULT false;
CREATE INDEX whguard_events_order ON whguard_events (provider, order_key, id) WHERE order_holds;
-- A skip (the key released by hand) is audited beside replays.
ALTER TABLE whguard_replays ADD COLUMN action text NOT NULL DEFAULT 'replay';
