package verify

import (
	"strconv"
	"time"
)

// Timestamps written other than as unix seconds: unix milliseconds (WorkOS,
// HubSpot) and RFC 3339 (Twitch, Zendesk). Each scheme signs the text as
// received; these parsers only decide whether it is well-formed and when it
// is.

// maxRFC3339Len bounds an RFC 3339 timestamp header: the longest well-formed
// one, "2006-01-02T15:04:05.999999999+07:00", is 35 bytes.
const maxRFC3339Len = len("2006-01-02T15:04:05.999999999+07:00")

// maxMillisDigits bounds a unix-milliseconds timestamp: three digits more
// than seconds are allowed (maxTimestampDigits).
const maxMillisDigits = maxTimestampDigits + 3

// parseRFC3339 parses an RFC 3339 date-time with an optional fraction of
// up to nine digits ("2023-11-14T22:13:20Z", "2023-11-14T22:13:20.123456789Z",
// "…+02:00"), at most maxRFC3339Len bytes. Go's parser is strict about the
// layout (four-digit year, two-digit fields, 'T', a zone), so no other text
// passes.
func parseRFC3339(s string) (time.Time, bool) {
	if s == "" || len(s) > maxRFC3339Len {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// parseUnixMillis parses a timestamp of unix milliseconds: ASCII digits only
// (no sign, no spaces), at most maxMillisDigits of them.
func parseUnixMillis(s string) (int64, bool) {
	if s == "" || len(s) > maxMillisDigits {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	return ms, err == nil
}

// checkTimestampAt is checkTimestamp for a time read at finer grain than
// seconds: at is rounded down to its second, so a timestamp is refused at
// most one second early.
func checkTimestampAt(at, now time.Time, tolerance time.Duration) error {
	return checkTimestamp(at.Unix(), now, tolerance)
}
