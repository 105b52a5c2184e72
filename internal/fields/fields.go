// Package fields reports invalid settings by the Go name of the field that
// holds them, so that each component states its configuration rules once
// and each caller names the setting in its own terms: cmd/whguard maps the
// fields to the WHGUARD_* variables that fill them.
//
// A component's Validate returns an error joining one *Error per problem
// (errors.Join); All lists them. A message names another setting as
// {Field} (its Go name, dotted for a nested one: {Policy.BaseDelay}), so
// that Message can put the caller's name for it there.
package fields

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"

	"golang.org/x/net/http/httpguts"
)

// Error is one invalid setting. Its message says what would be valid and
// never holds a secret.
type Error struct {
	// Field is the Go name of the setting, dotted for a nested one
	// ("Policy.MaxDelay"), with the key for an element of a map or a
	// slice ("Routes[2].Path", "Targets[stripe].BackendURL").
	Field string
	// Index is the position of the bad value within a field that holds
	// several (a list of secrets); 0 otherwise.
	Index int
	// Err says what is wrong.
	Err error
}

// Error returns the message, without the field's name (callers name the
// setting in their own terms), references to other settings by Go name.
func (e *Error) Error() string { return e.Message(func(f string) string { return f }) }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// refRE matches a reference to another setting in a message: {Name} or
// {Outer.Inner}, starting with an upper-case letter (lower-case braces,
// such as a signed-content template's {body}, are left alone).
var refRE = regexp.MustCompile(`\{([A-Z][A-Za-z0-9]*(?:\[[^\]]*\])?(?:\.[A-Z][A-Za-z0-9]*)*)\}`)

// Message returns the message with each reference to another setting
// replaced by name(field).
func (e *Error) Message(name func(field string) string) string {
	return refRE.ReplaceAllStringFunc(e.Err.Error(), func(ref string) string {
		return name(ref[1 : len(ref)-1])
	})
}

// Errorf returns an *Error about field; %w in format wraps as usual.
func Errorf(field, format string, a ...any) *Error {
	return &Error{Field: field, Err: fmt.Errorf(format, a...)}
}

// All returns every *Error in err's tree (errors joined with errors.Join,
// or wrapped with %w), in order.
func All(err error) []*Error {
	switch e := err.(type) {
	case nil:
		return nil
	case *Error:
		return []*Error{e}
	case interface{ Unwrap() []error }:
		var out []*Error
		for _, inner := range e.Unwrap() {
			out = append(out, All(inner)...)
		}
		return out
	case interface{ Unwrap() error }:
		return All(e.Unwrap())
	}
	return nil
}

// Nest returns err's field errors with their fields (and the references
// in their messages) put under prefix: a nested config's Validate speaks
// of its own fields, the outer one of "Policy.MaxDelay". Errors that are
// not field errors are kept as they are.
func Nest(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range flatten(err) {
		fe, ok := e.(*Error)
		if !ok {
			out = append(out, e)
			continue
		}
		msg := refRE.ReplaceAllStringFunc(fe.Err.Error(), func(ref string) string {
			return "{" + prefix + "." + ref[1:len(ref)-1] + "}"
		})
		out = append(out, &Error{Field: prefix + "." + fe.Field, Index: fe.Index, Err: wrapped{msg: msg, err: fe.Err}})
	}
	return errors.Join(out...)
}

// Key returns the field name of the element key of a map or slice field:
// Key("Routes", 2) is "Routes[2]".
func Key[K string | int](field string, key K) string {
	switch k := any(key).(type) {
	case int:
		return field + "[" + strconv.Itoa(k) + "]"
	default:
		return field + "[" + k.(string) + "]"
	}
}

// flatten lists the errors joined in err (err alone when it joins none).
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// wrapped is an error with a rewritten message that still unwraps to the
// original.
type wrapped struct {
	msg string
	err error
}

func (w wrapped) Error() string { return w.msg }
func (w wrapped) Unwrap() error { return w.err }

// HeaderName reports whether s is a valid HTTP header field name (an RFC
// 9110 token).
func HeaderName(s string) bool { return httpguts.ValidHeaderFieldName(s) }

// HeaderNameHint says what HeaderName accepts.
const HeaderNameHint = "letters, digits and !#$%&'*+-.^_`|~"

// HTTPURL checks that s is an absolute http or https URL with a host. The
// error does not quote s: a URL may hold a password or a token.
func HTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("is not an http(s) URL (expected http://host[:port][/path][?query])")
	}
	return nil
}
