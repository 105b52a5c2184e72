-- 0016: see the PostgreSQL migration of the same number
-- (whguard_sha256_hex is a function the embedded store registers with
-- the driver).
UPDATE whguard_events
SET order_key = 'sha256:' || whguard_sha256_hex(order_key)
WHERE order_holds = 1 AND order_key NOT LIKE 'sha256:%';
ALTER TABLE whguard_payloads ADD COLUMN scheme TEXT;
