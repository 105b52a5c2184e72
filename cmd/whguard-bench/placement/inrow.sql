-- The same batch with the payload in the event's row.
\set n 16
INSERT INTO inrow_events (provider, event_id, event_type, content_hash, status, attempts, lease_token, lease_expires_at,
                          headers, body, path, raw_query, scheme)
SELECT 'stripe', 'evt_' || k, 'invoice.paid', 'sha256:' || md5(k::text) || md5(k::text), 'processing', 1, gen_random_uuid(), now() + interval '30 s',
       '{"Content-Type":["application/json"],"Webhook-Id":["msg_2Lz"],"Webhook-Timestamp":["1700000000"],"Webhook-Signature":["v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="]}',
       convert_to(repeat('{"a":"0123456789abcdef"},', 40), 'UTF8'), '/webhooks/stripe', '', 'stripe'
FROM (SELECT nextval('placement_keys') AS k FROM generate_series(1, :n)) k;
UPDATE inrow_events SET status = 'done', first_started_at = now(), first_duration_ms = 2, first_status_code = 200,
       first_excerpt = 'ok', lease_token = NULL, lease_expires_at = NULL, updated_at = now()
WHERE status = 'processing';
