-- 0006: why a delivery is held without spending an attempt (for example
-- no backend is configured for its provider); '' when it is not held.
-- Shown by the API, the inspector and the CLI; cleared by its next outcome.
ALTER TABLE whguard_events ADD COLUMN hold_reason text NOT NULL DEFAULT '';
