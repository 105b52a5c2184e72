package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/whguard/whguard/journal"
)

// msgraphScheme is verify.SchemeMSGraph: Microsoft Graph sends its
// credential, the subscription's clientState, in the body of every
// notification (value[].clientState), where the scheme checks it.
const msgraphScheme = "msgraph"

// bodyCredentialKey is the object member whose string values are
// credentials in the body of an msgraph event.
const bodyCredentialKey = "clientState"

// redactsBody tells whether the bodies of an event of provider, journaled
// under scheme, carry a credential: the event was verified as msgraph, or
// its provider is configured with msgraph now.
func (a *api) redactsBody(provider, scheme string) bool {
	return scheme == msgraphScheme || a.schemes[provider] == msgraphScheme
}

// redactDetail hides the body credentials of an event shown by the API.
func (a *api) redactDetail(d *journal.Detail) {
	if !a.redactsBody(d.Provider, d.Scheme) {
		return
	}
	d.Body = string(redactBody([]byte(d.Body)))
	if d.BodyBase64 != nil {
		d.BodyBase64 = redactBody(d.BodyBase64)
	}
}

// copiesShowable prepares the conflicting copies cs of event id for
// showing: their body credentials are hidden when the event's are (the
// copies carry no provider of their own, so the event is read for it).
// It answers the request and returns false when the event cannot be read.
func (a *api) copiesShowable(w http.ResponseWriter, r *http.Request, id int64, cs []journal.ConflictCopy) bool {
	d, err := a.store.Get(r.Context(), id)
	if !a.found(w, err) {
		return false
	}
	if a.redactsBody(d.Provider, d.Scheme) {
		redactCopies(cs)
	}
	return true
}

// redactCopies hides the body credentials of an event's conflicting
// copies, as redactDetail does for the event.
func redactCopies(cs []journal.ConflictCopy) {
	for i := range cs {
		cs[i].Body = string(redactBody([]byte(cs[i].Body)))
		if cs[i].BodyBase64 != nil {
			cs[i].BodyBase64 = redactBody(cs[i].BodyBase64)
		}
	}
}

// redactBody returns body with the string value of every "clientState"
// member, at any depth, replaced by "[redacted]", and every other byte as
// it was (the stored body, forwarded to the backend, is not changed). A
// body that is not JSON cannot be searched reliably, so all of it is
// replaced by Redacted; an empty body stays empty.
func redactBody(body []byte) []byte {
	if len(bytes.TrimSpace(body)) == 0 {
		return body
	}
	spans, err := credentialSpans(body)
	if err != nil {
		return []byte(Redacted)
	}
	if len(spans) == 0 {
		return body
	}
	out := make([]byte, 0, len(body))
	last := 0
	for _, s := range spans {
		out = append(out, body[last:s[0]]...)
		out = append(out, '"')
		out = append(out, Redacted...)
		out = append(out, '"')
		last = s[1]
	}
	return append(out, body[last:]...)
}

// jsonFrame is an open object or array of the walk in credentialSpans.
type jsonFrame struct {
	object bool
	// key: the object's next token is a member name.
	key bool
}

// credentialSpans walks the JSON text body token by token and returns the
// byte spans [start, end) of the string literals (quotes included) that
// are values of a bodyCredentialKey member, in order. Member names are
// compared decoded, so an escaped name is found too. It fails on anything
// but one JSON value.
func credentialSpans(body []byte) ([][2]int, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var (
		stack   []jsonFrame
		spans   [][2]int
		pending bool // the last token was a bodyCredentialKey member name
	)
	// valueDone marks the end of a value: an enclosing object expects a
	// member name next.
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].key = true
		}
	}
	for {
		before := int(dec.InputOffset())
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) != 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return spans, nil
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case json.Delim:
			pending = false
			switch t {
			case '{':
				stack = append(stack, jsonFrame{object: true, key: true})
			case '[':
				stack = append(stack, jsonFrame{})
			default: // '}' or ']'
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].key {
				stack[n-1].key = false
				pending = t == bodyCredentialKey
				continue
			}
			if pending {
				after := int(dec.InputOffset())
				// Between the name and the value there are only blanks
				// and the colon: the first quote opens the value.
				start := before + bytes.IndexByte(body[before:after], '"')
				spans = append(spans, [2]int{start, after})
			}
			pending = false
			valueDone()
		default:
			pending = false
			valueDone()
		}
	}
}
