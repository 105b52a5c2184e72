package journal

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

// TestEachRowReportsAFailedIteration runs a real SQLite statement that
// fails at its third row (json_extract of malformed JSON fails when the
// row is stepped, not when the statement is prepared). A plain rows.Next
// loop sees two rows and no error; eachRow must report the failure.
func TestEachRowReportsAFailedIteration(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "rows.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const q = `SELECT json_extract(j, '$.a') FROM (SELECT '{"a":1}' AS j UNION ALL SELECT '{"a":2}' UNION ALL SELECT 'not json')`
	rows, err := db.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var (
		v    int
		seen []int
	)
	err = eachRow(rows, func() error {
		seen = append(seen, v)
		return nil
	}, &v)
	if err == nil {
		t.Fatalf("eachRow saw %v and no error; the third row fails", seen)
	}
	if len(seen) != 2 {
		t.Fatalf("rows before the failure: %v, want 2", seen)
	}
}
