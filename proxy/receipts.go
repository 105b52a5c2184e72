package proxy

import (
	"context"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/whguard/whguard/journal"
)

// Receipts: what the ingress answered the requests the append could not
// record with the event, recorded once the sender has its answer
// (journal.Receipt): a duplicate, and the first answer of a sync-mode
// sender given the backend's reply. A new event's usual answer goes in
// with its row (journal.Event.Answer): the happy path writes nothing more.

// ReceiptRecorder records receipts (a journal store).
type ReceiptRecorder interface {
	RecordReceipts(ctx context.Context, rs []journal.Receipt) error
}

// answeredWriter remembers the status an answer was written with.
type answeredWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader remembers the first status written.
func (a *answeredWriter) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
	a.ResponseWriter.WriteHeader(code)
}

// Unwrap is the writer a wraps (for the traced request's notes, and
// http.ResponseController).
func (a *answeredWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// Write answers 200 when no status was written before, as net/http does.
func (a *answeredWriter) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.ResponseWriter.Write(b)
}

// receiptOf is the receipt to record for a request whose event had
// outcome, answered with status, when the append did not record it: a
// duplicate; or a new event of a sync-mode sender answered otherwise than
// the append recorded (expected). ok is false when there is none.
func receiptOf(outcome journal.Outcome, id int64, at time.Time, status, expected int) (r journal.Receipt, ok bool) {
	switch {
	case status == 0:
		return r, false
	case outcome == journal.Duplicate:
		return journal.Receipt{ID: id, At: at, Answer: status}, true
	case outcome == journal.Inserted && status != expected:
		return journal.Receipt{ID: id, At: at, Answer: status, First: true}, true
	}
	return r, false
}

// recordReceipt records r after the answer is sent: the sender does not
// wait for it (the recorder batches it, journal.ReceiptWriter, or writes
// it at once when its queue is full). A failure loses that receipt only,
// and is logged.
func (in *Ingress) recordReceipt(w http.ResponseWriter, provider string, r journal.Receipt) {
	_ = http.NewResponseController(w).Flush()
	ctx, cancel := context.WithTimeout(context.Background(), in.timeout)
	defer cancel()
	if err := in.receipts.RecordReceipts(ctx, []journal.Receipt{r}); err != nil {
		in.log.Warn("record a receipt failed", zap.String("provider", provider), zap.Int64("id", r.ID), zap.Error(err))
	}
}
