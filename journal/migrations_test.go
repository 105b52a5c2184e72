package journal_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/whguard/whguard/journal"
)

// The two stores' migrations share one numbering: the same versions, each
// under the same name on both, with no gap; a change that concerns one
// store only is a file of comments alone on the other.
func TestMigrationsAligned(t *testing.T) {
	t.Parallel()
	list := func(dir string) []string {
		files, err := filepath.Glob(filepath.Join("migrations", dir, "*.sql"))
		if err != nil || len(files) == 0 {
			t.Fatalf("migrations/%s: %v", dir, err)
		}
		for i := range files {
			files[i] = filepath.Base(files[i])
		}
		slices.Sort(files)
		return files
	}
	pg, lite := list("postgres"), list("sqlite")
	if !slices.Equal(pg, lite) {
		t.Fatalf("the folders differ:\npostgres %v\nsqlite   %v", pg, lite)
	}
	numbered := regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.sql$`)
	for i, name := range pg {
		m := numbered.FindStringSubmatch(name)
		if m == nil || m[1] != pad(i+1) {
			t.Errorf("%s: want %s_name.sql, numbered without a gap", name, pad(i+1))
		}
	}
	if got := journal.LatestVersion(); got != len(pg) {
		t.Errorf("LatestVersion %d, want %d", got, len(pg))
	}
	for _, name := range pg {
		var statements int
		for _, dir := range []string{"postgres", "sqlite"} {
			b, err := os.ReadFile(filepath.Join("migrations", dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(b), "-- "+name[:4]+": ") {
				t.Errorf("%s/%s does not start by saying what it is (-- %s: …)", dir, name, name[:4])
			}
			if hasStatement(string(b)) {
				statements++
			}
		}
		if statements == 0 {
			t.Errorf("%s changes neither store", name)
		}
	}
}

// pad writes n with four digits.
func pad(n int) string { return fmt.Sprintf("%04d", n) }

// hasStatement reports whether sql holds anything besides comments and
// space.
func hasStatement(sql string) bool {
	for _, line := range strings.Split(sql, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "--") {
			return true
		}
	}
	return false
}

// An embedded journal migrated while its files were numbered apart from
// PostgreSQL's (the comment-only files did not exist, so every later
// change had a smaller number) is renumbered by name, gets the
// comment-only versions recorded, and applies nothing twice.
func TestSQLiteOldNumberingRenumbered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "whguard.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := raw.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`CREATE TABLE whguard_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
	old := 0
	// The old numbering ended with what is now 0016: later files were
	// numbered with PostgreSQL's from the start.
	applyBefore(t, "migrations/sqlite", 17, func(_ int, name, sql string) {
		if !hasStatement(sql) {
			return // the old numbering had no such file
		}
		old++
		exec(sql)
		exec(`INSERT INTO whguard_schema_migrations VALUES (?, ?, 0)`, old, pad(old)+"_"+strings.SplitN(name, "_", 2)[1])
	})
	raw.Close()
	if old != 13 {
		t.Fatalf("the old numbering ended at %d, want 13", old)
	}
	s, err := journal.OpenSQLite(ctx, journal.SQLiteConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	applied, err := s.Migrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The comment-only versions are recorded; what came after the old
	// numbering is applied as on any journal.
	want := []int{4, 14, 15}
	for v := 17; v <= journal.LatestVersion(); v++ {
		want = append(want, v)
	}
	if !slices.Equal(applied, want) {
		t.Fatalf("applied %v, want the comment-only versions and those after the old numbering %v", applied, want)
	}
	if v, err := s.SchemaVersion(ctx); err != nil || v != journal.LatestVersion() {
		t.Fatalf("schema version %d, %v; want %d", v, err, journal.LatestVersion())
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("not ready after renumbering: %v", err)
	}
	if applied, err := s.Migrate(ctx); err != nil || len(applied) != 0 {
		t.Fatalf("second migrate applied %v, %v", applied, err)
	}
	if r := appendOne(t, s, ev("p", "after", "h")); r.Outcome != journal.Inserted {
		t.Fatalf("append after the upgrade: %+v", r)
	}
}
