package verify

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// workosVector is the computed vector of ringBody at 1700000000000 ms (no
// example is published; WorkOS's docs,
// https://workos.com/docs/webhooks/securing-your-webhook-endpoint/validating-events-are-from-workos,
// give the construction).
const workosVector = "t=1700000000000, v1=1ffd6c57023e9397c374937520b0b95527afbb225b40ce8e9f660c216b406ab5"

// workosBody has the shape of a WorkOS event.
const workosBody = `{"id":"event_01HF7Z7Z7Z7Z7Z7Z7Z7Z7Z7Z7Z","event":"user.created","data":{"object":"user","id":"user_01HF7Z"},"created_at":"2023-11-14T22:13:19.000Z"}`

// signWorkOS returns a WorkOS-Signature value, computed here independently
// of the package.
func signWorkOS(secret string, ms int64, body string) string {
	t := strconv.FormatInt(ms, 10)
	return "t=" + t + ", v1=" + hex.EncodeToString(hmacSHA256([]byte(secret), t, ".", body))
}

func TestWorkOSCheck(t *testing.T) {
	now := time.Unix(ringUnix, 0)
	base := ProviderConfig{Name: "workos", Scheme: SchemeWorkOS, Secrets: []string{ringSecret}}
	h := func(v string) http.Header { return headers("WorkOS-Signature", v) }
	v1 := workosVector[len("t=1700000000000, "):]
	runCheckCases(t, base, []checkCase{
		{name: "vector", header: h(workosVector), body: ringBody, now: now, wantID: "evt_1"},
		{name: "without the space", header: h("t=1700000000000," + v1), body: ringBody, now: now, wantID: "evt_1"},
		{name: "v1 first, another v1", header: h(v1 + ", v1=" + strings.Repeat("0", 64) + ", t=1700000000000"), body: ringBody, now: now, wantID: "evt_1"},
		{name: "tampered body", header: h(workosVector), body: strings.Replace(ringBody, "evt_1", "evt_9", 1), now: now, wantErr: ErrUnauthorized, wantMsg: "no signature"},
		{name: "seconds are not milliseconds", header: h(signWorkOS(ringSecret, ringUnix, ringBody)), body: ringBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{"other"} }, header: h(workosVector), body: ringBody, now: now, wantErr: ErrUnauthorized},
		{name: "rotation: the previous secret signs", cfg: func(c *ProviderConfig) { c.Secrets = []string{"other", ringSecret} },
			header: h(workosVector), body: ringBody, now: now, wantID: "evt_1"},
		{name: "stale", header: h(workosVector), body: ringBody, now: now.Add(3*time.Minute + time.Second), wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "future", header: h(workosVector), body: ringBody, now: now.Add(-3*time.Minute - time.Second), wantErr: ErrUnauthorized, wantMsg: "future"},
		{name: "within 3 minutes", header: h(workosVector), body: ringBody, now: now.Add(3 * time.Minute), wantID: "evt_1"},
		{name: "missing", header: headers(), body: ringBody, now: now, wantErr: ErrBadRequest, wantMsg: "missing WorkOS-Signature"},
		{name: "no t", header: h(v1), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "no t="},
		{name: "two t", header: h(workosVector + ", t=1700000000000"), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "more than one"},
		{name: "no v1", header: h("t=1700000000000"), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "no well-formed v1"},
		{name: "signed t", header: h("t=-1700000000000, " + v1), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "milliseconds"},
		{name: "huge t", header: h("t=99999999999999999999, " + v1), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "milliseconds"},
		{name: "pair without =", header: h(workosVector + ", x"), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "malformed pair"},
		{name: "too long", header: h(workosVector + strings.Repeat(", v0=0", 1000)), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "longer"},
	})

	p := mustProvider(t, base)
	ev, err := p.Check(Input{Header: h(signWorkOS(ringSecret, ringUnix*1000, workosBody)), Body: []byte(workosBody)}, now)
	if err != nil || ev.ID != "event_01HF7Z7Z7Z7Z7Z7Z7Z7Z7Z7Z7Z" || ev.Type != "user.created" {
		t.Errorf("event = %+v, %v; want its id and type", ev, err)
	}
	if !p.IDSigned() {
		t.Error("IDSigned = false: the id comes from the signed body")
	}
}

// init registers the scheme's case of TestRingBResignRoundTrip.
func init() {
	ringBResignCases = append(ringBResignCases, ringBResignCase{
		name: "workos", cfg: ProviderConfig{Scheme: SchemeWorkOS}, body: workosBody, sigHeader: "WorkOS-Signature",
		sign: func(secret string, at time.Time) http.Header {
			return headers("WorkOS-Signature", signWorkOS(secret, at.UnixMilli(), workosBody))
		},
	})
}
