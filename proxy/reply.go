package proxy

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/whguard/whguard/journal"
)

// Answering a sync-mode sender with the backend's stored reply
// (docs/backend.md, "Sync replies").

// awaitReply waits until deadline for the stored reply of a sync event
// and says how the wait ended (syncReplied with the reply, or syncTimeout,
// syncNoReply). Not waiting longer never stops the delivery. It does not
// stop when the request's context ends: the server ends it when the
// sender closes its side of the connection, which a sender that
// half-closes after its request does while it still waits for the
// answer; a sender that is gone costs a wait of at most the sync timeout.
func (in *Ingress) awaitReply(answer <-chan *journal.Reply, deadline time.Time) (*journal.Reply, string) {
	timer := time.NewTimer(deadline.Sub(in.now()))
	defer timer.Stop()
	select {
	case reply := <-answer:
		if reply == nil {
			return nil, syncNoReply
		}
		return reply, syncReplied
	case <-timer.C:
		return nil, syncTimeout
	}
}

// replyStoredDuplicate answers a duplicate of a sync-mode event with the
// reply stored with it, when there is one (what the first sender got, or
// would have, had it waited), and reports whether it answered (a journal
// that does not answer is a 503). Without a stored reply (the first
// delivery still runs, failed, or answered too much to store) the caller
// sends the acknowledgement.
func (in *Ingress) replyStoredDuplicate(ctx context.Context, w http.ResponseWriter, name string, id int64, start time.Time) bool {
	stored, err := in.replies.StoredReply(ctx, id)
	if err != nil {
		in.log.Warn("read stored reply failed", zap.String("provider", name), zap.Int64("id", id), zap.Error(err))
		w.Header().Set("Retry-After", "5")
		in.reply(w, name, ResultUnavailable, http.StatusServiceUnavailable, errorBody("journal unavailable, retry later"), start)
		return true
	}
	if stored == nil {
		return false
	}
	in.metrics.observeSync(name, syncStored)
	in.replyStored(w, name, ResultDuplicate, stored, start)
	return true
}

// replyStored answers with a stored sync reply: its status, Content-Type
// and body, nothing else of the backend's answer.
func (in *Ingress) replyStored(w http.ResponseWriter, provider, result string, r *journal.Reply, start time.Time) {
	if r.ContentType != "" {
		w.Header().Set("Content-Type", r.ContentType)
	} else {
		w.Header()["Content-Type"] = nil // none, as the backend sent: no sniffing
	}
	if r.Status == http.StatusNoContent || r.Status == http.StatusResetContent {
		// No body allowed (RFC 9110 15.3.5, 15.3.6).
		w.WriteHeader(r.Status)
	} else {
		w.Header().Set("Content-Length", fmt.Sprint(len(r.Body)))
		w.WriteHeader(r.Status)
		_, _ = w.Write(r.Body)
	}
	in.metrics.observeIngress(provider, result, in.now().Sub(start))
	noteResult(w, result)
}
