package verify

import (
	"crypto/sha256"
	"time"
)

// GitLab webhook headers (GitLab docs, "Webhooks": "Delivery headers" and
// "Validate requests with a secret token").
const (
	gitLabTokenHeader = "X-Gitlab-Token"
	gitLabEventHeader = "X-Gitlab-Event"
	// gitLabIdempotencyHeader: GitLab 17.4+ (merge request 160952), the
	// same value on automatic retries and manual resends of one delivery.
	gitLabIdempotencyHeader = "Idempotency-Key"
	// gitLabEventUUIDHeader: older GitLab; identifies the triggering event
	// (recursion detection), not a delivery: the fallback id.
	gitLabEventUUIDHeader = "X-Gitlab-Event-UUID"
)

// gitLabScheme verifies GitLab's secret token: "X-Gitlab-Token" carries the
// configured token itself, nothing is signed, so the body is authenticated
// only by TLS. (GitLab's newer signing token sends Standard Webhooks
// headers, webhook-id = Idempotency-Key: use scheme "standard" for it.)
type gitLabScheme struct {
	// digests holds SHA-256 of each configured token: comparing digests
	// takes the same time whatever the received token's length or content.
	digests [][sha256.Size]byte
}

var _ Scheme = (*gitLabScheme)(nil)

func newGitLabScheme(cfg ProviderConfig) (Scheme, error) {
	// secretKeys checks the secrets (none empty) and names a bad one.
	if _, err := secretKeys(cfg.Secrets, rawSecret); err != nil {
		return nil, err
	}
	return &gitLabScheme{digests: credentialDigests(cfg.Secrets)}, nil
}

// Verify compares the token with every configured one in constant time; the
// event id is Idempotency-Key, else X-Gitlab-Event-UUID, else "" (Check
// then uses the content digest), and the type X-Gitlab-Event.
func (s *gitLabScheme) Verify(in Input, _ time.Time) (Verified, error) {
	token := in.Header.Get(gitLabTokenHeader)
	if token == "" {
		return Verified{}, missingHeader(gitLabTokenHeader)
	}
	if err := checkHeaderLen(gitLabTokenHeader, token); err != nil {
		return Verified{}, err
	}
	if matchesDigest(token, s.digests) != 1 {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: token does not match", ErrUnauthorized)
	}
	id := in.Header.Get(gitLabIdempotencyHeader)
	if id == "" {
		id = in.Header.Get(gitLabEventUUIDHeader)
	}
	return Verified{ID: id, Type: in.Header.Get(gitLabEventHeader)}, nil
}
