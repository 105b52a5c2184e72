-- 0004: payloads and attempts are written in the same statement that
-- creates or updates their event (Append, Complete), so their foreign keys
-- only added a trigger call and a key-share lock on the event row per
-- insert, on both hot paths. Retention deletes them explicitly. Conflicts
-- and replays (rare) keep theirs.
ALTER TABLE whguard_payloads DROP CONSTRAINT IF EXISTS whguard_payloads_event_row_id_fkey;
ALTER TABLE whguard_attempts DROP CONSTRAINT IF EXISTS whguard_attempts_event_row_id_fkey;
