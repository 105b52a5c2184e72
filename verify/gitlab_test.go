package verify

import (
	"strings"
	"testing"
	"time"
)

const (
	glToken      = "gl-hook-token-2024"
	glOtherToken = "gl-hook-token-2023"
	glBody       = `{"object_kind":"push","event_name":"push","ref":"refs/heads/main","checkout_sha":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7","project_id":15}`
	glIdemKey    = "908a6d9e-45fd-46c8-97e6-c4f350f219dd"
	glEventUUID  = "9cbb2b8f-8b8d-4b19-93d6-2d8c3e0c9c1e"
)

func TestGitLabCheck(t *testing.T) {
	now := time.Unix(1700000000, 0)
	h := func(token string, extra ...string) []string {
		return append([]string{"X-Gitlab-Token", token, "X-Gitlab-Event", "Push Hook"}, extra...)
	}
	const typ = "Push Hook"
	base := ProviderConfig{Name: "gl", Scheme: SchemeGitLab, Secrets: []string{glToken}}
	runCasesB(t, base, []caseB{
		{name: "valid, Idempotency-Key is the id", header: headers(h(glToken, "Idempotency-Key", glIdemKey, "X-Gitlab-Event-UUID", glEventUUID)...),
			body: glBody, now: now, wantID: glIdemKey, wantType: typ},
		{name: "older GitLab: X-Gitlab-Event-UUID", header: headers(h(glToken, "X-Gitlab-Event-UUID", glEventUUID)...),
			body: glBody, now: now, wantID: glEventUUID, wantType: typ},
		{name: "neither: content digest", header: headers(h(glToken)...), body: glBody, now: now, wantID: "digest", wantType: typ},
		{name: "no event header: no type", header: headers("X-Gitlab-Token", glToken), body: glBody, now: now, wantID: "digest"},
		{name: "no timestamp: any clock", header: headers(h(glToken)...), body: glBody, now: time.Unix(0, 0), wantType: typ},
		{name: "wrong token", header: headers(h(glOtherToken)...), body: glBody, now: now, wantErr: ErrUnauthorized, wantMsg: "token does not match"},
		{name: "token prefix", header: headers(h(glToken[:len(glToken)-1])...), body: glBody, now: now, wantErr: ErrUnauthorized},
		{name: "token with a suffix", header: headers(h(glToken + "x")...), body: glBody, now: now, wantErr: ErrUnauthorized},
		{name: "token case differs", header: headers(h(strings.ToUpper(glToken))...), body: glBody, now: now, wantErr: ErrUnauthorized},
		{name: "secret taken verbatim (trailing space)", cfg: func(c *ProviderConfig) { c.Secrets = []string{glToken + " "} },
			header: headers(h(glToken)...), body: glBody, now: now, wantErr: ErrUnauthorized},
		{name: "rotated: second token matches", cfg: func(c *ProviderConfig) { c.Secrets = []string{glOtherToken, glToken} },
			header: headers(h(glToken, "Idempotency-Key", glIdemKey)...), body: glBody, now: now, wantID: glIdemKey, wantType: typ},
		{name: "rotated: first token matches", cfg: func(c *ProviderConfig) { c.Secrets = []string{glToken, glOtherToken} },
			header: headers(h(glToken)...), body: glBody, now: now, wantType: typ},
		// GitLab signs nothing: the body is authenticated only by TLS.
		{name: "tampered body still passes (the token signs nothing)", header: headers(h(glToken, "Idempotency-Key", glIdemKey)...),
			body: strings.Replace(glBody, "main", "evil", 1), now: now, wantID: glIdemKey, wantType: typ},
		{name: "missing token", header: headers("X-Gitlab-Event", typ, "Idempotency-Key", glIdemKey), body: glBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing X-Gitlab-Token header"},
		{name: "token in another header", header: headers("Authorization", "Bearer "+glToken), body: glBody, now: now, wantErr: ErrBadRequest},
		{name: "token too long", header: headers(h(glToken + strings.Repeat("x", maxSignatureHeaderLen))...), body: glBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "longer than"},
		{name: "id header overrides", cfg: func(c *ProviderConfig) { c.IDHeader = "X-Gitlab-Webhook-UUID" },
			header: headers(h(glToken, "Idempotency-Key", glIdemKey, "X-Gitlab-Webhook-UUID", "w-1")...), body: glBody, now: now, wantID: "w-1", wantType: typ},
		{name: "control characters in Idempotency-Key", header: headers(h(glToken, "Idempotency-Key", "a\x01b")...), body: glBody, now: now,
			wantErr: ErrBadRequest},
	})
}

func TestGitLabConstructorErrors(t *testing.T) {
	for _, secrets := range [][]string{nil, {glToken, ""}} {
		_, err := NewProvider(ProviderConfig{Name: "gl", Scheme: SchemeGitLab, Secrets: secrets})
		if err == nil || !strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), glToken) {
			t.Errorf("secrets %d: err = %v", len(secrets), err)
		}
	}
}
