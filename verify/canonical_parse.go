package verify

// The scanner that turns JSON text into a jsonValue without recursion,
// refusing duplicate keys and excessive depth.

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
)

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
