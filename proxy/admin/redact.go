package admin

import (
	"net/http"
	"net/textproto"
)

// Redacted replaces the values of credential headers on every read surface
// (the API, and so the inspector and the CLI).
const Redacted = "[redacted]"

// DefaultRedactedHeaders carry credentials and are never shown: the
// standard credential headers (Authorization also carries Postmark's basic
// auth and Okta's hook secret), and the headers that carry a sender's
// shared token verbatim (GitLab's X-Gitlab-Token and Telegram's
// X-Telegram-Bot-Api-Secret-Token are the webhook secret itself). They are
// still stored and forwarded: a backend that checks them keeps working.
// WHGUARD_REDACT_HEADERS adds to the list. Credentials carried in a body
// (Microsoft Graph's clientState) are hidden by redactBody.
var DefaultRedactedHeaders = []string{
	"Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Gitlab-Token",
	"X-Telegram-Bot-Api-Secret-Token",
}

// redactor hides the values of a set of headers.
type redactor map[string]bool

// newRedactor redacts DefaultRedactedHeaders plus extra.
func newRedactor(extra []string) redactor {
	r := redactor{}
	for _, name := range append(append([]string(nil), DefaultRedactedHeaders...), extra...) {
		if name != "" {
			r[textproto.CanonicalMIMEHeaderKey(name)] = true
		}
	}
	return r
}

// headers returns h with every redacted header's values replaced, as a new
// map (h is not changed).
func (r redactor) headers(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for name, vs := range h {
		if r[textproto.CanonicalMIMEHeaderKey(name)] {
			masked := make([]string, len(vs))
			for i := range masked {
				masked[i] = Redacted
			}
			out[name] = masked
			continue
		}
		out[name] = vs
	}
	return out
}
