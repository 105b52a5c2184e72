package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// digestPrefix starts every digest this package returns.
const digestPrefix = "sha256:"

// Digest returns the event id of a body that carries none (docs/ingress.md):
// "sha256:" + hex of the SHA-256 of
//
//   - for a form post (Content-Type application/x-www-form-urlencoded): its
//     parameters sorted by name, repeated names keeping their order, and
//     re-encoded, so reordered parameters give the same digest;
//   - for a JSON body: its canonical form (Canonicalize);
//   - for anything else (ErrNotJSON): the raw bytes.
//
// A form body that does not parse, or JSON with a duplicate key or nested
// deeper than MaxDepth, gives an error wrapping ErrBadRequest.
func Digest(header http.Header, body []byte) (string, error) {
	return ContentDigest(header, body, nil)
}

// ContentDigest is Digest computed after removing the volatile top-level
// members of a JSON object body: the fields a sender changes between
// redeliveries of one event. An entry "[].name" names a member of each
// item of a top-level array body instead, and is left out of the body's
// digest key too (a batch has no id of its own). Form and raw bodies are
// hashed as Digest does.
func ContentDigest(header http.Header, body []byte, volatile []string) (string, error) {
	d, err := digestBody(header, body, volatile)
	return d.content, err
}

// bodyDigests is what one parse of a body yields: the content hash (with
// volatile fields removed), the plain digest (the key when the scheme has
// no id), and the top-level "type" of a JSON object.
type bodyDigests struct {
	content, plain, typ string
}

// digestBody parses the body once and derives every digest from it.
func digestBody(header http.Header, body []byte, volatile []string) (bodyDigests, error) {
	if isForm(header) {
		values, err := url.ParseQuery(string(body))
		if err != nil {
			// url's error quotes the offending bytes: keep them out of the
			// answer (error bodies never echo the payload).
			return bodyDigests{}, refusef(ReasonMalformedBody, "%w: form body unparseable", ErrBadRequest)
		}
		// Encode sorts by name and keeps each name's values in their order:
		// a stable sort, so reordered parameters are the same event.
		h := hashBytes([]byte(values.Encode()))
		return bodyDigests{content: h, plain: h}, nil
	}
	v, err := parseJSON(body)
	switch {
	case errors.Is(err, ErrNotJSON):
		h := hashBytes(body)
		return bodyDigests{content: h, plain: h}, nil
	case err != nil:
		return bodyDigests{}, refusef(ReasonMalformedBody, "%w: body unparseable: %w", ErrBadRequest, err)
	}
	var d bodyDigests
	if v.kind == kindObject {
		d.typ, _ = v.stringField("type")
	}
	if v.kind == kindArray {
		v = withoutItemFields(v, volatile)
	}
	buf := appendCanonical(make([]byte, 0, len(body)), v)
	d.plain = hashBytes(buf)
	d.content = d.plain
	if len(volatile) > 0 && v.kind == kindObject {
		kept := slices.DeleteFunc(slices.Clone(v.members), func(m jsonMember) bool {
			return slices.Contains(volatile, m.key)
		})
		if len(kept) != len(v.members) {
			v.members = kept
			d.content = hashBytes(appendCanonical(buf[:0], v))
		}
	}
	return d, nil
}

// itemVolatilePrefix marks a volatile field of each item of a body that is
// a top-level array (a batch, such as HubSpot's): "[].attemptNumber".
const itemVolatilePrefix = "[]."

// withoutItemFields returns the array v with each object item's members
// named by a "[]."-prefixed volatile entry removed. A batch has no id of
// its own, so its key is its digest: such a field is left out of the key
// as well as the content hash, or each redelivery would be a new event.
func withoutItemFields(v jsonValue, volatile []string) jsonValue {
	var names []string
	for _, f := range volatile {
		if name, ok := strings.CutPrefix(f, itemVolatilePrefix); ok {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return v
	}
	elems := slices.Clone(v.elems)
	for i, e := range elems {
		if e.kind == kindObject {
			e.members = slices.DeleteFunc(slices.Clone(e.members), func(m jsonMember) bool { return slices.Contains(names, m.key) })
			elems[i] = e
		}
	}
	v.elems = elems
	return v
}

// isForm tells whether the Content-Type is application/x-www-form-urlencoded
// (any parameters, any case).
func isForm(header http.Header) bool {
	mediaType, _, _ := strings.Cut(header.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(mediaType), "application/x-www-form-urlencoded")
}

func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return digestPrefix + hex.EncodeToString(sum[:])
}
