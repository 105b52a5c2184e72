package admin

import (
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/whguard/whguard/journal"
)

// filterFields are the event filters GET /api/events takes as query
// parameters and POST /api/replay as JSON fields, under the same names.
type filterFields struct {
	Status   string   `json:"status"`
	Provider string   `json:"provider"`
	EventID  string   `json:"event_id"`
	Type     string   `json:"type"`
	Since    string   `json:"since"`
	Until    string   `json:"until"`
	Match    []string `json:"match"`
}

// queryFilter reads the filter fields of a query string.
func queryFilter(q url.Values) filterFields {
	return filterFields{
		Status: q.Get("status"), Provider: q.Get("provider"), EventID: q.Get("event_id"),
		Type: q.Get("type"), Since: q.Get("since"), Until: q.Get("until"), Match: q["match"],
	}
}

// filter checks the fields and turns them into a journal filter: event_id
// is exact (a trailing * makes it a prefix), type a comma list with *
// wildcards, since and until RFC 3339 times (since inclusive, until
// exclusive), each match POINTER=VALUE with an RFC 6901 pointer. Its
// errors are written to be shown.
func (ff filterFields) filter(providers []string) (journal.Filter, error) {
	f := journal.Filter{Status: journal.Status(ff.Status), Provider: ff.Provider}
	for _, v := range append([]string{ff.Status, ff.Provider, ff.EventID, ff.Type, ff.Since, ff.Until}, ff.Match...) {
		if !cleanText(v) {
			return f, errors.New("filters must be UTF-8 text without control characters")
		}
	}
	if !validStatus[f.Status] {
		return f, errors.New("status must be pending, processing, done, retry, dead or ignored")
	}
	if ff.EventID != "" {
		f.EventID, f.EventIDPrefix = strings.CutSuffix(ff.EventID, "*")
		f.Providers = providers
	}
	for _, t := range strings.Split(ff.Type, ",") {
		if t = strings.TrimSpace(t); t != "" {
			f.Types = append(f.Types, t)
		}
	}
	var err error
	if f.Since, err = rfc3339(ff.Since); err != nil {
		return f, errors.New("since must be an RFC 3339 time, e.g. 2026-12-01T09:00:00Z")
	}
	if f.Until, err = rfc3339(ff.Until); err != nil {
		return f, errors.New("until must be an RFC 3339 time, e.g. 2026-12-01T18:00:00Z")
	}
	if len(ff.Match) > 10 {
		return f, errors.New("at most 10 match conditions")
	}
	for _, m := range ff.Match {
		cond, ok := journal.ParseMatch(m)
		if !ok {
			return f, errors.New("match must be JSON-Pointer=value, e.g. /data/object/customer=cus_123")
		}
		if credentialPointer(cond.Pointer) {
			// A match would confirm a guessed credential that every read
			// surface shows as [redacted].
			return f, errors.New("match cannot search clientState: it is a credential (Microsoft Graph)")
		}
		f.Match = append(f.Match, cond)
	}
	return f, nil
}

// credentialPointer tells whether a JSON Pointer names a body member that
// carries a credential (Microsoft Graph's clientState, redacted in bodies).
func credentialPointer(ptr string) bool {
	i := strings.LastIndexByte(ptr, '/')
	return strings.EqualFold(ptr[i+1:], "clientState")
}

func rfc3339(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339, s)
}
