package verify

// The Canonicalize API, the parsed value and its canonical output. The
// scanner is in canonical_parse.go, strings in canonical_string.go,
// numbers in canonical_number.go.

import "errors"

// Errors of Canonicalize. Digest and ContentDigest treat ErrNotJSON as "key
// the raw bytes" and turn the other two into ErrBadRequest.
var (
	// ErrNotJSON: the input is not one JSON text (RFC 8259) in UTF-8, has data
	// after the value, or holds something I-JSON (RFC 7493) forbids and that
	// has no canonical form here: a lone surrogate escape, or a number whose
	// exponent does not fit in 18 decimal digits.
	ErrNotJSON = errors.New("not JSON")
	// ErrDuplicateKey: an object names the same member twice (compared after
	// unescaping, so "a" and "\u0061" are the same key).
	ErrDuplicateKey = errors.New("duplicate object key")
	// ErrTooDeep: objects and arrays nest deeper than MaxDepth.
	ErrTooDeep = errors.New("JSON nested too deeply")
)

// MaxDepth is the deepest nesting of objects and arrays Canonicalize accepts:
// a top-level object or array is depth 1.
const MaxDepth = 64

// Canonicalize returns the canonical form of the JSON text b, in the spirit
// of RFC 8785 (JCS), so that two texts with the same data give the same bytes:
//
//   - no insignificant whitespace;
//   - object members sorted by key, comparing keys as UTF-16 code units as
//     RFC 8785 does (this differs from sorting UTF-8 bytes only for keys
//     mixing characters above U+FFFF with ones in U+E000–U+FFFF);
//   - strings decoded, then written one way: `"` and `\` escaped, control
//     characters below U+0020 written as \b \f \n \r \t or \u00xx, every
//     other character as raw UTF-8;
//   - numbers normalized by exact decimal value, never through float64: the
//     digits without leading or trailing zeros and an integer exponent,
//     printed the way ECMAScript prints numbers (plain notation for decimal
//     exponents from -6 to 20, otherwise d.ddde±n). So 1, 1.0, 1e0, 10e-1
//     and 0.1e1 all give 1, -0 gives 0, and 9007199254740993 stays distinct
//     from 9007199254740992. Unlike RFC 8785 no precision is lost; for every
//     number a float64 holds exactly in its shortest form, the output is the
//     same as RFC 8785's.
//
// Errors wrap ErrNotJSON (syntax, invalid UTF-8, trailing data, lone
// surrogates, out-of-range exponents), ErrTooDeep (valid JSON nested deeper
// than MaxDepth) or ErrDuplicateKey (valid JSON with a repeated key), checked
// in that order over the whole input.
func Canonicalize(b []byte) ([]byte, error) {
	v, err := parseJSON(b)
	if err != nil {
		return nil, err
	}
	return appendCanonical(make([]byte, 0, len(b)), v), nil
}

// jsonKind tells which JSON value a jsonValue holds.
type jsonKind uint8

const (
	kindNull jsonKind = iota
	kindFalse
	kindTrue
	kindNumber
	kindString
	kindArray
	kindObject
)

// jsonValue is one parsed JSON value. Strings hold their decoded text,
// numbers their canonical text, objects their members sorted by key.
type jsonValue struct {
	kind    jsonKind
	text    string
	elems   []jsonValue
	members []jsonMember
}

// jsonMember is one member of an object.
type jsonMember struct {
	key string
	val jsonValue
}

// field returns the object member named key, if v is an object that has one.
func (v jsonValue) field(key string) (jsonValue, bool) {
	if v.kind != kindObject {
		return jsonValue{}, false
	}
	for _, m := range v.members {
		if m.key == key {
			return m.val, true
		}
	}
	return jsonValue{}, false
}

// stringField returns the string member named key of the object v.
func (v jsonValue) stringField(key string) (string, bool) {
	f, ok := v.field(key)
	if !ok || f.kind != kindString {
		return "", false
	}
	return f.text, true
}

// appendCanonical writes v in canonical form. Its recursion is bounded by
// MaxDepth, which parseJSON enforces.
func appendCanonical(dst []byte, v jsonValue) []byte {
	switch v.kind {
	case kindNull:
		return append(dst, "null"...)
	case kindFalse:
		return append(dst, "false"...)
	case kindTrue:
		return append(dst, "true"...)
	case kindNumber:
		return append(dst, v.text...)
	case kindString:
		return appendString(dst, v.text)
	case kindArray:
		dst = append(dst, '[')
		for i, e := range v.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonical(dst, e)
		}
		return append(dst, ']')
	default: // kindObject, members already sorted
		dst = append(dst, '{')
		for i, m := range v.members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, m.key)
			dst = append(dst, ':')
			dst = appendCanonical(dst, m.val)
		}
		return append(dst, '}')
	}
}
