-- 0011: the stored answer of a sync-mode event (WHGUARD_<NAME>_MODE=sync):
-- the backend's 2xx status, Content-Type and body (at most 64 KiB) from a
-- delivery of the event, given to the sender and to every later duplicate
-- of it. NULL reply_status: no answer stored (an async provider, or no 2xx
-- yet). Kept on the event row, not with the payload, because duplicates
-- must get it for as long as the key is kept, after payload retention.
ALTER TABLE whguard_events ADD COLUMN reply_status integer;
ALTER TABLE whguard_events ADD COLUMN reply_content_type text;
ALTER TABLE whguard_events ADD COLUMN reply_body bytea;
ALTER TABLE whguard_events ADD COLUMN reply_at timestamptz;
