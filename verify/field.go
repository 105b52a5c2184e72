package verify

import (
	"fmt"
)

// Field names a setting of ProviderConfig. A FieldError carries one, so a
// caller that reads the settings from somewhere (environment variables,
// a file) can point at the one that holds the bad value.
type Field string

// The settings of ProviderConfig, by their Go names.
const (
	FieldScheme            Field = "Scheme"
	FieldSecrets           Field = "Secrets"
	FieldTolerance         Field = "Tolerance"
	FieldIDHeader          Field = "IDHeader"
	FieldPublicKey         Field = "PublicKey"
	FieldPublicURL         Field = "PublicURL"
	FieldHMACAlgorithm     Field = "HMAC.Algorithm"
	FieldSignatureHeader   Field = "HMAC.SignatureHeader"
	FieldSignatureEncoding Field = "HMAC.Encoding"
	FieldSignaturePrefix   Field = "HMAC.Prefix"
	FieldTimestampHeader   Field = "HMAC.TimestampHeader"
	FieldSignedContent     Field = "HMAC.SignedContent"
)

// FieldError is an invalid ProviderConfig setting. NewProvider's errors
// wrap one FieldError per problem (several joined when there are several);
// find them with errors.As, or walk the joined errors to see them all. The
// message says what would be valid and never holds a secret or key.
type FieldError struct {
	// Field is the setting that holds the bad value.
	Field Field
	// Index is, for FieldSecrets, the position in Secrets of the bad secret
	// (0 when none is set at all); 0 for other fields.
	Index int
	// Err says what is wrong.
	Err error
}

// Error returns the message, without the field's name: callers name the
// setting in their own terms.
func (e *FieldError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// fieldErrorf returns a FieldError about f; %w in format wraps as usual.
func fieldErrorf(f Field, format string, a ...any) error {
	return &FieldError{Field: f, Err: fmt.Errorf(format, a...)}
}

// FieldErrors returns every FieldError in err's tree (errors joined with
// errors.Join, or wrapped with %w), in order.
func FieldErrors(err error) []*FieldError {
	switch e := err.(type) {
	case nil:
		return nil
	case *FieldError:
		return []*FieldError{e}
	case interface{ Unwrap() []error }:
		var out []*FieldError
		for _, inner := range e.Unwrap() {
			out = append(out, FieldErrors(inner)...)
		}
		return out
	case interface{ Unwrap() error }:
		return FieldErrors(e.Unwrap())
	}
	return nil
}
