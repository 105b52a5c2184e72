package journal

import (
	"strings"
	"unicode/utf8"
)

// maxErrorBytes bounds a stored error summary (last_error, an attempt's
// error class).
const maxErrorBytes = 1024

// storableText makes s safe for a text column of either store and at most
// max bytes long: invalid UTF-8 becomes U+FFFD and NUL bytes become the
// four characters `\x00` (PostgreSQL refuses NUL in text with SQLSTATE
// 22021; a backend's reply excerpt is arbitrary bytes and once failed
// whole batches of outcomes). The cut falls on a character boundary.
func storableText(s string, max int) string {
	if len(s) > max*4 {
		s = s[:max*4] // bound the work below; at most 4 bytes per character
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", `\x00`)
	}
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// storable returns f with its text fields made storable (storableText).
func (f Finish) storable() Finish {
	f.LastError = storableText(f.LastError, maxErrorBytes)
	f.Attempt.Error = storableText(f.Attempt.Error, maxErrorBytes)
	f.Attempt.ResponseExcerpt = storableText(f.Attempt.ResponseExcerpt, MaxExcerptBytes)
	return f
}
