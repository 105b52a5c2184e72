-- 0016: hostile input, second pass.
-- Order keys are stored as digests ("sha256:" and 64 hex digits) whatever
-- the sender put in them, so that no value can fail a lock or an index.
-- Earlier versions stored short keys as they were (and long ones already
-- as this digest): the rows still in a key's line are re-keyed, so that
-- they stay in line with the events that arrive after the upgrade. Rows
-- that no longer hold their key are left as they are (only holding rows
-- are looked at by leases).
UPDATE whguard_events
SET order_key = 'sha256:' || encode(sha256(convert_to(order_key, 'UTF8')), 'hex')
WHERE order_holds AND order_key NOT LIKE 'sha256:%';
-- The scheme an event's content was verified with when it was journaled
-- ('none' when it was not verified); NULL for events journaled before this
-- was recorded. whguard signs a delivery for the backend only when it
-- equals the provider's scheme at the time of the attempt.
ALTER TABLE whguard_payloads ADD COLUMN scheme text;
