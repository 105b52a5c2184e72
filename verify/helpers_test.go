package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// headers builds an http.Header from name, value pairs.
func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func hmacSHA256(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// signStandard returns a "v1,<base64>" Standard Webhooks signature, computed
// here independently of the package (and cross-checked with the official
// library in standard_test.go).
func signStandard(t *testing.T, secret, id string, ts int64, body string) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatalf("test secret: %v", err)
	}
	return "v1," + base64.StdEncoding.EncodeToString(hmacSHA256(key, id, ".", strconv.FormatInt(ts, 10), ".", body))
}

// signStripe returns the hex v1 Stripe signature of body at ts.
func signStripe(secret string, ts int64, body string) string {
	return hex.EncodeToString(hmacSHA256([]byte(secret), strconv.FormatInt(ts, 10), ".", body))
}

// signGitHub returns an X-Hub-Signature-256 value.
func signGitHub(secret, body string) string {
	return "sha256=" + hex.EncodeToString(hmacSHA256([]byte(secret), body))
}

// sha256Hex is the expected digest of b.
func sha256Hex(b string) string {
	sum := sha256.Sum256([]byte(b))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func mustProvider(t *testing.T, cfg ProviderConfig) *Provider {
	t.Helper()
	p, err := NewProvider(cfg)
	if err != nil {
		t.Fatalf("NewProvider: %v", err)
	}
	return p
}

// checkCase is one row of a scheme's table test.
type checkCase struct {
	name    string
	cfg     func(*ProviderConfig) // changes to the base config, may be nil
	header  http.Header
	body    string
	now     time.Time
	wantErr error  // nil: must verify
	wantID  string // checked when wantErr is nil and wantID != ""
	wantMsg string // a substring of the error, when set
}

func runCheckCases(t *testing.T, base ProviderConfig, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.Secrets = append([]string(nil), base.Secrets...)
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			p := mustProvider(t, cfg)
			ev, err := p.Check(Input{Header: tc.header, Body: []byte(tc.body)}, tc.now)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Check: unexpected error %v", err)
				}
				if tc.wantID != "" && ev.ID != tc.wantID {
					t.Errorf("ID = %q, want %q", ev.ID, tc.wantID)
				}
				if !strings.HasPrefix(ev.ContentHash, "sha256:") {
					t.Errorf("ContentHash = %q, want a sha256: digest", ev.ContentHash)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Check error = %v, want %v", err, tc.wantErr)
			}
			other := ErrBadRequest
			if tc.wantErr == ErrBadRequest {
				other = ErrUnauthorized
			}
			if errors.Is(err, other) {
				t.Errorf("error %v wraps both sentinels", err)
			}
			if tc.wantMsg != "" && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
			if !reflect.DeepEqual(ev, Event{}) {
				t.Errorf("event %+v returned with an error", ev)
			}
		})
	}
}
