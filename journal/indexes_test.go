package journal_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

// justification is a statement whose plan needs some indexes of the hot
// tables: the query the index is kept for.
type justification struct {
	name    string   // key of journal.PlannedStatements
	what    string   // what it does, for the docs
	args    string   // its arguments as SQL literals, for EXECUTE
	generic bool     // run by a hot pool, which plans it once (generic plan)
	uses    []string // indexes its plan must use
}

var justifications = []justification{
	{"lease", "lease the oldest due rows, with their payloads", "100, 30", true,
		[]string{"whguard_events_ready", "whguard_events_pkey", "whguard_payloads_pkey"}},
	{"outcome", "write a batch of outcomes by id and lease token",
		`ARRAY[7]::bigint[], ARRAY['00000000-0000-0000-0000-000000000000']::uuid[], ARRAY['done'], ARRAY[0]::float8[], ARRAY[''],
		 ARRAY[1], ARRAY[now()], ARRAY[3]::bigint[], ARRAY[200], ARRAY[''], ARRAY['ok'], ARRAY[true], ARRAY['']`, true,
		[]string{"whguard_events_pkey"}},
	{"existing", "read the stored rows of keys an append did not insert (and the unique constraint itself)",
		"ARRAY['stripe'], ARRAY['evt_5']", true, []string{"whguard_events_key"}},
	{"guard", "find the event a body-guarded copy repeats", "'stripe', 'guard_50'", true,
		[]string{"whguard_events_body_guard"}},
	{"expired", "the reaper: rows whose lease expired", "", true, []string{"whguard_events_undone"}},
	{"counts", "exact counts of every status but done (metrics, overview)", "", false,
		[]string{"whguard_events_undone"}},
	{"cleanup", "retention: the oldest finished rows", "now() - interval '35 days', 5000", false,
		[]string{"whguard_events_finished_age"}},
	{"unpark-heads", "per-key order: the first holder of each key", "", true, []string{"whguard_events_order"}},
	{"window", "search by received time: the id range of a window", "now() - interval '20 days', now() - interval '19 days'", false,
		[]string{"whguard_events_received_brin"}},
	{"attempts", "an event's attempts (API, CLI, inspector)", "42", false,
		[]string{"whguard_attempts_event", "whguard_events_pkey"}},
}

// exempt are indexes of the hot tables no query needs, each with why it
// is kept.
var exempt = map[string]string{
	"whguard_attempts_pkey": "the row's identity (tools and logical replication need one); attempts are written only off the happy path",
}

// hotTables are the tables every event writes or may write.
var hotTables = []string{"whguard_events", "whguard_payloads", "whguard_attempts"}

// indexShapeSQL fills a journal shaped like a production one: 60 000
// events received over 40 days, nearly all done, a few of every other
// status, some with order keys or body guards, each with its payload, and
// attempts for those that failed (and for one in five delivered ones, as a
// flaky backend leaves), in the day partitions of the days they
// were received.
const indexShapeSQL = `
INSERT INTO whguard_events (provider, event_id, event_type, content_hash, status, attempts, next_attempt_at,
                            lease_token, lease_expires_at, received_at, updated_at, body_guard, order_key, order_holds)
SELECT 'stripe', 'evt_' || g, 'invoice.paid', 'sha256:' || md5(g::text), st,
       CASE WHEN st = 'pending' THEN 0 ELSE 1 END,
       CASE WHEN st = 'retry' THEN now() + interval '1 minute' ELSE at END,
       CASE WHEN st = 'processing' THEN gen_random_uuid() END,
       CASE WHEN st = 'processing' THEN now() - interval '1 minute' END,
       at, at + interval '1 second',
       CASE WHEN g % 50 = 0 THEN 'guard_' || g END,
       CASE WHEN g % 20 = 0 THEN 'cus_' || (g % 300) END,
       g % 20 = 0 AND st IN ('pending', 'retry', 'processing', 'dead')
FROM (SELECT g, now() - interval '40 days' + g * interval '57.6 seconds' AS at,
             CASE WHEN g % 200 = 0 THEN 'pending' WHEN g % 200 = 1 THEN 'retry' WHEN g % 200 = 2 THEN 'processing'
                  WHEN g % 100 = 3 THEN 'dead' WHEN g % 100 = 4 THEN 'ignored' ELSE 'done' END AS st
      FROM generate_series(1, 60000) g) s;
DO $$ DECLARE t text; BEGIN
    FOREACH t IN ARRAY ARRAY['whguard_payloads', 'whguard_attempts'] LOOP
        FOR d IN 1..41 LOOP
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', t || '_' || to_char(utc - d, 'YYYYMMDD'),
                           t, utc - d, utc - d + 1) FROM (SELECT (now() AT TIME ZONE 'UTC')::date AS utc) u;
        END LOOP;
    END LOOP;
END $$;
UPDATE whguard_partition_days SET first_day = (now() AT TIME ZONE 'UTC')::date - 41;
INSERT INTO whguard_payloads (event_row_id, headers, body, path, raw_query, scheme, day)
SELECT id, '{}', '\x7b7d', '/webhooks/stripe', '', 'stripe', (received_at AT TIME ZONE 'UTC')::date FROM whguard_events;
INSERT INTO whguard_attempts (event_row_id, number, started_at, duration_ms, status_code, error, response_excerpt, day)
SELECT id, 1, received_at, 3, 500, '', 'no', (received_at AT TIME ZONE 'UTC')::date FROM whguard_events
WHERE status IN ('retry', 'dead') OR id % 5 = 0;`

// Every index of the hot tables is there for a query: on a journal shaped
// like a production one, that query's plan (generic for the statements
// the hot pools run, as they run them) uses it; or the index is exempt,
// with a reason. An index the hot path maintains for nothing fails here,
// and so does a query change that stops using its index. The plans are
// kept in docs/journal.md (regenerated with WHGUARD_UPDATE_DOCS=1, `make
// docs`), whose list of indexes must match.
func TestIndexesAreJustified(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := migratedWith(t, "indexes", indexShapeSQL)
	// Vacuumed as whguard does it: the partitions created ahead stay
	// unanalyzed until their day (postgres_partitions.go, statTables).
	var begun string
	if err := conn.QueryRow(ctx, `SELECT string_agg(c.relname, ', ') FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent IN ('whguard_payloads'::regclass, 'whguard_attempts'::regclass)
		  AND (c.relname LIKE '%_held' OR right(c.relname, 8) <= to_char((now() AT TIME ZONE 'UTC')::date, 'YYYYMMDD'))`).Scan(&begun); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE whguard_events, `+begun); err != nil {
		t.Fatal(err)
	}

	defs := map[string]string{} // index: its definition
	rows, err := conn.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY($1) ORDER BY indexname`, hotTables)
	if err != nil {
		t.Fatal(err)
	}
	var name, def string
	if _, err := pgx.ForEachRow(rows, []any{&name, &def}, func() error {
		defs[name] = strings.NewReplacer(" USING btree", "", "public.", "", " ON ONLY ", " ON ").Replace(def)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A plan names the partitions' indexes; each stands for its parent's.
	rows, err = conn.Query(ctx, `SELECT c.relname, p.relname FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent WHERE c.relkind = 'i'`)
	if err != nil {
		t.Fatal(err)
	}
	var pairs []string
	var child, parent string
	if _, err := pgx.ForEachRow(rows, []any{&child, &parent}, func() error {
		pairs = append(pairs, dayName.ReplaceAllString(child, "_YYYYMMDD")+" ", parent+" ")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	asParents := strings.NewReplacer(pairs...)

	plans := map[string]string{}
	needed := map[string][]string{} // index: the statements that use it
	for _, j := range justifications {
		plan, err := explain(ctx, conn, j)
		if err != nil {
			t.Fatalf("%s: %v", j.name, err)
		}
		plans[j.name] = plan
		plan = asParents.Replace(plan)
		for _, idx := range j.uses {
			if _, ok := defs[idx]; !ok {
				t.Errorf("%s: index %s does not exist", j.name, idx)
			}
			if !strings.Contains(plan, idx) {
				t.Errorf("%s: the plan does not use %s:\n%s", j.name, idx, plan)
			}
			needed[idx] = append(needed[idx], j.name)
		}
	}
	for idx := range defs {
		if len(needed[idx]) == 0 && exempt[idx] == "" {
			t.Errorf("index %s: no query needs it and it is not exempt", idx)
		}
	}

	doc := indexDoc(defs, needed, plans)
	const path = "../docs/journal.md"
	const begin, end = "<!-- indexes: generated by TestIndexesAreJustified -->\n", "<!-- end of indexes -->\n"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i, k := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || k < i {
		t.Fatalf("%s has no generated index section (%q … %q)", path, begin, end)
	}
	if os.Getenv("WHGUARD_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(text[:i+len(begin)]+doc+text[k:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	// Plans may differ in detail between servers and statistics samples;
	// the table of indexes and the queries that need them may not.
	if got, want := tableOf(text[i+len(begin):k]), tableOf(doc); got != want {
		t.Errorf("%s: the index table is stale (run make docs):\n%s\nwant:\n%s", path, got, want)
	}
}

// migratedWith is a connection to a fresh migrated database on which the
// statements have run; both end with the test.
func migratedWith(t *testing.T, prefix string, statements ...string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	url, drop, err := testdb.CreateMigrated(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	for _, q := range statements {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%.60s…: %v", q, err)
		}
	}
	return conn
}

// explain is j's plan as the server would run it: EXPLAIN EXECUTE of the
// prepared statement, with a generic plan for the hot pools' statements.
func explain(ctx context.Context, conn *pgx.Conn, j justification) (string, error) {
	mode := "force_custom_plan"
	if j.generic {
		mode = "force_generic_plan"
	}
	stmt := "whguard_" + strings.ReplaceAll(j.name, "-", "_")
	execute := "EXECUTE " + stmt
	if j.args != "" {
		execute += "(" + j.args + ")"
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{
		"SET LOCAL plan_cache_mode = " + mode,
		"SET LOCAL jit = off",
		"PREPARE " + stmt + " AS " + journal.PlannedStatements[j.name],
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("%s: %w", q, err)
		}
	}
	defer conn.Exec(ctx, "DEALLOCATE "+stmt)
	rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) "+execute)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	// The time of the run, in the plans of custom-planned statements,
	// would change the docs at every regeneration.
	// So would the days in the names of partitions, whose scans are
	// shown once per run of identical ones.
	plan := timeLiteral.ReplaceAllString(strings.Join(lines, "\n"), "'…'::timestamp")
	plan = partitionAlias.ReplaceAllString(dayName.ReplaceAllString(plan, "_YYYYMMDD"), "${1}_n")
	return foldRepeats(plan), err
}

var (
	timeLiteral    = regexp.MustCompile(`'20\d\d-\d\d-\d\d [0-9:.+-]+'::timestamp`)
	dayName        = regexp.MustCompile(`_20\d{6}`)
	partitionAlias = regexp.MustCompile(`\b([a-z])_\d+\b`)
)

// foldRepeats writes a run of identical plan nodes (a "->" line and the
// lines under it) once, with how many there were.
func foldRepeats(plan string) string {
	var blocks []string
	for _, line := range strings.Split(plan, "\n") {
		if strings.Contains(line, "->") || len(blocks) == 0 {
			blocks = append(blocks, line)
		} else {
			blocks[len(blocks)-1] += "\n" + line
		}
	}
	var out []string
	for i := 0; i < len(blocks); {
		k := i + 1
		for k < len(blocks) && blocks[k] == blocks[i] {
			k++
		}
		out = append(out, blocks[i])
		if k-i > 1 {
			indent := len(blocks[i]) - len(strings.TrimLeft(blocks[i], " "))
			out = append(out, fmt.Sprintf("%s   (%d such partitions)", strings.Repeat(" ", indent), k-i))
		}
		i = k
	}
	return strings.Join(out, "\n")
}

// indexDoc is the generated section of docs/journal.md: a table of the hot
// tables' indexes with the queries that need them, then each query's plan.
func indexDoc(defs map[string]string, needed map[string][]string, plans map[string]string) string {
	var b strings.Builder
	b.WriteString("| index | definition | needed by |\n|---|---|---|\n")
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		why := exempt[n]
		if len(needed[n]) > 0 {
			why = "`" + strings.Join(needed[n], "`, `") + "`"
		}
		def := defs[n][strings.Index(defs[n], " ON ")+4:]
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", n, def, why)
	}
	b.WriteString("\nThe plans (`EXPLAIN (COSTS OFF)`; generic where a hot pool runs the statement):\n")
	for _, j := range justifications {
		mode := "custom plan"
		if j.generic {
			mode = "generic plan"
		}
		fmt.Fprintf(&b, "\n<details><summary><code>%s</code>: %s (%s)</summary>\n\n```\n%s\n```\n</details>\n", j.name, j.what, mode, plans[j.name])
	}
	return b.String()
}

// tableOf is the index table of a generated section.
func tableOf(section string) string {
	var out []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "|") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// The append finds keys by probing the key and guard indexes once the
// journal holds its first few thousand events (the hot pools' generic
// plans are remade as the journal grows, postgres_plans.go): a plan that
// joined against a scan of the table, chosen while it was small, would
// read the whole table for every batch as it grows toward the next
// re-plan.
func TestAppendPlanProbesTheKeyOnceTheJournalGrows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := migratedWith(t, "appendplan", `INSERT INTO whguard_events (provider, event_id, content_hash, status, body_guard)
		SELECT 'stripe', 'evt_' || g, 'h', 'done', CASE WHEN g % 10 = 0 THEN 'guard_' || g END FROM generate_series(1, 2000) g`,
		`ANALYZE whguard_events, whguard_payloads`)
	for _, name := range []string{"append", "append-plain"} {
		plan, err := explain(ctx, conn, justification{name: name, generic: true,
			args: `ARRAY['stripe'], ARRAY['evt_1'], ARRAY['t'], ARRAY['h'], ARRAY[now()], ARRAY['{}'::jsonb], ARRAY['\x00'::bytea],
			ARRAY['/'], ARRAY[''], 'whguard_events', '', ARRAY[30::float8], ARRAY['00000000-0000-0000-0000-000000000000'::uuid],
			ARRAY['g'], ARRAY[''], ARRAY[false], ARRAY[false], ARRAY['stripe'], NULL::text[], ARRAY[202], NULL::text[]`})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan, "using whguard_events_key") || !strings.Contains(plan, "using whguard_events_body_guard") ||
			regexp.MustCompile(`Seq Scan on whguard_events\b`).MatchString(plan) {
			t.Fatalf("%s: the generic plan on a journal of 2 000 events does not probe the key and guard indexes:\n%s", name, plan)
		}
		if name == "append-plain" && strings.Contains(plan, "WindowAgg") {
			t.Fatalf("%s: a batch without an ordered event still counts its place in a key's line:\n%s", name, plan)
		}
	}
}
