#!/bin/sh
# Retention by DELETE against retention by dropping a partition, measured
# on payload-shaped rows (1 KB body) before whguard partitions anything:
# the design input for partitioned retention (BENCHMARKS.md, "Retention
# at volume, measured ahead"). Usage: run.sh SERVER_URL [ROWS_PER_DAY]
# (SERVER_URL names any database of a server this may create one on).
set -eu
server=$1; per_day=${2:-50000}; days=4
db=whguard_retention_$$
psql -qAt "$server" -c "CREATE DATABASE $db"
url=$(echo "$server" | sed "s#/[^/?]*\([?].*\)\{0,1\}\$#/$db\1#")
trap 'psql -qAt "$server" -c "DROP DATABASE IF EXISTS $db" >/dev/null' EXIT
psql -q "$url" <<SQL
SET client_min_messages = warning;
CREATE TABLE plain (event_row_id bigint PRIMARY KEY, day date NOT NULL, headers jsonb, body bytea);
CREATE INDEX plain_day ON plain (day, event_row_id);
CREATE TABLE parted (event_row_id bigint NOT NULL, day date NOT NULL, headers jsonb, body bytea,
                     PRIMARY KEY (event_row_id, day)) PARTITION BY RANGE (day);
SQL
for d in $(seq 0 $((days - 1))); do
	psql -qAt "$url" -c "CREATE TABLE parted_$d PARTITION OF parted FOR VALUES FROM ('2026-01-0$((d + 1))') TO ('2026-01-0$((d + 2))')"
	for t in plain parted; do
		psql -qAt "$url" -c "INSERT INTO $t SELECT $d * $per_day + g, DATE '2026-01-01' + $d, '{\"Content-Type\":[\"application/json\"]}',
			convert_to(repeat('x', 1000), 'UTF8') FROM generate_series(1, $per_day) g"
	done
done
psql -qAt "$url" -c "VACUUM ANALYZE plain, parted" -c "CHECKPOINT"
measure() { # name, statement, [statement]: prints seconds and WAL bytes
	lsn=$(psql -qAt "$url" -c "SELECT pg_current_wal_insert_lsn()")
	start=$(date +%s.%N)
	psql -qAt "$url" -c "$2" >/dev/null
	if [ -n "${3:-}" ]; then psql -qAt "$url" -c "$3" >/dev/null; fi
	end=$(date +%s.%N)
	wal=$(psql -qAt "$url" -c "SELECT pg_current_wal_insert_lsn() - '$lsn'::pg_lsn")
	echo "$1: $(echo "$end - $start" | bc) s, WAL $(echo "$wal / 1048576" | bc) MB"
}
before=$(psql -qAt "$url" -c "SELECT pg_size_pretty(pg_total_relation_size('plain'))")
# whguard's way today: batches of 5000 by age, then vacuum to make the space reusable.
measure "DELETE one day of $per_day rows in batches of 5000, then VACUUM" "DO \$\$ BEGIN LOOP
	DELETE FROM plain WHERE event_row_id IN (SELECT event_row_id FROM plain WHERE day = '2026-01-01' ORDER BY day, event_row_id LIMIT 5000);
	EXIT WHEN NOT FOUND; COMMIT; END LOOP; END \$\$" "VACUUM plain"
measure "DROP the day's partition" "DROP TABLE parted_0"
after=$(psql -qAt "$url" -c "SELECT pg_size_pretty(pg_total_relation_size('plain')) || ' plain, ' || pg_size_pretty(pg_total_relation_size('parted_1') + pg_total_relation_size('parted_2') + pg_total_relation_size('parted_3')) || ' partitioned'")
echo "size: $before before (plain); after: $after"
