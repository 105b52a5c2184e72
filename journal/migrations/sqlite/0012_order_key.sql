-- 0012: see the PostgreSQL migration of the same number.
ALTER TABLE whguard_events ADD COLUMN order_key TEXT;
ALTER TABLE whguard_events ADD COLUMN order_block INTEGER NOT NULL DEFAULT 0;
ALTER TABLE whguard_events ADD COLUMN order_holds INTEGER NOT NULL DEFAULT 0;
CREATE INDEX whguard_events_order ON whguard_events (provider, order_key, id) WHERE order_holds = 1;
ALTER TABLE whguard_replays ADD COLUMN action TEXT NOT NULL DEFAULT 'replay';
