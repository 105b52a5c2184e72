-- 0008: for providers whose event id is not covered by the signature
-- (GitHub's delivery header, Shopify's, GitLab's, PagerDuty's), a captured
-- body could be resent under a fresh id as a new event. Such events carry
-- their content hash in body_guard, unique per provider: the same signed
-- body under another id is caught by the database, like any duplicate.
-- NULL for every other event, so the index holds only guarded ones.
ALTER TABLE whguard_events ADD COLUMN body_guard text;
CREATE UNIQUE INDEX whguard_events_body_guard ON whguard_events (provider, body_guard) WHERE body_guard IS NOT NULL;
