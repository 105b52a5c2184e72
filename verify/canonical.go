package verify

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

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

// maxExponentDigits bounds the significant digits of a number's exponent, so
// that exponent arithmetic stays exact in an int64 (|e| < 10^18 plus offsets
// bounded by the input length).
const maxExponentDigits = 18

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

// parse states: what the parser expects next.
type parseState uint8

const (
	expectValue        parseState = iota // any value
	expectValueOrClose                   // after '[': a value or ']'
	expectKeyOrClose                     // after '{': a key or '}'
	expectKey                            // after ',' in an object
	expectColon                          // after a key
	expectCommaOrClose                   // after a value inside a container
	expectEnd                            // after the top-level value
)

// frame is an object or array being built: its members or elements are
// jsonParser.members[start:] or jsonParser.elems[start:].
type frame struct {
	object bool
	key    string // pending key of an object member
	start  int
}

// jsonParser is an iterative (non-recursive) JSON parser: its work and
// memory are linear in the input whatever the nesting. It builds values only
// down to MaxDepth; deeper, it only checks the syntax, so that a text that
// is both too deep and malformed is reported as not JSON.
type jsonParser struct {
	b   []byte
	s   string // b as a string, made once: strings and numbers that need no rewriting are slices of it
	i   int
	buf []byte // scratch for strings and number digits

	// members and elems hold the members and elements of every open
	// container, innermost last; a container that closes gets its own
	// exact-size copy (one allocation per container instead of one per
	// growth of its slice).
	members []jsonMember
	elems   []jsonValue

	tooDeep bool // nesting went past MaxDepth: stop building, keep checking syntax
	dupKey  bool // some object repeated a key
}

// parseJSON parses b into a jsonValue (see Canonicalize for the errors).
func parseJSON(b []byte) (jsonValue, error) {
	p := parsers.Get().(*jsonParser)
	p.b, p.s, p.i, p.tooDeep, p.dupKey = b, string(b), 0, false, false
	v, err := p.parse()
	// The values returned own their slices (copies of the scratch) and
	// their strings (slices of p.s, or copies): the scratch can be reused.
	clear(p.members)
	clear(p.elems)
	p.members, p.elems, p.b, p.s = p.members[:0], p.elems[:0], nil, ""
	parsers.Put(p)
	return v, err
}

// parsers recycles the parsers' scratch space across requests.
var parsers = sync.Pool{New: func() any { return new(jsonParser) }}

func (p *jsonParser) syntaxError(what string) error {
	if p.i >= len(p.b) {
		return fmt.Errorf("%w: unexpected end of input, expected %s", ErrNotJSON, what)
	}
	return fmt.Errorf("%w: unexpected byte at offset %d, expected %s", ErrNotJSON, p.i, what)
}

func (p *jsonParser) parse() (jsonValue, error) {
	var (
		root   jsonValue
		frames []frame // open containers, while building (len ≤ MaxDepth)
		kinds  []byte  // open containers at every depth: '{' or '['
		state  = expectValue
	)

	// emit attaches a completed value to its container (or makes it the
	// root) and moves to the state that follows a value.
	emit := func(v jsonValue) {
		if !p.tooDeep {
			if n := len(frames); n == 0 {
				root = v
			} else if f := &frames[n-1]; f.object {
				p.members = append(p.members, jsonMember{key: f.key, val: v})
			} else {
				p.elems = append(p.elems, v)
			}
		}
		if len(kinds) == 0 {
			state = expectEnd
		} else {
			state = expectCommaOrClose
		}
	}

	for {
		p.skipSpace()
		if state == expectEnd {
			if p.i != len(p.b) {
				return jsonValue{}, fmt.Errorf("%w: data after the value at offset %d", ErrNotJSON, p.i)
			}
			break
		}
		if p.i >= len(p.b) {
			return jsonValue{}, p.syntaxError("more JSON")
		}
		c := p.b[p.i]

		closing := false // c closes the innermost container
		switch state {
		case expectColon:
			if c != ':' {
				return jsonValue{}, p.syntaxError("':'")
			}
			p.i++
			state = expectValue
			continue

		case expectCommaOrClose:
			top := kinds[len(kinds)-1]
			switch {
			case c == ',':
				p.i++
				if top == '{' {
					state = expectKey
				} else {
					state = expectValue
				}
				continue
			case (c == '}' && top == '{') || (c == ']' && top == '['):
				closing = true
			default:
				return jsonValue{}, p.syntaxError("',' or the end of the container")
			}

		case expectKeyOrClose, expectKey:
			if c == '}' && state == expectKeyOrClose {
				closing = true
				break
			}
			if c != '"' {
				return jsonValue{}, p.syntaxError("an object key")
			}
			key, err := p.parseString()
			if err != nil {
				return jsonValue{}, err
			}
			if !p.tooDeep {
				frames[len(frames)-1].key = key
			}
			state = expectColon
			continue

		case expectValueOrClose:
			if c == ']' {
				closing = true
			}
		}

		if closing {
			p.i++
			kinds = kinds[:len(kinds)-1]
			if !p.tooDeep {
				f := frames[len(frames)-1]
				frames = frames[:len(frames)-1]
				if f.object {
					ms := slices.Clone(p.members[f.start:])
					clear(p.members[f.start:]) // drop references held by the scratch
					p.members = p.members[:f.start]
					p.sortMembers(ms)
					emit(jsonValue{kind: kindObject, members: ms})
				} else {
					es := slices.Clone(p.elems[f.start:])
					clear(p.elems[f.start:])
					p.elems = p.elems[:f.start]
					emit(jsonValue{kind: kindArray, elems: es})
				}
			} else {
				emit(jsonValue{})
			}
			continue
		}

		// A value (state is expectValue or expectValueOrClose).
		switch {
		case c == '{' || c == '[':
			p.i++
			kinds = append(kinds, c)
			if len(kinds) > MaxDepth {
				p.tooDeep = true
			}
			if !p.tooDeep {
				start := len(p.elems)
				if c == '{' {
					start = len(p.members)
				}
				frames = append(frames, frame{object: c == '{', start: start})
			}
			if c == '{' {
				state = expectKeyOrClose
			} else {
				state = expectValueOrClose
			}
		case c == '"':
			s, err := p.parseString()
			if err != nil {
				return jsonValue{}, err
			}
			emit(jsonValue{kind: kindString, text: s})
		case c == '-' || ('0' <= c && c <= '9'):
			n, err := p.parseNumber()
			if err != nil {
				return jsonValue{}, err
			}
			emit(jsonValue{kind: kindNumber, text: n})
		case c == 't':
			if err := p.literal("true"); err != nil {
				return jsonValue{}, err
			}
			emit(jsonValue{kind: kindTrue})
		case c == 'f':
			if err := p.literal("false"); err != nil {
				return jsonValue{}, err
			}
			emit(jsonValue{kind: kindFalse})
		case c == 'n':
			if err := p.literal("null"); err != nil {
				return jsonValue{}, err
			}
			emit(jsonValue{kind: kindNull})
		default:
			return jsonValue{}, p.syntaxError("a value")
		}
	}

	switch {
	case p.tooDeep:
		return jsonValue{}, fmt.Errorf("%w: more than %d levels", ErrTooDeep, MaxDepth)
	case p.dupKey:
		return jsonValue{}, ErrDuplicateKey
	}
	return root, nil
}

func (p *jsonParser) skipSpace() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) literal(word string) error {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return p.syntaxError(strconv.Quote(word))
	}
	p.i += len(word)
	return nil
}

// sortMembers sorts an object's members by key (UTF-16 order) and notes a
// repeated key.
func (p *jsonParser) sortMembers(ms []jsonMember) {
	slices.SortFunc(ms, func(a, b jsonMember) int { return compareUTF16(a.key, b.key) })
	for i := 1; i < len(ms); i++ {
		if ms[i].key == ms[i-1].key {
			p.dupKey = true
			return
		}
	}
}

// compareUTF16 compares two valid UTF-8 strings by their UTF-16 code units,
// the order RFC 8785 section 3.2.3 prescribes for object keys. It is UTF-8
// byte order except between a character above U+FFFF (lead byte 0xF0-0xF4,
// a high surrogate U+D800-U+DBFF in UTF-16) and one in U+E000-U+FFFF (lead
// byte 0xEE or 0xEF), where the former sorts first although its code point
// is larger. Two characters of different classes differ in their lead
// byte, so the first differing byte decides.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmpInt(len(a), len(b))
	}
	ca, cb := int(a[i]), int(b[i])
	if ca >= 0xEE && cb >= 0xEE && (ca >= 0xF0) != (cb >= 0xF0) {
		if ca >= 0xF0 {
			return -1
		}
		return 1
	}
	return cmpInt(ca, cb)
}

func cmpInt[T ~int | ~int32](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseString reads the string starting at p.b[p.i] (a '"') and returns its
// decoded text. It rejects raw control characters, invalid UTF-8, unknown
// escapes and lone surrogates.
func (p *jsonParser) parseString() (string, error) {
	p.i++ // opening quote
	// Most strings have no escape: they are their own decoded text, a
	// slice of p.s. An escape falls through to decoding into p.buf.
	for j := p.i; j < len(p.b); {
		c := p.b[j]
		if c == '"' {
			out := p.s[p.i:j]
			p.i = j + 1
			if p.tooDeep {
				return "", nil
			}
			return out, nil
		}
		if c == '\\' || c < 0x20 {
			break // decoded (or refused) below
		}
		if c < utf8.RuneSelf {
			j++
			continue
		}
		r, n := utf8.DecodeRune(p.b[j:])
		if r == utf8.RuneError && n == 1 {
			break // refused below, with its offset
		}
		j += n
	}
	p.buf = p.buf[:0]
	for {
		if p.i >= len(p.b) {
			return "", p.syntaxError("the end of the string")
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if p.tooDeep {
				return "", nil // only checking syntax: spare the copy
			}
			return string(p.buf), nil
		case c == '\\':
			if err := p.parseEscape(); err != nil {
				return "", err
			}
		case c < 0x20:
			return "", fmt.Errorf("%w: raw control character in a string at offset %d", ErrNotJSON, p.i)
		case c < utf8.RuneSelf:
			p.buf = append(p.buf, c)
			p.i++
		default:
			r, n := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && n == 1 {
				return "", fmt.Errorf("%w: invalid UTF-8 at offset %d", ErrNotJSON, p.i)
			}
			p.buf = append(p.buf, p.b[p.i:p.i+n]...)
			p.i += n
		}
	}
}

// parseEscape decodes the escape sequence at p.b[p.i] (a '\\') into p.buf.
func (p *jsonParser) parseEscape() error {
	if p.i+1 >= len(p.b) {
		p.i = len(p.b)
		return p.syntaxError("an escape sequence")
	}
	c := p.b[p.i+1]
	var out byte
	switch c {
	case '"', '\\', '/':
		out = c
	case 'b':
		out = '\b'
	case 'f':
		out = '\f'
	case 'n':
		out = '\n'
	case 'r':
		out = '\r'
	case 't':
		out = '\t'
	case 'u':
		r, ok := p.hex4(p.i + 2)
		if !ok {
			return fmt.Errorf("%w: bad \\u escape at offset %d", ErrNotJSON, p.i)
		}
		p.i += 6
		if utf16.IsSurrogate(r) {
			// Only a high surrogate followed by an escaped low one is a
			// character; anything else cannot be written as UTF-8.
			lo, ok := rune(0), false
			if r < 0xDC00 && p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
				lo, ok = p.hex4(p.i + 2)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Errorf("%w: lone surrogate escape at offset %d", ErrNotJSON, p.i-6)
			}
			p.i += 6
			r = utf16.DecodeRune(r, lo)
		}
		p.buf = utf8.AppendRune(p.buf, r)
		return nil
	default:
		p.i++
		return p.syntaxError("an escape character")
	}
	p.buf = append(p.buf, out)
	p.i += 2
	return nil
}

// hex4 reads four hex digits at p.b[at:].
func (p *jsonParser) hex4(at int) (rune, bool) {
	if at+4 > len(p.b) {
		return 0, false
	}
	var r rune
	for _, c := range p.b[at : at+4] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// parseNumber reads the number at p.b[p.i] and returns its canonical text.
//
// The value is kept exactly as sign × digits × 10^exp, with digits free of
// leading and trailing zeros and exp an int64; it is then printed like
// ECMAScript's Number::toString prints a double, but with all the digits.
func (p *jsonParser) parseNumber() (string, error) {
	start := p.i
	neg := false
	if p.b[p.i] == '-' {
		neg = true
		p.i++
	}
	digits := p.buf[:0]

	// Integer part: 0 or [1-9][0-9]*.
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		digits = append(digits, '0')
		p.i++
	case p.i < len(p.b) && '1' <= p.b[p.i] && p.b[p.i] <= '9':
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			digits = append(digits, p.b[p.i])
			p.i++
		}
	default:
		return "", p.syntaxError("a digit")
	}

	// A plain integer other than 0 and -0, up to 21 digits, is already
	// canonical: the literal itself.
	intEnd := p.i
	if digits[0] != '0' && len(digits) <= 21 && (p.i >= len(p.b) || (p.b[p.i] != '.' && p.b[p.i] != 'e' && p.b[p.i] != 'E')) {
		p.buf = digits
		if p.tooDeep {
			return "", nil
		}
		return p.s[start:intEnd], nil
	}

	// Fraction: '.' [0-9]+ ; its digits shift the exponent.
	var exp int64
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		n := 0
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			digits = append(digits, p.b[p.i])
			p.i++
			n++
		}
		if n == 0 {
			return "", p.syntaxError("a digit after '.'")
		}
		exp -= int64(n)
	}

	// Exponent: [eE] [+-]? [0-9]+, at most maxExponentDigits significant.
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		expNeg := false
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			expNeg = p.b[p.i] == '-'
			p.i++
		}
		var e int64
		n, significant := 0, 0
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			if e != 0 || p.b[p.i] != '0' {
				significant++
			}
			if significant <= maxExponentDigits {
				e = e*10 + int64(p.b[p.i]-'0')
			}
			p.i++
			n++
		}
		if n == 0 {
			return "", p.syntaxError("a digit in the exponent")
		}
		if significant > maxExponentDigits {
			return "", fmt.Errorf("%w: number exponent out of range at offset %d", ErrNotJSON, start)
		}
		if expNeg {
			e = -e
		}
		exp += e
	}
	p.buf = digits // keep the grown scratch

	if p.tooDeep {
		return "", nil // only checking syntax
	}

	// Normalize: strip leading zeros, then trailing ones into the exponent.
	i := 0
	for i < len(digits) && digits[i] == '0' {
		i++
	}
	digits = digits[i:]
	if len(digits) == 0 {
		return "0", nil // every zero, -0 included
	}
	j := len(digits)
	for digits[j-1] == '0' {
		j--
	}
	exp += int64(len(digits) - j)
	digits = digits[:j]
	return formatDecimal(neg, digits, exp), nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// formatDecimal prints sign × 0.digits × 10^(exp+len(digits)) the way
// ECMAScript's Number::toString (ECMA-262 section 6.1.6.1.20) lays out a
// number, with digits as given (no leading or trailing zeros). The output
// grows with len(digits) only: zero padding is at most 20 characters.
func formatDecimal(neg bool, digits []byte, exp int64) string {
	k := int64(len(digits))
	n := exp + k // the decimal point sits after n digits
	out := make([]byte, 0, len(digits)+24)
	if neg {
		out = append(out, '-')
	}
	switch {
	case k <= n && n <= 21:
		out = append(out, digits...)
		for range n - k {
			out = append(out, '0')
		}
	case 0 < n && n <= 21:
		out = append(out, digits[:n]...)
		out = append(out, '.')
		out = append(out, digits[n:]...)
	case -6 < n && n <= 0:
		out = append(out, '0', '.')
		for range -n {
			out = append(out, '0')
		}
		out = append(out, digits...)
	default:
		out = append(out, digits[0])
		if k > 1 {
			out = append(out, '.')
			out = append(out, digits[1:]...)
		}
		out = append(out, 'e')
		if n-1 >= 0 {
			out = append(out, '+')
		}
		out = strconv.AppendInt(out, n-1, 10)
	}
	return string(out)
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

// appendString writes s (valid UTF-8) as a JSON string, escaping only '"',
// '\' and control characters below U+0020.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c >= 0x20:
			dst = append(dst, c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	return append(dst, '"')
}
