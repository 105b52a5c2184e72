package journal_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

var dbURL string

func TestMain(m *testing.M) {
	code := testdb.Main(m, "journal", &dbURL)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreCurrent()); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// open returns a migrated store on a database of its own, so tests do not
// see each other's rows.
func open(t *testing.T) *journal.Postgres {
	t.Helper()
	ctx := context.Background()
	u, drop, err := testdb.Create(ctx, "jt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	pg, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Close)
	if _, err := pg.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return pg
}

func ev(provider, id, hash string) journal.Event {
	return journal.Event{
		Provider: provider, EventID: id, EventType: "t", ContentHash: hash,
		Headers: http.Header{"Webhook-Id": {id}}, Body: []byte(`{"id":"` + id + `"}`),
		Path: "/webhooks/" + provider,
	}
}

func countRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAppendOutcomes(t *testing.T) {
	pg := open(t)
	ctx := context.Background()

	r, err := pg.Append(ctx, []journal.Event{ev("p", "a", "h1")})
	if err != nil {
		t.Fatal(err)
	}
	if r[0].Outcome != journal.Inserted || r[0].ID == 0 {
		t.Fatalf("first append: %+v", r[0])
	}
	first := r[0].ID

	r, err = pg.Append(ctx, []journal.Event{ev("p", "a", "h1")})
	if err != nil {
		t.Fatal(err)
	}
	if r[0].Outcome != journal.Duplicate || r[0].ID != first {
		t.Fatalf("same content: %+v, want duplicate of %d", r[0], first)
	}

	r, err = pg.Append(ctx, []journal.Event{ev("p", "a", "h2")})
	if err != nil {
		t.Fatal(err)
	}
	if r[0].Outcome != journal.Conflict || r[0].ID != first {
		t.Fatalf("other content: %+v, want conflict on %d", r[0], first)
	}
	// Same event id under another provider is another event.
	r, err = pg.Append(ctx, []journal.Event{ev("q", "a", "h2")})
	if err != nil {
		t.Fatal(err)
	}
	if r[0].Outcome != journal.Inserted || r[0].ID == first {
		t.Fatalf("other provider: %+v", r[0])
	}

	if n := countRows(t, pg.Pool(), "whguard_events"); n != 2 {
		t.Fatalf("events rows = %d, want 2", n)
	}
	if n := countRows(t, pg.Pool(), "whguard_conflicts"); n != 1 {
		t.Fatalf("conflict rows = %d, want 1", n)
	}
	// The first payload is kept.
	var hash string
	if err := pg.Pool().QueryRow(ctx, `SELECT content_hash FROM whguard_events WHERE id=$1`, first).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if hash != "h1" {
		t.Fatalf("stored hash %q, want the first one", hash)
	}
}

func TestAppendBatch(t *testing.T) {
	pg := open(t)
	ctx := context.Background()
	if _, err := pg.Append(ctx, []journal.Event{ev("p", "old", "h")}); err != nil {
		t.Fatal(err)
	}
	batch := []journal.Event{
		ev("p", "z", "h"),   // new
		ev("p", "old", "h"), // duplicate of a stored row
		ev("p", "z", "h"),   // in-batch duplicate
		ev("p", "z", "X"),   // in-batch conflict
		ev("p", "old", "Y"), // conflict with a stored row
		ev("p", "b", "h"),   // new
	}
	r, err := pg.Append(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []journal.Outcome{journal.Inserted, journal.Duplicate, journal.Duplicate, journal.Conflict, journal.Conflict, journal.Inserted}
	for i, w := range want {
		if r[i].Outcome != w {
			t.Errorf("batch[%d] = %v, want %v", i, r[i].Outcome, w)
		}
	}
	if r[0].ID != r[2].ID || r[0].ID != r[3].ID || r[1].ID != r[4].ID {
		t.Errorf("ids do not line up: %+v", r)
	}
	if n := countRows(t, pg.Pool(), "whguard_events"); n != 3 {
		t.Fatalf("events rows = %d, want 3", n)
	}
	if n := countRows(t, pg.Pool(), "whguard_payloads"); n != 3 {
		t.Fatalf("payload rows = %d, want 3", n)
	}
}

// Many concurrent appends of one key: exactly one is inserted, whatever the
// interleaving; the unique constraint decides.
func TestAppendConcurrentSameKey(t *testing.T) {
	pg := open(t)
	ctx := context.Background()
	const n = 40
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[journal.Outcome]int{}
		ids      = map[int64]bool{}
	)
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := pg.Append(ctx, []journal.Event{ev("p", "same", "h")})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			outcomes[r[0].Outcome]++
			ids[r[0].ID] = true
		}()
	}
	close(start)
	wg.Wait()
	if outcomes[journal.Inserted] != 1 || outcomes[journal.Duplicate] != n-1 || len(ids) != 1 {
		t.Fatalf("outcomes %v ids %v", outcomes, ids)
	}
	if c := countRows(t, pg.Pool(), "whguard_events"); c != 1 {
		t.Fatalf("rows = %d", c)
	}
}

// Overlapping batches in opposite orders must not deadlock.
func TestAppendConcurrentBatchesNoDeadlock(t *testing.T) {
	pg := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var batch []journal.Event
			for i := range 50 {
				k := i
				if g%2 == 1 {
					k = 49 - i
				}
				batch = append(batch, ev("p", fmt.Sprintf("k%02d", k), "h"))
			}
			if _, err := pg.Append(ctx, batch); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if c := countRows(t, pg.Pool(), "whguard_events"); c != 50 {
		t.Fatalf("rows = %d", c)
	}
}

func TestAppendUnavailable(t *testing.T) {
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

func TestMigrateTwiceAndReady(t *testing.T) {
	ctx := context.Background()
	u, drop, err := testdb.Create(ctx, "mig")
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	pg, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if err := pg.Ready(ctx); err != journal.ErrNotMigrated {
		t.Fatalf("ready before migrate = %v, want ErrNotMigrated", err)
	}
	applied, err := pg.Migrate(ctx)
	if err != nil || len(applied) == 0 {
		t.Fatalf("first migrate: %v %v", applied, err)
	}
	applied, err = pg.Migrate(ctx)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second migrate applied %v, err %v", applied, err)
	}
	if err := pg.Ready(ctx); err != nil {
		t.Fatalf("ready after migrate: %v", err)
	}
}

// Two separate processes migrating one empty database at the same moment:
// the advisory lock serializes them and both succeed.
func TestMigrateTwoProcesses(t *testing.T) {
	ctx := context.Background()
	u, drop, err := testdb.Create(ctx, "mig2")
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	start := time.Now().Add(500 * time.Millisecond).UnixNano()
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMigrateChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "WHGUARD_TEST_MIGRATE_URL="+u, fmt.Sprintf("WHGUARD_TEST_MIGRATE_AT=%d", start))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
		if !strings.Contains(outs[i].String(), "MIGRATED") {
			t.Fatalf("child %d did not migrate:\n%s", i, outs[i])
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

// TestMigrateChild is the body of a child process of TestMigrateTwoProcesses.
func TestMigrateChild(t *testing.T) {
	u := os.Getenv("WHGUARD_TEST_MIGRATE_URL")
	if u == "" {
		return // only does something as a child of TestMigrateTwoProcesses
	}
	var at int64
	fmt.Sscan(os.Getenv("WHGUARD_TEST_MIGRATE_AT"), &at)
	time.Sleep(time.Until(time.Unix(0, at)))
	ctx := context.Background()
	pg, err := journal.OpenPostgres(ctx, journal.PostgresConfig{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if _, err := pg.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Println("MIGRATED")
}

// Bulk replay walks ids forward: rows that fail again while it runs are not
// picked twice, and it ends.
func TestBulkReplayTerminatesWhileRowsDieAgain(t *testing.T) {
	pg := open(t)
	ctx := context.Background()
	var batch []journal.Event
	for i := range 250 {
		batch = append(batch, ev("p", fmt.Sprintf("d%03d", i), "h"))
	}
	if _, err := pg.Append(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Pool().Exec(ctx, `UPDATE whguard_events SET status = 'dead'`); err != nil {
		t.Fatal(err)
	}
	// A forwarder whose backend refuses everything at once.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			pg.Pool().Exec(ctx, `UPDATE whguard_events SET status = 'dead' WHERE status = 'retry'`)
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	n, err := pg.BulkReplay(cctx, journal.Filter{Status: journal.StatusDead}, "storm")
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if n != 250 {
		t.Fatalf("replayed %d, want each of the 250 once", n)
	}
	if c := countRows(t, pg.Pool(), "whguard_replays"); c != 250 {
		t.Fatalf("%d audit rows, want 250", c)
	}
}

func TestListCursorBeyondInt32(t *testing.T) {
	pg := open(t)
	if _, err := pg.Append(context.Background(), []journal.Event{ev("p", "a", "h")}); err != nil {
		t.Fatal(err)
	}
	evs, _, err := pg.List(context.Background(), journal.Filter{Before: 3_000_000_000})
	if err != nil || len(evs) != 1 {
		t.Fatalf("list before 3e9: %v %v", evs, err)
	}
}
