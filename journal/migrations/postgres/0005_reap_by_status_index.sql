-- 0005: the reaper's index on lease_expires_at (for processing rows) cost
-- an index entry every time a row was leased or inserted already leased,
-- on both hot paths. Processing rows are few at any time (at most twice
-- the delivery concurrency of each replica, plus claims), so the reaper
-- finds them through whguard_events_undone (status, id) and checks each
-- one's lease_expires_at: measured 0.2 ms for 200 processing rows among
-- 50 000.
DROP INDEX IF EXISTS whguard_events_leased;
