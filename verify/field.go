package verify

import (
	"github.com/whguard/whguard/internal/fields"
)

// Field names a setting of ProviderConfig. A FieldError carries one, so a
// caller that reads the settings from somewhere (environment variables,
// a file) can point at the one that holds the bad value.
type Field = string

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
	FieldVerifyToken       Field = "VerifyToken"
	FieldBasicAuth         Field = "BasicAuth"
	FieldKeyHosts          Field = "KeyHosts"
	FieldCAFile            Field = "CAFile"
	FieldAudience          Field = "Audience"
	FieldTopicARNs         Field = "TopicARNs"
	FieldServiceAccounts   Field = "ServiceAccounts"
	FieldBackendSecret     Field = "BackendSecret"
)

// FieldError is an invalid ProviderConfig setting. NewProvider's errors
// wrap one FieldError per problem (several joined when there are several);
// find them with errors.As, or list them all with FieldErrors. The message
// says what would be valid and never holds a secret or key. Its Index is,
// for FieldSecrets, the position in Secrets of the bad secret (0 when none
// is set at all).
type FieldError = fields.Error

// fieldErrorf returns a FieldError about f; %w in format wraps as usual.
func fieldErrorf(f Field, format string, a ...any) error {
	return fields.Errorf(f, format, a...)
}

// FieldErrors returns every FieldError in err's tree (errors joined with
// errors.Join, or wrapped with %w), in order.
func FieldErrors(err error) []*FieldError { return fields.All(err) }
