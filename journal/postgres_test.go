package journal_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/google/uuid"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/internal/testwait"
	"github.com/whguard/whguard/journal"
)

var dbURL string

func TestMain(m *testing.M) {
	if os.Getenv("WHGUARD_TEST_MIGRATE_URL") != "" {
		os.Exit(m.Run()) // a child of TestMigrateTwoProcesses: needs no database of the package's
	}
	// Goroutines running before the tests are not theirs (taken after, the
	// snapshot would excuse every leak).
	before := goleak.IgnoreCurrent()
	code := testdb.Main(m, "journal", &dbURL)
	if code == 0 {
		if err := goleak.Find(before); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestAppendUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Nothing listens on port 1: the append must fail, never pretend.
	pg, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: "postgres://postgres@127.0.0.1:1/x?connect_timeout=1"})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if _, err := pg.Append(ctx, []journal.Event{ev("p", "a", "h")}); err == nil {
		t.Fatal("append to a dead server succeeded")
	}
	if err := pg.Ready(ctx); err == nil {
		t.Fatal("ready on a dead server")
	}
}

// Separate processes migrating one empty database at the same moment:
// the advisory lock serializes them and all succeed.
func TestMigrateTwoProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, drop, err := testdb.Create(ctx, "mig2")
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	type child struct {
		cmd         *exec.Cmd
		stdin       io.WriteCloser
		out, errs   strings.Builder // out is complete once read is closed
		ready, read chan struct{}
	}
	children := make([]*child, 3)
	for i := range children {
		c := &child{cmd: exec.Command(os.Args[0], "-test.run=^TestMigrateChild$", "-test.count=1"),
			ready: make(chan struct{}), read: make(chan struct{})}
		c.cmd.Env = append(os.Environ(), "WHGUARD_TEST_MIGRATE_URL="+u)
		c.cmd.Stderr = &c.errs
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		stdout, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.cmd.Process.Kill() }) // if the test fails before releasing it
		go func() {
			defer close(c.read)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				c.out.WriteString(sc.Text() + "\n")
				if sc.Text() == "READY" {
					close(c.ready)
				}
			}
		}()
		children[i] = c
	}
	// Release them together, once each is connected and waiting (a start
	// time fixed in advance could be missed by a child slow to start).
	for i, c := range children {
		select {
		case <-c.ready:
		case <-c.read:
			_ = c.cmd.Wait()
			t.Fatalf("child %d exited before it was ready:\n%s%s", i, c.out.String(), c.errs.String())
		case <-time.After(30 * time.Second):
			t.Fatalf("child %d not ready within 30 s", i)
		}
	}
	for _, c := range children {
		c.stdin.Close()
	}
	for i, c := range children {
		<-c.read
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s%s", i, err, c.out.String(), c.errs.String())
		}
		if !strings.Contains(c.out.String(), "MIGRATED") {
			t.Fatalf("child %d did not migrate:\n%s%s", i, c.out.String(), c.errs.String())
		}
	}
	pg, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if err := pg.Ready(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
}

// TestMigrateChild is the body of a child process of TestMigrateTwoProcesses:
// it connects, says READY, and migrates when its standard input closes.
func TestMigrateChild(t *testing.T) {
	u := os.Getenv("WHGUARD_TEST_MIGRATE_URL")
	if u == "" {
		return // only does something as a child of TestMigrateTwoProcesses
	}
	ctx := context.Background()
	pg, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if err := pg.Pool().Ping(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Println("READY")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if _, err := pg.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Println("MIGRATED")
}

// Payloads and attempts have no foreign key on PostgreSQL (migration
// 0004): retention must delete them itself, leaving no orphans.
func TestRetentionLeavesNoOrphans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.OpenStore(t, "postgres", true).(*journal.Postgres)
	deliveredEvent(t, s, "a")
	future := time.Now().Add(48 * time.Hour) // past the end of today's partitions
	if c, err := s.Cleanup(ctx, future, future); err != nil || c.Events != 1 {
		t.Fatalf("cleanup %+v %v", c, err)
	}
	for _, table := range []string{"whguard_events", "whguard_payloads", "whguard_attempts"} {
		var n int
		if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s: %d rows left (%v)", table, n, err)
		}
	}
}

// A replay holding an old done event while retention runs: the cleanup
// must skip it, and once the replay commits the event is there, with its
// payload, due for delivery. (Found in review: the delete re-checked only
// the id after waiting, and deleted the replayed event.)
func TestRetentionSkipsAnEventBeingReplayed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.OpenStore(t, "postgres", true).(*journal.Postgres)
	ds := []journal.Delivery{deliveredEvent(t, s, "old")}
	if _, err := s.Pool().Exec(ctx, `UPDATE whguard_events SET updated_at = now() - interval '40 days'`); err != nil {
		t.Fatal(err)
	}
	// A replay in progress: it holds the event row (and its payload) and has
	// moved it to retry, not yet committed.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM whguard_events e JOIN whguard_payloads p ON p.event_row_id = e.id WHERE e.id = $1 FOR UPDATE OF e, p`, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE whguard_events SET status = 'retry', updated_at = now() WHERE id = $1`, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := s.Cleanup(cctx, time.Now().Add(-35*24*time.Hour), time.Now().Add(-7*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if c.Events != 0 || c.Payloads != 0 {
		t.Fatalf("cleanup touched an event being replayed: %+v", c)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := s.Get(ctx, ds[0].ID)
	if err != nil || d.Status != journal.StatusRetry || d.Body != "{}" {
		t.Fatalf("after the replay committed: %+v %v", d, err)
	}
}

// A value PostgreSQL refuses (here a query string that is not UTF-8) fails
// only its own event, never the batch it shares with others. (Found in
// review: one such request made every request of its group commit 503.)
func TestDataErrorRefusesOnlyItsEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.OpenStore(t, "postgres", true).(*journal.Postgres)
	good := journal.Event{Provider: "p", EventID: "good", ContentHash: "h", Body: []byte("{}"), Path: "/"}
	bad := journal.Event{Provider: "p", EventID: "bad", ContentHash: "h", Body: []byte("{}"), Path: "/", RawQuery: "a=\xff"}
	r, err := s.Append(ctx, []journal.Event{good, bad})
	if err != nil {
		t.Fatalf("the batch failed: %v", err)
	}
	if r[0].Outcome != journal.Inserted || r[1].Outcome != journal.Refused {
		t.Fatalf("outcomes %v %v, want inserted and refused", r[0].Outcome, r[1].Outcome)
	}
	r, err = s.Append(ctx, []journal.Event{bad})
	if err != nil || r[0].Outcome != journal.Refused {
		t.Fatalf("alone: %+v %v", r, err)
	}
}

// whguard's own vacuum (used when the server's autovacuum is off) clears the
// dead row versions every lease and outcome leave behind.
func TestCleanupVacuumsHotTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, drop, err := testdb.CreateMigrated(ctx, "vac")
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	s, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u, AlwaysVacuum: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var batch []journal.Event
	for i := range 200 {
		batch = append(batch, journal.Event{Provider: "p", EventID: fmt.Sprint(i), ContentHash: "h", Body: []byte("{}"), Path: "/"})
	}
	if _, err := s.Append(ctx, batch); err != nil {
		t.Fatal(err)
	}
	ds, err := s.Lease(ctx, 200, time.Minute)
	if err != nil || len(ds) != 200 {
		t.Fatal(len(ds), err)
	}
	var fs []journal.Finish
	for _, d := range ds {
		fs = append(fs, journal.Finish{ID: d.ID, LeaseToken: d.LeaseToken, Status: journal.StatusDone, Attempt: journal.Attempt{Number: 1, StartedAt: time.Now()}})
	}
	if _, err := s.Complete(ctx, fs); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	if _, err := s.Cleanup(ctx, past, past); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "Cleanup to vacuum whguard_events", func() bool {
		var vacuums int64
		if err := s.Pool().QueryRow(ctx, `SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'whguard_events'`).Scan(&vacuums); err != nil {
			t.Fatal(err)
		}
		return vacuums >= 1
	})
}

// deliveredEvent journals one event and records it delivered (done, one
// attempt), as the forwarder would.
func deliveredEvent(t *testing.T, s *journal.Postgres, eventID string) journal.Delivery {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Append(ctx, []journal.Event{{Provider: "p", EventID: eventID, ContentHash: "h", Body: []byte("{}"), Path: "/"}}); err != nil {
		t.Fatal(err)
	}
	ds, err := s.Lease(ctx, 1, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatal(ds, err)
	}
	if _, err := s.Complete(ctx, []journal.Finish{{ID: ds[0].ID, LeaseToken: ds[0].LeaseToken, Status: journal.StatusDone,
		Attempt: journal.Attempt{Number: 1, StartedAt: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	return ds[0]
}

// TestPlansAreCustom checks that whguard's sessions plan every statement
// for the table as it is (a generic plan cached while the journal was
// empty kept scanning whole tables as it grew), and that
// WHGUARD_DATABASE_URL can still choose otherwise.
func TestPlanModeInURLWins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, drop, err := testdb.CreateMigrated(ctx, "plan")
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	for _, c := range []struct{ url, want string }{
		{u + sep + "plan_cache_mode=auto", "auto"},
	} {
		s, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: c.url})
		if err != nil {
			t.Fatal(err)
		}
		// The general pool, and the hot pools once they have connections.
		if _, err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, []journal.Event{ev("modes", "e1", "h")}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Lease(ctx, 1, time.Minute); err != nil {
			t.Fatal(err)
		}
		var mode string
		if err := s.Pool().QueryRow(ctx, `SHOW plan_cache_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		modes := []string{mode}
		conns := journal.HotConns(ctx, s)
		for _, c := range conns {
			if err := c.QueryRow(ctx, `SHOW plan_cache_mode`).Scan(&mode); err != nil {
				t.Fatal(err)
			}
			modes = append(modes, mode)
			c.Release()
		}
		s.Close()
		if len(modes) < 3 {
			t.Fatalf("only %d pools answered", len(modes))
		}
		for _, m := range modes {
			if m != c.want {
				t.Errorf("%s: plan_cache_mode = %q, want %q", c.url, m, c.want)
			}
		}
	}
}

// The hot statements run generic plans, and those plans follow the
// journal as it grows: statements first planned on an empty journal and
// executed again after it has grown to 30 000 events go by index, never by
// a sequential scan of the events or payloads table.
func TestHotPlansFollowTheJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, drop, err := testdb.CreateMigrated(ctx, "growth")
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	s, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mode string
	if err := s.Pool().QueryRow(ctx, `SHOW plan_cache_mode`).Scan(&mode); err != nil || mode != "force_custom_plan" {
		t.Fatalf("general pool: plan_cache_mode %q (%v), want force_custom_plan", mode, err)
	}

	// One round of every hot statement while the journal is empty, then
	// again once it has grown.
	round := func(prefix string, n int) {
		t.Helper()
		evs := make([]journal.Event, n)
		for i := range evs {
			evs[i] = ev("growth", fmt.Sprintf("%s-%d", prefix, i), "h")
			evs[i].Body = []byte(`{"n":1}`)
		}
		if _, err := s.Append(ctx, evs); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, evs[:1]); err != nil { // a duplicate: the lookup branch
			t.Fatal(err)
		}
		ds, err := s.Lease(ctx, 10, time.Minute)
		if err != nil || len(ds) == 0 {
			t.Fatalf("lease: %d %v", len(ds), err)
		}
		fs := make([]journal.Finish, len(ds))
		for i, d := range ds {
			fs[i] = finish(d, "done", 200)
		}
		if _, err := s.Complete(ctx, fs); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Release(ctx, []int64{ds[0].ID}, []uuid.UUID{ds[0].LeaseToken}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReapExpired(ctx, 5); err != nil {
			t.Fatal(err)
		}
	}
	round("empty", 20)
	for b := range 300 {
		round(fmt.Sprintf("grow%d", b), 100)
	}
	if !testwait.Until(30*time.Second, testwait.Poll, func() bool {
		done, running := journal.GrowthAnalyzes(s)
		return done >= 3 && !running
	}) {
		done, running := journal.GrowthAnalyzes(s)
		t.Fatalf("growth analyzes: %d done, running %v", done, running)
	}
	// The payloads are analyzed from a small sample with no statistics of
	// their large columns (0015): the planner still learns their size.
	var est float64
	var count int64
	// (Each partition is analyzed, not the parent: postgres_partitions.go.)
	if err := s.Pool().QueryRow(ctx, `SELECT sum(greatest(reltuples, 0))::float8, (SELECT count(*) FROM whguard_payloads)
		FROM pg_class WHERE oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'whguard_payloads'::regclass)`).Scan(&est, &count); err != nil {
		t.Fatal(err)
	}
	var bodyTarget int
	if err := s.Pool().QueryRow(ctx, `SELECT max(attstattarget) FROM pg_attribute
		WHERE attrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'whguard_payloads'::regclass) AND attname = 'body'`).Scan(&bodyTarget); err != nil || bodyTarget != 0 {
		t.Fatalf("payload body statistics target %d (%v), want 0 in every partition", bodyTarget, err)
	}
	if count < 10000 || est < float64(count)/2 || est > float64(count)*2 {
		t.Fatalf("whguard_payloads: estimated %.0f rows, counted %d", est, count)
	}
	// No payload column samples more than 3 000 rows (the largest target
	// of a table's columns sets its sample: one new column at the default
	// would make every ANALYZE read 30 000 bodies again, 0022).
	var wide []string
	if err := s.Pool().QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT attname::text), '{}') FROM pg_attribute
		WHERE attrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'whguard_payloads'::regclass
		                   UNION ALL SELECT 'whguard_payloads'::regclass)
		  AND attnum > 0 AND NOT attisdropped AND (attstattarget < 0 OR attstattarget > 10)`).Scan(&wide); err != nil || len(wide) > 0 {
		t.Fatalf("payload columns with a statistics target over 10: %v (%v)", wide, err)
	}
	// While the journal is small its growth ANALYZEs sample 3 000 rows:
	// a histogram of 10 buckets (11 bounds), not the default 100.
	var bounds int
	if err := s.Pool().QueryRow(ctx, `SELECT coalesce(array_length(histogram_bounds::text::timestamptz[], 1), 0)
		FROM pg_stats WHERE tablename = 'whguard_events' AND attname = 'received_at'`).Scan(&bounds); err != nil || bounds < 2 || bounds > 11 {
		t.Fatalf("whguard_events.received_at histogram: %d bounds (%v), want 2 to 11 from a small sample", bounds, err)
	}
	round("grown", 20)

	conns := journal.HotConns(ctx, s)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	checked := map[string]bool{}
	for _, c := range conns {
		if err := c.QueryRow(ctx, `SHOW plan_cache_mode`).Scan(&mode); err != nil || mode != "force_generic_plan" {
			t.Fatalf("hot pool: plan_cache_mode %q (%v), want force_generic_plan", mode, err)
		}
		rows, err := c.Query(ctx, `SELECT name, statement, coalesce(array_length(parameter_types, 1), 0), generic_plans, custom_plans
			FROM pg_prepared_statements WHERE statement LIKE '%whguard_events%'`)
		if err != nil {
			t.Fatal(err)
		}
		type stmt struct {
			name, text      string
			params          int
			generic, custom int64
		}
		var stmts []stmt
		for rows.Next() {
			var st stmt
			if err := rows.Scan(&st.name, &st.text, &st.params, &st.generic, &st.custom); err != nil {
				t.Fatal(err)
			}
			stmts = append(stmts, st)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for _, st := range stmts {
			short := strings.Join(strings.Fields(st.text), " ")[:40]
			if st.custom != 0 || st.generic == 0 {
				t.Errorf("%s…: %d generic and %d custom plans, want only generic", short, st.generic, st.custom)
			}
			args := strings.TrimSuffix(strings.Repeat("NULL,", st.params), ",")
			call := "EXPLAIN EXECUTE " + st.name
			if st.params > 0 {
				call += "(" + args + ")"
			}
			prows, err := c.Query(ctx, call)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for prows.Next() {
				var line string
				if err := prows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, line)
			}
			if err := prows.Err(); err != nil {
				t.Fatal(err)
			}
			text := strings.Join(plan, "\n")
			// The held partitions are empty here: scanning nothing is
			// right (rows moved there are analyzed, which re-plans).
			for _, bad := range []string{"Seq Scan on whguard_events", "Seq Scan on whguard_payloads_2"} {
				if strings.Contains(text, bad) {
					t.Errorf("plan of %s… has %q:\n%s", short, bad, text)
				}
			}
			checked[short] = true
		}
	}
	if len(checked) < 5 { // append, existing-by-key, lease, complete, release, reap
		t.Errorf("checked only %d hot statements: %v", len(checked), checked)
	}
}

// TestUnrecordedConflictFailsOnlyItself: the copy of a conflicting event is
// recorded after the batch's commit. When that fails, only the conflicting
// event is answered as not stored; the new events committed with it stay
// Inserted (before, the whole batch returned an error and its committed
// events were answered 503).
func TestUnrecordedConflictFailsOnlyItself(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.OpenStore(t, "postgres", true).(*journal.Postgres)
	appendOne(t, s, ev("p", "old", "h1"))
	if _, err := s.Pool().Exec(ctx, `
CREATE FUNCTION refuse_conflict() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'disk full'; END$$;
CREATE TRIGGER refuse_conflict BEFORE INSERT ON whguard_conflicts FOR EACH ROW EXECUTE FUNCTION refuse_conflict();`); err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, []journal.Event{ev("p", "new", "h"), ev("p", "old", "h2")})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if res[0].Outcome != journal.Inserted || res[1].Outcome != journal.Unrecorded {
		t.Fatalf("outcomes %v, %v; want inserted, unrecorded", res[0].Outcome, res[1].Outcome)
	}
}
