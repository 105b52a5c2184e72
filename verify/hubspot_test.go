package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	hubspotURL = "https://hooks.example.com/webhooks/hubspot"
	// hubspotVector is the computed vector: POST hubspotURL, ringBody, ts
	// 1700000000000 ms.
	hubspotVector = "y6KsjbHDLgFlOGLvGVLGJ5t1+I0JzXFveuMA1J4EJDc="
	// The published v3 vectors: hubspot-api-python
	// tests/spec/utils/test_signature.py signs this body (not JSON) for POST
	// https://www.example.com/webhook_uri with this secret; the test has
	// carried both timestamps.
	hubspotSDKSecret = "yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy"
	hubspotSDKURL    = "https://www.example.com/webhook_uri"
	hubspotSDKBody   = "{'example_field':'example_value'}"
	// hubspotBatch is the request body of HubSpot's v1 example ("Validating
	// requests", v1 request signature examples): a batch of one event.
	hubspotBatch = `[{"eventId":1,"subscriptionId":12345,"portalId":62515,"occurredAt":1564113600000,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123,"changeSource":"CRM","changeFlag":"NEW","appId":54321}]`
)

// signHubSpot returns an X-HubSpot-Signature-v3 value for the signed URI
// uri, computed here independently of the package.
func signHubSpot(secret, method, uri, body, ts string) string {
	return base64.StdEncoding.EncodeToString(hmacSHA256([]byte(secret), method, uri, body, ts))
}

func hubspotHeaders(sig, ts string) http.Header {
	return headers("X-HubSpot-Signature-v3", sig, "X-HubSpot-Request-Timestamp", ts, "Content-Type", "application/json")
}

// The published SDK vectors, through the public path.
func TestHubSpotPublishedVectors(t *testing.T) {
	p := mustProvider(t, ProviderConfig{Name: "hubspot", Scheme: SchemeHubSpot, Secrets: []string{hubspotSDKSecret}, PublicURL: hubspotSDKURL})
	for ts, sig := range map[int64]string{
		1693657560000: "K36dawei4A+QBNolUOqo7s91KQDWQ5MXZ/QufNYuk/Y=",
		15000000:      "HPW73RUtKmcYoEDADG0s6MmGFWUzWJKAW07r8RDgcQw=",
	} {
		h := hubspotHeaders(sig, strconv.FormatInt(ts, 10))
		ev, err := p.Check(Input{Header: h, Body: []byte(hubspotSDKBody)}, time.UnixMilli(ts))
		if err != nil || ev.ID != sha256Hex(hubspotSDKBody) {
			t.Errorf("ts %d: %+v, %v; want the raw digest of the (non-JSON) body", ts, ev, err)
		}
	}
}

// HubSpot's v1 example is reproduced, and refused: v1 signs no time.
func TestHubSpotNeverV1(t *testing.T) {
	const v1 = "232db2615f3d666fe21a8ec971ac7b5402d33b9a925784df3ca654d05f4817de"
	if sum := sha256.Sum256([]byte(hubspotSDKSecret + hubspotBatch)); hex.EncodeToString(sum[:]) != v1 {
		t.Fatalf("v1 example not reproduced: %x", sum)
	}
	p := mustProvider(t, ProviderConfig{Name: "hubspot", Scheme: SchemeHubSpot, Secrets: []string{hubspotSDKSecret}, PublicURL: hubspotSDKURL})
	h := headers("X-HubSpot-Signature", v1, "X-HubSpot-Signature-Version", "v1", "X-HubSpot-Request-Timestamp", "1564113600000")
	_, err := p.Check(Input{Header: h, Body: []byte(hubspotBatch)}, time.UnixMilli(1564113600000))
	if !errors.Is(err, ErrBadRequest) || Reason(err) != ReasonMissingHeader || !strings.Contains(err.Error(), "not accepted") {
		t.Errorf("v1 only: %v; want the v3 header missing", err)
	}
}

func TestHubSpotCheck(t *testing.T) {
	now := time.Unix(ringUnix, 0)
	ts := "1700000000000"
	base := ProviderConfig{Name: "hubspot", Scheme: SchemeHubSpot, Secrets: []string{ringSecret}, PublicURL: hubspotURL}
	canonical, err := Canonicalize([]byte(ringBody))
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256Hex(string(canonical))
	h := func(sig string) http.Header { return hubspotHeaders(sig, ts) }
	runCheckCases(t, base, []checkCase{
		{name: "vector", header: h(hubspotVector), body: ringBody, now: now, wantID: digest},
		{name: "tampered body", header: h(hubspotVector), body: ringBody + "\n", now: now, wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "another URL", cfg: func(c *ProviderConfig) { c.PublicURL = hubspotURL + "/" }, header: h(hubspotVector), body: ringBody, now: now,
			wantErr: ErrUnauthorized},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{hubspotSDKSecret} }, header: h(hubspotVector), body: ringBody, now: now,
			wantErr: ErrUnauthorized},
		{name: "rotation: the previous secret signs", cfg: func(c *ProviderConfig) { c.Secrets = []string{hubspotSDKSecret, ringSecret} },
			header: h(hubspotVector), body: ringBody, now: now, wantID: digest},
		{name: "stale", header: h(hubspotVector), body: ringBody, now: now.Add(5*time.Minute + time.Second), wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "future", header: h(hubspotVector), body: ringBody, now: now.Add(-5*time.Minute - time.Second), wantErr: ErrUnauthorized, wantMsg: "future"},
		{name: "within 5 minutes", header: h(hubspotVector), body: ringBody, now: now.Add(5 * time.Minute), wantID: digest},
		{name: "seconds timestamp", header: hubspotHeaders(signHubSpot(ringSecret, "POST", hubspotURL, ringBody, "1700000000"), "1700000000"),
			body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "missing signature", header: h(""), body: ringBody, now: now, wantErr: ErrBadRequest, wantMsg: "X-HubSpot-Signature-v3"},
		{name: "missing timestamp", header: hubspotHeaders(hubspotVector, ""), body: ringBody, now: now, wantErr: ErrBadRequest, wantMsg: "Timestamp"},
		{name: "malformed timestamp", header: hubspotHeaders(hubspotVector, "1.7e12"), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "milliseconds"},
		{name: "hex signature", header: h(strings.Repeat("ab", 32)), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "base64"},
		{name: "too long", header: h(strings.Repeat("A", 5000)), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "longer"},
	})

	p := mustProvider(t, base)
	batch := hubspotHeaders(signHubSpot(ringSecret, "POST", hubspotURL, hubspotBatch, ts), ts)
	ev, err := p.Check(Input{Header: batch, Body: []byte(hubspotBatch)}, now)
	// Keyed by the digest of the canonical batch without each item's
	// attemptNumber (volatile).
	canonicalBatch := `[{"appId":54321,"changeFlag":"NEW","changeSource":"CRM","eventId":1,"objectId":123,"occurredAt":1564113600000,"portalId":62515,"subscriptionId":12345,"subscriptionType":"contact.creation"}]`
	if err != nil || ev.Type != "contact.creation" || ev.ID != sha256Hex(canonicalBatch) || ev.ContentHash != ev.ID {
		t.Errorf("batch: %+v, %v; want type contact.creation, keyed by its digest without attemptNumber", ev, err)
	}
	if !p.IDSigned() {
		t.Error("IDSigned = false: the digest of the signed body is signed")
	}

	// A configuration without PUBLIC_URL, or with a query, is refused.
	for _, u := range []string{"", "hooks.example.com/x", hubspotURL + "?a=1"} {
		_, err := NewProvider(ProviderConfig{Name: "hubspot", Scheme: SchemeHubSpot, Secrets: []string{ringSecret}, PublicURL: u})
		if fes := FieldErrors(err); len(fes) != 1 || fes[0].Field != FieldPublicURL {
			t.Errorf("PUBLIC_URL %q: %v", u, err)
		}
	}
}

// The URI signed is the public URL plus the received query, with the
// escapes HubSpot lists decoded (either case) and the others kept.
func TestHubSpotSignedURI(t *testing.T) {
	now := time.Unix(ringUnix, 0)
	ts := "1700000000000"
	p := mustProvider(t, ProviderConfig{Name: "hubspot", Scheme: SchemeHubSpot, Secrets: []string{ringSecret}, PublicURL: hubspotURL})
	query := "a=b%3Ac%2fd&e=%2A%20%26%3b&f=%40%21%24%27%28%29%2C%3F&g=%zz%4"
	signed := hubspotURL + "?a=b:c/d&e=*%20%26;&f=@!$'(),?&g=%zz%4"
	if got := hubspotDecodeURI(hubspotURL + "?" + query); got != signed {
		t.Fatalf("decoded URI = %q, want %q", got, signed)
	}
	h := hubspotHeaders(signHubSpot(ringSecret, "POST", signed, ringBody, ts), ts)
	if _, err := p.Check(Input{Header: h, Body: []byte(ringBody), RawQuery: query}, now); err != nil {
		t.Errorf("query signed decoded: %v", err)
	}
	if _, err := p.Check(Input{Header: h, Body: []byte(ringBody)}, now); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("query dropped: %v, want ErrUnauthorized", err)
	}
	raw := hubspotHeaders(signHubSpot(ringSecret, "POST", hubspotURL+"?"+query, ringBody, ts), ts)
	if _, err := p.Check(Input{Header: raw, Body: []byte(ringBody), RawQuery: query}, now); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("query signed undecoded accepted: %v", err)
	}
}

// init registers the scheme's case of TestRingBResignRoundTrip.
func init() {
	ringBResignCases = append(ringBResignCases, ringBResignCase{
		name: "hubspot", cfg: ProviderConfig{Scheme: SchemeHubSpot, PublicURL: hubspotURL}, body: hubspotBatch, sigHeader: "X-HubSpot-Signature-v3",
		sign: func(secret string, at time.Time) http.Header {
			ts := strconv.FormatInt(at.UnixMilli(), 10)
			return hubspotHeaders(signHubSpot(secret, "POST", hubspotURL, hubspotBatch, ts), ts)
		},
	})
}

// A retried batch differs only in each item's attemptNumber: the same
// event (same key and content hash), not a new one or a conflict.
func TestHubSpotRetryIsADuplicate(t *testing.T) {
	const secret = "yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy"
	url := "https://hooks.example.com/webhooks/hubspot"
	p := mustProvider(t, ProviderConfig{Name: "hs", Scheme: SchemeHubSpot, Secrets: []string{secret}, PublicURL: url})
	now := time.Now()
	check := func(body string) Event {
		t.Helper()
		ts := strconv.FormatInt(now.UnixMilli(), 10)
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte("POST" + url + body + ts))
		h := headers("Content-Type", "application/json", "X-HubSpot-Request-Timestamp", ts,
			"X-HubSpot-Signature-v3", base64.StdEncoding.EncodeToString(m.Sum(nil)))
		ev, err := p.Check(Input{Header: h, Body: []byte(body)}, now)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	first := check(`[{"eventId":1,"subscriptionType":"contact.creation","attemptNumber":0}]`)
	retry := check(`[{"eventId":1,"subscriptionType":"contact.creation","attemptNumber":4}]`)
	other := check(`[{"eventId":2,"subscriptionType":"contact.creation","attemptNumber":0}]`)
	if first.ID != retry.ID || first.ContentHash != retry.ContentHash {
		t.Errorf("retry keyed %s/%s, first %s/%s: want the same event", retry.ID, retry.ContentHash, first.ID, first.ContentHash)
	}
	if other.ID == first.ID {
		t.Error("another batch has the same key")
	}
}
