-- 0014: searches by time (since/until) on a large journal. received_at
-- grows with the table's physical order, so a BRIN index (one small entry
-- per range of pages, nearly free to maintain on insert) lets such a
-- search read only the pages of its window instead of walking the table
-- newest first. Ranges written since the last vacuum are summarized by
-- (auto)vacuum; until then they are simply read.
CREATE INDEX whguard_events_received_brin ON whguard_events USING brin (received_at) WITH (autosummarize = on);
