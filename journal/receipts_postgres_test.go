package journal_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/journal/journaltest"
)

// A batch of receipts that names an event being deleted (retention) while
// it runs records the others and skips that one: it waits for the delete,
// and neither fails on the foreign key nor loses the batch.
func TestReceiptsBatchSkipsAnEventDeletedMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.OpenStore(t, "postgres", true).(*journal.Postgres)
	kept := journaltest.AppendOne(t, s, journaltest.Event("p", "kept", "h")).ID
	gone := journaltest.AppendOne(t, s, journaltest.Event("p", "gone", "h")).ID
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `DELETE FROM whguard_events WHERE id = $1`, gone); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- s.RecordReceipts(ctx, []journal.Receipt{
			{ID: kept, At: time.Now(), Answer: http.StatusOK}, {ID: gone, At: time.Now(), Answer: http.StatusOK},
			{ID: gone, Answer: http.StatusAccepted, First: true}})
	}()
	waitForLockWait(t, s, "the receipts to wait for the delete")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("record receipts: %v", err)
	}
	counted := -1
	for _, e := range journaltest.Get(t, s, kept).Timeline {
		if e.Kind == journal.TimelineReceived {
			counted = e.Duplicates
		}
	}
	if counted != 1 {
		t.Errorf("the kept event's received entry counts %d duplicates, want its one", counted)
	}
}
