package verify

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

const (
	snsTestTopic = "arn:aws:sns:us-east-1:123456789012:orders"
	snsTestTS    = "2023-11-14T22:13:20.000Z" // 1700000000
	snsTestToken = "2336412f37fb687f5d51e6e2425f004aed7b7f8e5c0b5b3ae1a0e5c5a1a3e8b0tokentoken"
)

// snsRig is a provider whose key host is a test HTTPS server serving the
// test certificate at /cert.pem and confirming subscriptions at /.
type snsRig struct {
	ks        *keyServer
	p         *Provider
	now       time.Time
	confirmed []url.Values
}

func newSNSRig(t *testing.T) *snsRig {
	t.Helper()
	r := &snsRig{ks: newKeyServer(t), now: time.Unix(1700000000, 0)}
	r.ks.serve("/cert.pem", string(readTestFile(t, "sns-test-cert.pem")))
	r.ks.handle("/", func(w http.ResponseWriter, req *http.Request) {
		r.confirmed = append(r.confirmed, req.URL.Query())
		_, _ = w.Write([]byte(`<ConfirmSubscriptionResponse><ConfirmSubscriptionResult><SubscriptionArn>arn</SubscriptionArn></ConfirmSubscriptionResult></ConfirmSubscriptionResponse>`))
	})
	r.p = mustProvider(t, ProviderConfig{Name: "orders", Scheme: SchemeSNS, KeyHosts: []string{r.ks.host}, CAFile: r.ks.caFile, Secrets: []string{"ignored"}})
	return r
}

// message returns an envelope of typ with the rig's URLs and changes
// applied ("" deletes a field), signed with key over keys (nil: the type's
// list).
func (r *snsRig) message(t *testing.T, typ, version string, keys []string, changes ...string) string {
	t.Helper()
	f := map[string]string{
		"Type": typ, "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", "TopicArn": snsTestTopic,
		"Message": `{"order":42,"note":"line one\nline two \u00e9"}`, "Timestamp": snsTestTS,
		"SignatureVersion": version, "SigningCertURL": r.ks.URL + "/cert.pem",
	}
	if typ == "Notification" {
		f["Subject"] = "order created"
		f["UnsubscribeURL"] = r.ks.URL + "/?Action=Unsubscribe&SubscriptionArn=" + snsTestTopic + ":1"
	} else {
		f["Token"] = snsTestToken
		f["SubscribeURL"] = r.ks.URL + "/?Action=ConfirmSubscription&TopicArn=" + snsTestTopic + "&Token=" + snsTestToken
	}
	var post []string
	for i := 0; i+1 < len(changes); i += 2 {
		if changes[i] == "Signature" || changes[i] == "SigningCertURL" || changes[i] == "SignatureVersion" {
			post = append(post, changes[i], changes[i+1]) // unsigned: changed after signing
			continue
		}
		f[changes[i]] = changes[i+1]
		if changes[i+1] == "" {
			delete(f, changes[i])
		}
	}
	f = signSNS(t, readRSAKey(t, "sns-test-key.pem"), f, keys)
	for i := 0; i+1 < len(post); i += 2 {
		f[post[i]] = post[i+1]
		if post[i+1] == "" {
			delete(f, post[i])
		}
	}
	return snsJSON(t, f)
}

func TestSNSCheck(t *testing.T) {
	forged := func(r *snsRig, t *testing.T) string {
		f := map[string]string{"Type": "Notification", "MessageId": "m", "TopicArn": snsTestTopic, "Message": "x", "Timestamp": snsTestTS,
			"SignatureVersion": "2", "SigningCertURL": r.ks.URL + "/cert.pem"}
		return snsJSON(t, signSNS(t, readRSAKey(t, "jwt-forger.pem"), f, nil))
	}
	for _, tc := range []struct {
		name      string
		body      func(*snsRig, *testing.T) string
		header    http.Header
		at        time.Duration // from the message's Timestamp
		wantErr   error
		reason    string
		wantID    string
		handshake bool
		note      string
		fetches   int // requests the key host gets; -1: not checked
		confirms  int
	}{
		{name: "notification, SignatureVersion 1", body: func(r *snsRig, t *testing.T) string { return r.message(t, "Notification", "1", nil) },
			wantID: "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", fetches: 1},
		{name: "notification, SignatureVersion 2", body: func(r *snsRig, t *testing.T) string { return r.message(t, "Notification", "2", nil) },
			wantID: "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", fetches: 1},
		{name: "notification without Subject", body: func(r *snsRig, t *testing.T) string { return r.message(t, "Notification", "2", nil, "Subject", "") },
			wantID: "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", fetches: 1},
		{name: "59 minutes late (SNS retries the same message)", body: func(r *snsRig, t *testing.T) string { return r.message(t, "Notification", "2", nil) },
			at: 59 * time.Minute, wantID: "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", fetches: 1},
		{name: "stale: no fetch", body: func(r *snsRig, t *testing.T) string { return r.message(t, "Notification", "2", nil) },
			at: 61 * time.Minute, wantErr: ErrUnauthorized, reason: ReasonTimestampOutsideTolerance},
		{name: "future", body: func(r *snsRig, t *testing.T) string { return r.message(t, "Notification", "2", nil) },
			at: -61 * time.Minute, wantErr: ErrUnauthorized, reason: ReasonTimestampOutsideTolerance},
		{name: "another key", body: forged, wantErr: ErrUnauthorized, reason: ReasonSignatureMismatch, fetches: 1},
		{name: "tampered message", body: func(r *snsRig, t *testing.T) string {
			return strings.Replace(r.message(t, "Notification", "2", nil), `order created`, `order deleted`, 1)
		}, wantErr: ErrUnauthorized, reason: ReasonSignatureMismatch, fetches: 1},
		{name: "version 1 signature labelled 2", body: func(r *snsRig, t *testing.T) string {
			return r.message(t, "Notification", "1", nil, "SignatureVersion", "2")
		}, wantErr: ErrUnauthorized, reason: ReasonSignatureMismatch, fetches: 1},
		{name: "subscription confirmation: SubscribeURL fetched", body: func(r *snsRig, t *testing.T) string { return r.message(t, "SubscriptionConfirmation", "2", nil) },
			handshake: true, note: "sns subscription confirmed: topic " + snsTestTopic, fetches: 2, confirms: 1},
		{name: "unsubscribe confirmation: answered only", body: func(r *snsRig, t *testing.T) string { return r.message(t, "UnsubscribeConfirmation", "1", nil) },
			handshake: true, note: "sns unsubscribe confirmation received (not re-subscribed): topic " + snsTestTopic, fetches: 1},
		{name: "unsubscribe signed with the notification list (JS validator's slip)", body: func(r *snsRig, t *testing.T) string {
			return r.message(t, "UnsubscribeConfirmation", "2", snsTestSignedKeys["Notification"])
		}, wantErr: ErrUnauthorized, reason: ReasonSignatureMismatch, fetches: 1},
		{name: "forged confirmation: nothing confirmed", body: func(r *snsRig, t *testing.T) string {
			return strings.Replace(r.message(t, "SubscriptionConfirmation", "2", nil), "ConfirmSubscription", "ConfirmSubscriptioN", 1)
		}, wantErr: ErrUnauthorized, reason: ReasonSignatureMismatch, fetches: 1},
		{name: "confirmation with SubscribeURL off the list: no request", body: func(r *snsRig, t *testing.T) string {
			return r.message(t, "SubscriptionConfirmation", "2", nil, "SubscribeURL", "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription")
		}, wantErr: ErrUnauthorized, reason: ReasonUntrustedKeyURL},
		{name: "SigningCertURL off the list: no request", body: func(r *snsRig, t *testing.T) string {
			return r.message(t, "Notification", "2", nil, "SigningCertURL", "https://attacker.example.com/cert.pem")
		}, wantErr: ErrUnauthorized, reason: ReasonUntrustedKeyURL},
		{name: "SigningCertURL over http: no request", body: func(r *snsRig, t *testing.T) string {
			return r.message(t, "Notification", "2", nil, "SigningCertURL", "http://"+r.ks.host+"/cert.pem")
		}, wantErr: ErrUnauthorized, reason: ReasonUntrustedKeyURL},
		{name: "SigningCertURL not .pem: no request", body: func(r *snsRig, t *testing.T) string {
			return r.message(t, "Notification", "2", nil, "SigningCertURL", r.ks.URL+"/?Action=Unsubscribe")
		}, wantErr: ErrUnauthorized, reason: ReasonUntrustedKeyURL},
		{name: "certificate host answers 404", body: func(r *snsRig, t *testing.T) string {
			return r.message(t, "Notification", "2", nil, "SigningCertURL", r.ks.URL+"/absent.pem")
		}, wantErr: ErrUnavailable, reason: ReasonKeyUnavailable, fetches: 1},
		{name: "certificate host serves garbage", body: func(r *snsRig, t *testing.T) string {
			r.ks.serve("/garbage.pem", "<html>maintenance</html>")
			return r.message(t, "Notification", "2", nil, "SigningCertURL", r.ks.URL+"/garbage.pem")
		}, wantErr: ErrUnavailable, reason: ReasonKeyUnavailable, fetches: 1},
		{name: "confirmation fails: 503, SNS resends", body: func(r *snsRig, t *testing.T) string {
			r.ks.handle("/", func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "throttled", http.StatusServiceUnavailable)
			})
			return r.message(t, "SubscriptionConfirmation", "2", nil)
		}, wantErr: ErrUnavailable, reason: ReasonKeyUnavailable, fetches: 2},
		{name: "raw message delivery", header: headers("x-amz-sns-rawdelivery", "true"), body: func(r *snsRig, t *testing.T) string { return `{"order":42}` },
			wantErr: ErrBadRequest, reason: ReasonMissingHeader},
		{name: "not JSON", body: func(*snsRig, *testing.T) string { return "Type=Notification" }, wantErr: ErrBadRequest, reason: ReasonMalformedBody},
		{name: "duplicate Message", body: func(r *snsRig, t *testing.T) string {
			return strings.Replace(r.message(t, "Notification", "2", nil), `{"Message":`, `{"Message":"evil","Message":`, 1)
		}, wantErr: ErrBadRequest, reason: ReasonMalformedBody},
		{name: "unknown Type", body: func(r *snsRig, t *testing.T) string { return r.message(t, "Notification", "2", nil, "Type", "Other") },
			wantErr: ErrBadRequest, reason: ReasonMalformedBody},
		{name: "no Signature", body: func(r *snsRig, t *testing.T) string { return r.message(t, "Notification", "2", nil, "Signature", "") },
			wantErr: ErrBadRequest, reason: ReasonMalformedBody},
		{name: "no MessageId", body: func(r *snsRig, t *testing.T) string { return r.message(t, "Notification", "2", nil, "MessageId", "") },
			wantErr: ErrBadRequest, reason: ReasonMalformedBody},
		{name: "Message not a string", body: func(r *snsRig, t *testing.T) string {
			return strings.Replace(r.message(t, "Notification", "2", nil), `"Message":"`, `"Message":{"x":"`, 1)
		}, wantErr: ErrBadRequest, reason: ReasonMalformedBody},
		{name: "SignatureVersion 3", body: func(r *snsRig, t *testing.T) string { return r.message(t, "Notification", "3", nil) },
			wantErr: ErrUnauthorized, reason: ReasonMalformedHeader},
		{name: "Signature not base64", body: func(r *snsRig, t *testing.T) string { return r.message(t, "Notification", "2", nil, "Signature", "!!") },
			wantErr: ErrUnauthorized, reason: ReasonMalformedHeader},
		{name: "Timestamp not ISO 8601", body: func(r *snsRig, t *testing.T) string {
			return r.message(t, "Notification", "2", nil, "Timestamp", "1700000000")
		},
			wantErr: ErrUnauthorized, reason: ReasonMalformedHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSNSRig(t)
			body := tc.body(r, t)
			ev, err := r.p.Check(Input{Header: tc.header, Body: []byte(body)}, r.now.Add(tc.at))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || Reason(err) != tc.reason {
					t.Fatalf("err = %v (reason %s), want %v (%s)", err, Reason(err), tc.wantErr, tc.reason)
				}
				for _, leak := range []string{snsTestToken, `"Signature"`} {
					if strings.Contains(err.Error(), leak) {
						t.Errorf("error %q quotes %s", err, leak)
					}
				}
			} else if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if tc.wantID != "" && (ev.ID != tc.wantID || ev.Type != snsTestTopic) {
				t.Errorf("event id %q type %q", ev.ID, ev.Type)
			}
			if tc.handshake && (string(ev.Handshake) != "{}" || ev.AnswerType != "" || ev.Note != tc.note || ev.ID != "") {
				t.Errorf("handshake event %+v, want {} with note %q", ev, tc.note)
			}
			if got := int(r.ks.hits.Load()); got != tc.fetches {
				t.Errorf("key host got %d requests, want %d", got, tc.fetches)
			}
			if tc.confirms > 0 && (len(r.confirmed) != tc.confirms || r.confirmed[0].Get("Token") != snsTestToken) {
				t.Errorf("confirmations %v", r.confirmed)
			}
		})
	}
}
