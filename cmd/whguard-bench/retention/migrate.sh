#!/bin/sh
# The in-place upgrade to day partitions (migration 0019) on a journal of
# ROWS events (1 KB payloads, one in twenty with an attempt): how long its
# transaction holds the payload and attempt tables locked, which is how
# long ingest waits (docs/journal.md, "Partitions"). Usage, from the
# repository's root: migrate.sh SERVER_URL [ROWS]
set -eu
server=$1; rows=${2:-1000000}
db=whguard_upgrade_$$
psql -qAt "$server" -c "CREATE DATABASE $db"
url=$(echo "$server" | sed "s#/[^/?]*\([?].*\)\{0,1\}\$#/$db\1#")
trap 'psql -qAt "$server" -c "DROP DATABASE IF EXISTS $db" >/dev/null' EXIT
for f in journal/migrations/postgres/00*.sql; do
	case $(basename "$f") in 0019_*|002*) break ;; esac
	psql -qAt "$url" -v ON_ERROR_STOP=1 -f "$f" >/dev/null
done
psql -qAt "$url" -v ON_ERROR_STOP=1 <<SQL
WITH e AS (
	INSERT INTO whguard_events (provider, event_id, content_hash, status, attempts, received_at, updated_at)
	SELECT 'bench', 'up_' || g, md5(g::text), 'done', 1, now() - interval '7 days' + g * interval '1 ms', now()
	FROM generate_series(1, $rows) g RETURNING id, received_at
), p AS (
	INSERT INTO whguard_payloads (event_row_id, headers, body, path)
	SELECT id, '{"Content-Type":["application/json"]}', convert_to(repeat('x', 1000), 'UTF8'), '/webhooks/bench' FROM e
)
INSERT INTO whguard_attempts (event_row_id, number, started_at, duration_ms, status_code)
SELECT id, 1, received_at, 5, 503 FROM e WHERE id % 20 = 0;
VACUUM ANALYZE;
CHECKPOINT;
SQL
size=$(psql -qAt "$url" -c "SELECT pg_size_pretty(pg_total_relation_size('whguard_payloads') + pg_total_relation_size('whguard_attempts'))")
start=$(date +%s.%N)
psql -qAt "$url" -v ON_ERROR_STOP=1 -1 -f journal/migrations/postgres/0019_partitions_by_day.sql >/dev/null
end=$(date +%s.%N)
secs=$(echo "$end - $start" | bc)
echo "migration 0019 on $rows events ($size of payloads and attempts): $secs s in one transaction, $(echo "scale=2; $secs * 1000000 / $rows" | bc) s per million events"
