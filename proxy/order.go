package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/whguard/whguard/internal/fields"
	"github.com/whguard/whguard/journal"
)

// OrderKey says where a provider's events carry the key that orders them
// (WHGUARD_<NAME>_ORDER_KEY): events with the same key value are
// delivered one at a time, in the order received (docs/delivery.md,
// "Per-key order"). The zero value orders nothing.
type OrderKey struct {
	// Pointer is a JSON Pointer (RFC 6901) into the body, e.g.
	// /data/object/id; used when Header is "".
	Pointer string
	// Header names a request header holding the key instead.
	Header string
	// Block keeps a dead event's key held until it is replayed or skipped
	// (ORDER_ON_DEAD=block); otherwise a dead event releases it.
	Block bool
}

// ParseOrderKey reads an ORDER_KEY value: "" (no order), a JSON Pointer
// starting with "/", or "header:<Name>".
func ParseOrderKey(s string) (OrderKey, error) {
	switch {
	case s == "":
		return OrderKey{}, nil
	case strings.HasPrefix(s, "/"):
		for i := 0; i < len(s); i++ {
			// "~" escapes only "~0" (~) and "~1" (/).
			if s[i] == '~' && (i+1 == len(s) || (s[i+1] != '0' && s[i+1] != '1')) {
				return OrderKey{}, fmt.Errorf("%q is not a JSON Pointer: ~ must be followed by 0 or 1", s)
			}
		}
		return OrderKey{Pointer: s}, nil
	case strings.HasPrefix(strings.ToLower(s), "header:"):
		name := s[len("header:"):]
		if !fields.HeaderName(name) {
			return OrderKey{}, fmt.Errorf("%q: header:<Name> needs a header name (letters, digits and !#$%%&'*+-.^_`|~)", s)
		}
		return OrderKey{Header: http.CanonicalHeaderKey(name)}, nil
	}
	return OrderKey{}, errors.New("expected a JSON Pointer into the body (e.g. /data/object/id) or header:<Name>")
}

// On reports whether the provider orders its events.
func (k OrderKey) On() bool { return k.Pointer != "" || k.Header != "" }

// Value returns the event's order key, as the digest the journal stores,
// locks and indexes (journal.OrderKeyDigest): "" when the provider orders
// nothing or the event does not carry the key (it is then unordered). The
// value is the sender's, so it may hold anything (a NUL, invalid UTF-8,
// 60 KB); its digest holds none of it.
func (k OrderKey) Value(h http.Header, body []byte) string {
	var v string
	switch {
	case k.Header != "":
		v = strings.TrimSpace(h.Get(k.Header))
	case k.Pointer != "":
		v, _ = journal.PointerText(body, k.Pointer)
	}
	return journal.OrderKeyDigest(v)
}
