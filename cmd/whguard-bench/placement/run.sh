#!/bin/sh
# Payload placement: apart vs in the row, interleaved (ABBA), WAL per event
# from pg_stat_wal around each pgbench run. Usage: run.sh DATABASE_URL
set -eu
url=$1; dir=$(dirname "$0")
psql -q "$url" -f "$dir/setup.sql"
for variant in apart inrow inrow apart; do
	psql -qAt "$url" -c "SET client_min_messages = warning; TRUNCATE whguard_events, whguard_payloads, inrow_events CASCADE; CHECKPOINT"
	before=$(psql -qAt "$url" -c "SELECT wal_records || ' ' || wal_bytes || ' ' || wal_fpi FROM pg_stat_wal")
	tps=$(pgbench -n -c 1 -T 8 -f "$dir/$variant.sql" "$url" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
	after=$(psql -qAt "$url" -c "SELECT wal_records || ' ' || wal_bytes || ' ' || wal_fpi FROM pg_stat_wal")
	table=whguard_events; [ "$variant" != apart ] && table=${variant}_events
	events=$(psql -qAt "$url" -c "SELECT count(*) FROM $table")
	size=$(psql -qAt "$url" -c "SELECT pg_total_relation_size('$table') + CASE WHEN '$table' = 'whguard_events' THEN pg_total_relation_size('whguard_payloads') ELSE 0 END")
	echo "$variant $before $after $events $tps $size" | awk '{printf "%-6s WAL records/event %.2f  bytes/event %.0f  FPI/event %.3f  events/s %.0f  bytes on disk/event %.0f\n", $1, ($5-$2)/$8, ($6-$3)/$8, ($7-$4)/$8, $9*16, $10/$8}'
done
