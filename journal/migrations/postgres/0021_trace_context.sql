-- 0021: the trace context of an event's receipt (W3C traceparent, and its
-- tracestate after a newline), written by the event's insert when traces
-- are on, so every attempt and replay of the event, on any replica and
-- after restarts, joins the trace of its receipt (docs/journal.md, "Where
-- each fact lives"). NULL with traces off, and for the events written
-- before: their attempts start traces of their own. A nullable column
-- without a default: added without rewriting the table.
ALTER TABLE whguard_events ADD COLUMN trace_context text;
