package verify

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// GitHub's headers (docs: "Validating webhook deliveries", "Webhook events
// and payloads"). The legacy SHA-1 X-Hub-Signature is not accepted.
const (
	githubSignatureHeader = "X-Hub-Signature-256"
	githubDeliveryHeader  = "X-GitHub-Delivery" // kept on redelivery
	githubEventHeader     = "X-GitHub-Event"
	githubSignaturePrefix = "sha256="
)

// githubScheme verifies GitHub: "X-Hub-Signature-256: sha256=<hex>" where the
// hex is HMAC-SHA256(secret, body), the secret used as raw bytes. GitHub
// signs no timestamp, so replays are bounded only by deduplication.
type githubScheme struct {
	keys [][]byte
}

var _ Scheme = (*githubScheme)(nil)

// Verify checks the signature; the event id is X-GitHub-Delivery ("" if
// absent, so Check falls back to the digest) and the type X-GitHub-Event.
func (s *githubScheme) Verify(in Input, _ time.Time) (Verified, error) {
	header := in.Header.Get(githubSignatureHeader)
	if header == "" {
		return Verified{}, missingHeader(githubSignatureHeader)
	}
	if err := checkHeaderLen(githubSignatureHeader, header); err != nil {
		return Verified{}, err
	}
	sig, err := parseGitHubSignature(header)
	if err != nil {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: %w", ErrUnauthorized, githubSignatureHeader, err)
	}
	if !anyKeyMatches(s.keys, []signature{sig}, nil, in.Body) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}
	return Verified{ID: in.Header.Get(githubDeliveryHeader), Type: in.Header.Get(githubEventHeader)}, nil
}

// parseGitHubSignature reads "sha256=" followed by 64 hex digits.
func parseGitHubSignature(header string) (signature, error) {
	var sig signature
	return sig, decodePrefixedHex(header, githubSignaturePrefix, sig[:])
}

// decodePrefixedHex reads prefix followed by exactly the hex digits of
// len(dst) bytes into dst (the X-Hub-Signature family: GitHub, Intercom).
func decodePrefixedHex(header, prefix string, dst []byte) error {
	value, ok := strings.CutPrefix(header, prefix)
	if !ok {
		return errors.New("expected the " + prefix + " prefix")
	}
	if len(value) != hex.EncodedLen(len(dst)) {
		return fmt.Errorf("expected %d hex digits", hex.EncodedLen(len(dst)))
	}
	if _, err := hex.Decode(dst, []byte(value)); err != nil {
		return fmt.Errorf("expected %d hex digits", hex.EncodedLen(len(dst)))
	}
	return nil
}
