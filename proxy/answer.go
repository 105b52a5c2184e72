package proxy

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/whguard/whguard/verify"
)

// Answering senders: every answer of the ingress goes through reply, which
// counts it.

// refuse answers a request verify refused: 401, 403 or 400 with verify's
// message, which is written to be shown (it never carries a secret or a
// signature value); the reason code says why in a word, for the log and
// the refusals counter. Then the refusal is explained (explain); body is
// the request's body when read is set. A 503 (the provider's key host is
// down) is counted, not explained: the sender retries.
func (in *Ingress) refuse(w http.ResponseWriter, r *http.Request, route *Route, err error, body []byte, read bool, start time.Time) {
	name := route.Provider.Name()
	reason := verify.Reason(err)
	status, result := http.StatusBadRequest, ResultBadRequest
	switch {
	case errors.Is(err, verify.ErrUnauthorized):
		status, result = http.StatusUnauthorized, ResultUnauthorized
	case errors.Is(err, verify.ErrForbidden):
		status, result = http.StatusForbidden, ResultUnauthorized
	case errors.Is(err, verify.ErrUnavailable):
		// The provider's key host is down: the sender retries later,
		// never an unverified 2xx.
		// The cause (the key host's network error) is logged, not shown.
		in.metrics.observeRefusal(name, reason, verify.DiagnosisNone)
		w.Header().Set("Retry-After", "5")
		in.reply(w, name, ResultUnavailable, http.StatusServiceUnavailable, errorBody("verification keys unavailable, retry later"), start,
			zap.String("reason", reason), zap.Error(err))
		return
	}
	in.reply(w, name, result, status, errorBody(err.Error()), start, zap.String("reason", reason))
	in.explain(w, refused{r: r, provider: name, status: status, reason: reason, check: err, route: route, body: body, read: read, start: start})
}

// reply answers and records the request; fields are added to the log line
// of a refusal.
func (in *Ingress) reply(w http.ResponseWriter, provider, result string, status int, body []byte, start time.Time, fields ...zap.Field) {
	in.replyAs(w, provider, result, status, body, "", start, fields...)
}

// replyAs is reply with the body's Content-Type ("" means JSON): a
// handshake or fixed reply the sender needs as text/plain.
func (in *Ingress) replyAs(w http.ResponseWriter, provider, result string, status int, body []byte, contentType string, start time.Time, fields ...zap.Field) {
	h := w.Header()
	h["Content-Type"] = jsonContentType // canonical names, set without a Set's allocation
	if contentType != "" {
		h["Content-Type"] = []string{contentType}
	}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
	in.metrics.observeIngress(provider, result, in.now().Sub(start))
	noteResult(w, result)
	if status >= 400 && status != http.StatusConflict {
		in.log.Info("webhook refused", append([]zap.Field{zap.String("provider", provider), zap.String("result", result), zap.Int("status", status)}, fields...)...)
	}
}

// jsonContentType is every answer's Content-Type value, shared: a header
// value slice of capacity 1, so an Add to it elsewhere copies it first.
var jsonContentType = []string{"application/json"}

// maxLoggedPath bounds the request path in a log line: a path is chosen by
// whoever sends the request.
const maxLoggedPath = 200

// boundedPath returns path cut to maxLoggedPath bytes, never inside a
// UTF-8 sequence.
func boundedPath(path string) string {
	if len(path) <= maxLoggedPath {
		return path
	}
	cut := maxLoggedPath
	for cut > 0 && !utf8.RuneStart(path[cut]) {
		cut--
	}
	return path[:cut]
}

func errorBody(msg string) []byte {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	return b
}
