package main

import (
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"hash"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// ringKeys holds the second ring's secrets, and the key server the
// schemes whose keys the provider holds (sns, pubsub) fetch from: an HTTPS
// server of the test's own, trusted through CA_FILE and allowed through
// KEY_HOSTS, as a private region would be.
type ringKeys struct {
	secret   map[string]string // per scheme
	metaVT   string            // Meta's verify token
	postmark string            // user:password
	adyenHex string
	audience string

	keySrv    *httptest.Server
	caFile    string
	snsKey    *rsa.PrivateKey
	snsOther  *rsa.PrivateKey
	jwtKey    *rsa.PrivateKey
	confirmed atomic.Int32 // SubscribeURL fetches seen by the key server
}

func newRingKeys(t *testing.T) *ringKeys {
	t.Helper()
	k := &ringKeys{secret: map[string]string{}, metaVT: "meta-verify-token-e2e", postmark: "hooks:postmark-e2e-password",
		adyenHex: "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056", audience: "https://hooks.example.com/webhooks/pubsub"}
	for _, n := range []string{"twitch", "mailgun", "typeform", "calendly", "hubspot", "razorpay", "vercel", "bitbucket", "atlassian",
		"meta", "sentry", "zendesk", "workos", "paystack", "telegram", "okta", "msgraph", "twitter"} {
		k.secret[n] = n + "-ring-secret-e2e"
	}
	k.secret["telegram"] = "telegram_ring-secret-e2e" // Telegram's alphabet: no dots or spaces
	k.secret["okta"] = "Bearer okta-ring-secret-e2e"
	var err error
	for _, key := range []**rsa.PrivateKey{&k.snsKey, &k.snsOther, &k.jwtKey} {
		if *key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			t.Fatal(err)
		}
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "sns.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.snsKey.PublicKey, k.snsKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	n := base64.RawURLEncoding.EncodeToString(k.jwtKey.N.Bytes())
	e := base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.jwtKey.E)).Bytes())
	jwks := fmt.Sprintf(`{"keys":[{"kty":"RSA","alg":"RS256","use":"sig","kid":"ring-k1","n":%q,"e":%q}]}`, n, e)
	mux := http.NewServeMux()
	mux.HandleFunc("/sns/cert.pem", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(certPEM) })
	mux.HandleFunc("/sns/confirm", func(w http.ResponseWriter, _ *http.Request) {
		k.confirmed.Add(1)
		_, _ = w.Write([]byte("<ConfirmSubscriptionResponse/>"))
	})
	mux.HandleFunc("/oauth2/v3/certs", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write([]byte(jwks))
	})
	k.keySrv = httptest.NewTLSServer(mux)
	t.Cleanup(k.keySrv.Close)
	k.caFile = filepath.Join(t.TempDir(), "ca.pem")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.keySrv.Certificate().Raw})
	if err := os.WriteFile(k.caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

// secrets lists the configured values that must never be echoed or logged.
func (k *ringKeys) secrets() []string {
	out := []string{k.metaVT, k.postmark, k.adyenHex}
	for _, s := range k.secret {
		out = append(out, s)
	}
	return out
}

// keyHost is the key server's host:port, for KEY_HOSTS.
func (k *ringKeys) keyHost() string { return strings.TrimPrefix(k.keySrv.URL, "https://") }

// snsSign signs an SNS message as AWS does (docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html):
// "Key\nValue\n" of the present keys in order, RSA PKCS#1 v1.5 over SHA256
// (SignatureVersion 2), base64.
func (k *ringKeys) snsSign(key *rsa.PrivateKey, m map[string]string) []byte {
	order := []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"}
	if m["Type"] != "Notification" {
		order = []string{"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}
	}
	var b strings.Builder
	for _, name := range order {
		if v, ok := m[name]; ok {
			b.WriteString(name + "\n" + v + "\n")
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	sig, _ := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	out := map[string]string{"Signature": base64.StdEncoding.EncodeToString(sig), "SignatureVersion": "2",
		"SigningCertURL": k.keySrv.URL + "/sns/cert.pem"}
	for name, v := range m {
		out[name] = v
	}
	body, _ := json.Marshal(out)
	return body
}

// jwt makes a Google-style OIDC token (RS256) for the pubsub push.
func (k *ringKeys) jwt(aud string, now time.Time) string {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"RS256","kid":"ring-k1","typ":"JWT"}`))
	claims, _ := json.Marshal(map[string]any{"iss": "https://accounts.google.com", "aud": aud, "iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(), "email": "push@project.iam.gserviceaccount.com", "email_verified": true})
	signing := head + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, _ := rsa.SignPKCS1v15(rand.Reader, k.jwtKey, crypto.SHA256, sum[:])
	return signing + "." + enc.EncodeToString(sig)
}

// adyenItem signs one standard notification item as Adyen does
// (docs.adyen.com/development-resources/webhooks/verify-hmac-signatures).
func adyenItem(keyHex, psp, code string) string {
	key, _ := hex.DecodeString(keyHex)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(psp + "::TestMerchant:order-1:1000:EUR:" + code + ":true"))
	sig := base64.StdEncoding.EncodeToString(m.Sum(nil))
	return `{"NotificationRequestItem":{"additionalData":{"hmacSignature":"` + sig + `"},"amount":{"currency":"EUR","value":1000},` +
		`"eventCode":"` + code + `","merchantAccountCode":"TestMerchant","merchantReference":"order-1","pspReference":"` + psp + `","success":"true"}}`
}

// secondRingCases are the second ring's providers, each signed from its
// provider's documentation, independently of verify's code.
func secondRingCases(t *testing.T, listen string, k *ringKeys) []schemeCase {
	t.Helper()
	const jsonCT = "application/json"
	s := k.secret
	env := func(name string, kv ...string) []string {
		out := []string{"WHGUARD_" + strings.ToUpper(name) + "_SECRET=" + s[name]}
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, "WHGUARD_"+strings.ToUpper(name)+"_"+kv[i]+"="+kv[i+1])
		}
		return out
	}
	// bodyHMAC is a case whose sender signs the body alone in one header.
	bodyHMAC := func(name, header, prefix string, enc func([]byte) string, newHash func() hash.Hash, extra http.Header, body, wantID string) schemeCase {
		return schemeCase{name: name, env: env(name), build: func(time.Time) schemeReqs {
			sign := func(secret string) wireReq {
				h := hdr("Content-Type", jsonCT, header, prefix+enc(macOf(newHash, secret, body)))
				for n, v := range extra {
					h[n] = v
				}
				return wireReq{header: h, body: []byte(body)}
			}
			return schemeReqs{event: sign(s[name]), wantID: wantID, forged: ptr(sign("not the secret"))}
		}}
	}
	b64 := base64.StdEncoding.EncodeToString
	hexs := hex.EncodeToString
	var cases []schemeCase
	cases = append(cases,
		bodyHMAC("typeform", "Typeform-Signature", "sha256=", b64, sha256.New, nil,
			`{"event_id":"01HTF0E2E","event_type":"form_response"}`, "01HTF0E2E"),
		bodyHMAC("razorpay", "X-Razorpay-Signature", "", hexs, sha256.New, hdr("X-Razorpay-Event-Id", "Rz0E2E"),
			`{"entity":"event","event":"payment.captured"}`, "Rz0E2E"),
		bodyHMAC("vercel", "x-vercel-signature", "", hexs, sha1.New, nil, `{"id":"vc_e2e","type":"deployment.created"}`, "vc_e2e"),
		bodyHMAC("bitbucket", "X-Hub-Signature", "sha256=", hexs, sha256.New,
			hdr("X-Event-Key", "repo:push", "X-Request-UUID", "6f0e2e00-bb00-4000-8000-000000000001"),
			`{"push":{"changes":[]}}`, "6f0e2e00-bb00-4000-8000-000000000001"),
		bodyHMAC("atlassian", "X-Hub-Signature", "sha256=", hexs, sha256.New,
			hdr("X-Atlassian-Webhook-Identifier", "atl-e2e-1"), `{"webhookEvent":"jira:issue_created"}`, "atl-e2e-1"),
		bodyHMAC("sentry", "Sentry-Hook-Signature", "", hexs, sha256.New,
			hdr("Sentry-Hook-Resource", "issue", "Request-ID", "sentry-e2e-1", "Sentry-Hook-Timestamp", "1700000000"),
			`{"action":"created"}`, "sentry-e2e-1"),
		bodyHMAC("paystack", "x-paystack-signature", "", hexs, sha512.New, nil,
			`{"data":{"id":302961},"event":"charge.success"}`, digestID(`{"data":{"id":302961},"event":"charge.success"}`)),
	)
	cases = append(cases, schemeCase{name: "meta", env: env("meta", "VERIFY_TOKEN", k.metaVT), build: func(time.Time) schemeReqs {
		body := `{"entry":[{"id":"102","time":1700000000}],"object":"page"}`
		sign := func(secret string) wireReq {
			return wireReq{header: hdr("Content-Type", jsonCT, "X-Hub-Signature-256", "sha256="+hexMAC(sha256.New, secret, body)), body: []byte(body)}
		}
		q := func(vt string) string {
			return url.Values{"hub.mode": {"subscribe"}, "hub.challenge": {"1158201444"}, "hub.verify_token": {vt}}.Encode()
		}
		return schemeReqs{event: sign(s["meta"]), wantID: digestID(body), forged: ptr(sign("not the app secret")),
			handshakes: []handshake{{name: "hub_challenge", req: wireReq{method: http.MethodGet, query: q(k.metaVT)}, check: exactBody("1158201444"),
				forged: wireReq{method: http.MethodGet, query: q("not the token")}, forgedStatus: http.StatusForbidden}}}
	}})
	cases = append(cases, schemeCase{name: "twitter", env: env("twitter"), build: func(time.Time) schemeReqs {
		body := `{"for_user_id":"2244994945","tweet_create_events":[{"id_str":"1"}]}`
		sign := func(secret string) wireReq {
			return wireReq{header: hdr("Content-Type", jsonCT, "x-twitter-webhooks-signature", "sha256="+b64MAC(sha256.New, secret, body)), body: []byte(body)}
		}
		const crc = "ZTEyZGQ2YTUtMTk0Yi00MzNjLWE5ZGMtZjVlN2Q1YjFmYjAz"
		return schemeReqs{event: sign(s["twitter"]), wantID: digestID(body), forged: ptr(sign("not the consumer secret")),
			handshakes: []handshake{{name: "crc", req: wireReq{method: http.MethodGet, query: "crc_token=" + crc},
				check: exactBody(`{"response_token":"sha256=` + b64MAC(sha256.New, s["twitter"], crc) + `"}`),
				// A body of the caller's choosing is not a CRC token: no
				// signature of it is given.
				forged: wireReq{method: http.MethodGet, query: "crc_token=" + url.QueryEscape(body)}, forgedStatus: http.StatusBadRequest}}}
	}})
	cases = append(cases, schemeCase{name: "twitch", env: env("twitch"), build: func(now time.Time) schemeReqs {
		ts := now.UTC().Format("2006-01-02T15:04:05.000000000Z")
		sign := func(secret, id, typ, body string) wireReq {
			return wireReq{header: hdr("Content-Type", jsonCT, "Twitch-Eventsub-Message-Id", id, "Twitch-Eventsub-Message-Timestamp", ts,
				"Twitch-Eventsub-Message-Type", typ, "Twitch-Eventsub-Subscription-Type", "channel.follow",
				"Twitch-Eventsub-Message-Signature", "sha256="+hexMAC(sha256.New, secret, id, ts, body)), body: []byte(body)}
		}
		body := `{"event":{"user_id":"1337"},"subscription":{"type":"channel.follow"}}`
		hs := `{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"status":"webhook_callback_verification_pending","type":"channel.follow"}}`
		return schemeReqs{event: sign(s["twitch"], "twitch-e2e-1", "notification", body), wantID: "twitch-e2e-1",
			forged: ptr(sign("not the secret", "twitch-e2e-1", "notification", body)),
			handshakes: []handshake{{name: "callback_verification", req: sign(s["twitch"], "twitch-e2e-hs", "webhook_callback_verification", hs),
				check: exactBody("pogchamp-kappa-360noscope-vohiyo"), forged: sign("not the secret", "twitch-e2e-hs", "webhook_callback_verification", hs)}}}
	}})
	cases = append(cases, schemeCase{name: "mailgun", env: env("mailgun"), build: func(now time.Time) schemeReqs {
		ts := fmt.Sprint(now.Unix())
		sign := func(secret string) wireReq {
			body := `{"event-data":{"event":"delivered","id":"mg-e2e-1"},"signature":{"signature":"` + hexMAC(sha256.New, secret, ts, "tok-e2e-1") +
				`","timestamp":"` + ts + `","token":"tok-e2e-1"}}`
			return wireReq{header: hdr("Content-Type", jsonCT), body: []byte(body)}
		}
		return schemeReqs{event: sign(s["mailgun"]), wantID: "mg-e2e-1", forged: ptr(sign("not the signing key"))}
	}})
	cases = append(cases, schemeCase{name: "calendly", env: env("calendly"), build: func(now time.Time) schemeReqs {
		ts := fmt.Sprint(now.Unix())
		body := `{"event":"invitee.created","payload":{"uri":"https://api.calendly.com/invitees/E2E"}}`
		sign := func(secret string) wireReq {
			return wireReq{header: hdr("Content-Type", jsonCT, "Calendly-Webhook-Signature", "t="+ts+",v1="+hexMAC(sha256.New, secret, ts, ".", body)), body: []byte(body)}
		}
		return schemeReqs{event: sign(s["calendly"]), wantID: digestID(body), forged: ptr(sign("not the signing key"))}
	}})
	cases = append(cases, schemeCase{name: "zendesk", env: env("zendesk"), build: func(now time.Time) schemeReqs {
		ts := now.UTC().Format("2006-01-02T15:04:05Z")
		body := `{"id":"01GZE2E","type":"zen:event-type:ticket.created"}`
		sign := func(secret string) wireReq {
			return wireReq{header: hdr("Content-Type", jsonCT, "X-Zendesk-Webhook-Signature-Timestamp", ts,
				"X-Zendesk-Webhook-Signature", b64MAC(sha256.New, secret, ts, body)), body: []byte(body)}
		}
		return schemeReqs{event: sign(s["zendesk"]), wantID: "01GZE2E", forged: ptr(sign("not the signing secret"))}
	}})
	cases = append(cases, schemeCase{name: "workos", env: env("workos"), build: func(now time.Time) schemeReqs {
		ts := fmt.Sprint(now.UnixMilli())
		body := `{"data":{"id":"user_01"},"event":"user.created","id":"event_01E2E"}`
		sign := func(secret string) wireReq {
			return wireReq{header: hdr("Content-Type", jsonCT, "WorkOS-Signature", "t="+ts+", v1="+hexMAC(sha256.New, secret, ts, ".", body)), body: []byte(body)}
		}
		return schemeReqs{event: sign(s["workos"]), wantID: "event_01E2E", forged: ptr(sign("not the secret"))}
	}})
	hubspotURL := "http://" + listen + "/webhooks/hubspot"
	cases = append(cases, schemeCase{name: "hubspot", env: env("hubspot", "PUBLIC_URL", hubspotURL), build: func(now time.Time) schemeReqs {
		ts := fmt.Sprint(now.UnixMilli())
		body := `[{"eventId":100,"objectId":123,"portalId":62515,"subscriptionType":"contact.creation"}]`
		sign := func(secret string) wireReq {
			return wireReq{header: hdr("Content-Type", jsonCT, "X-HubSpot-Request-Timestamp", ts,
				"X-HubSpot-Signature-v3", b64MAC(sha256.New, secret, "POST", hubspotURL, body, ts)), body: []byte(body)}
		}
		return schemeReqs{event: sign(s["hubspot"]), wantID: digestID(body), forged: ptr(sign("not the client secret"))}
	}})
	cases = append(cases, schemeCase{name: "postmark", env: []string{"WHGUARD_POSTMARK_BASIC_AUTH=" + k.postmark}, build: func(time.Time) schemeReqs {
		body := `{"MessageID":"883953f4-6105-42a2-a16a-77a8eac79483","Recipient":"john@example.com","RecordType":"Delivery"}`
		auth := func(cred string) wireReq {
			return wireReq{header: hdr("Content-Type", jsonCT, "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred))), body: []byte(body)}
		}
		return schemeReqs{event: auth(k.postmark), wantID: "Delivery:883953f4-6105-42a2-a16a-77a8eac79483:john@example.com", forged: ptr(auth("hooks:not-the-password"))}
	}})
	cases = append(cases, schemeCase{name: "telegram", env: env("telegram"), build: func(time.Time) schemeReqs {
		body := `{"message":{"message_id":1,"text":"hi"},"update_id":775001}`
		tok := func(secret string) wireReq {
			return wireReq{header: hdr("Content-Type", jsonCT, "X-Telegram-Bot-Api-Secret-Token", secret), body: []byte(body)}
		}
		return schemeReqs{event: tok(s["telegram"]), wantID: "775001", forged: ptr(tok("not_the_token"))}
	}})
	cases = append(cases, schemeCase{name: "okta", env: env("okta"), build: func(time.Time) schemeReqs {
		body := `{"data":{"events":[{"eventType":"user.session.start","uuid":"u1"}]},"eventId":"okta-e2e-1","eventType":"com.okta.event_hook"}`
		auth := func(v string) wireReq {
			return wireReq{header: hdr("Content-Type", jsonCT, "Authorization", v), body: []byte(body)}
		}
		challenge := func(v string) wireReq {
			return wireReq{method: http.MethodGet, header: hdr("Authorization", v, "X-Okta-Verification-Challenge", "okta-challenge-e2e")}
		}
		return schemeReqs{event: auth(s["okta"]), wantID: "okta-e2e-1", forged: ptr(auth("Bearer not-it")),
			handshakes: []handshake{{name: "verification", req: challenge(s["okta"]), check: exactBody(`{"verification":"okta-challenge-e2e"}`),
				forged: challenge("Bearer not-it")}}}
	}})
	cases = append(cases, schemeCase{name: "msgraph", env: env("msgraph"), build: func(time.Time) schemeReqs {
		note := func(state string) wireReq {
			body := `{"value":[{"changeType":"created","clientState":"` + state + `","resource":"Users/1/Messages/2","subscriptionId":"sub-1"}]}`
			return wireReq{header: hdr("Content-Type", jsonCT), body: []byte(body)}
		}
		ev := note(s["msgraph"])
		const token = "Validation: Testing client application reachability for subscription Request-Id: 1"
		return schemeReqs{event: ev, wantID: digestID(string(ev.body)), forged: ptr(note("not the client state")),
			handshakes: []handshake{{name: "validation", req: wireReq{query: "validationToken=" + url.QueryEscape(token)}, check: exactBody(token)}}}
	}})
	cases = append(cases, schemeCase{name: "adyen", env: []string{"WHGUARD_ADYEN_SECRET=" + k.adyenHex}, build: func(time.Time) schemeReqs {
		mk := func(keyHex string) wireReq {
			return wireReq{header: hdr("Content-Type", jsonCT), body: []byte(`{"live":"false","notificationItems":[` + adyenItem(keyHex, "PSP0E2E", "AUTHORISATION") + `]}`)}
		}
		return schemeReqs{event: mk(k.adyenHex), wantID: "PSP0E2E:AUTHORISATION", reply: "[accepted]",
			forged: ptr(mk("0000000000000000000000000000000000000000000000000000000000000000"))}
	}})
	snsEnv := []string{"WHGUARD_SNS_KEY_HOSTS=" + k.keyHost(), "WHGUARD_SNS_CA_FILE=" + k.caFile, "WHGUARD_SNS_TOPIC_ARNS=arn:aws:sns:*:123456789012:orders"}
	cases = append(cases, schemeCase{name: "sns", env: snsEnv, build: func(now time.Time) schemeReqs {
		msg := func(key *rsa.PrivateKey, typ, id string) wireReq {
			m := map[string]string{"Type": typ, "MessageId": id, "Message": `{"order":1}`, "Timestamp": now.UTC().Format("2006-01-02T15:04:05.000Z"),
				"TopicArn": "arn:aws:sns:us-east-2:123456789012:orders"}
			if typ != "Notification" {
				m["SubscribeURL"], m["Token"], m["Message"] = k.keySrv.URL+"/sns/confirm", "tok", "You have chosen to subscribe"
			}
			return wireReq{header: hdr("Content-Type", "text/plain; charset=UTF-8", "x-amz-sns-message-type", typ, "x-amz-sns-message-id", id),
				body: k.snsSign(key, m)}
		}
		return schemeReqs{event: msg(k.snsKey, "Notification", "sns-e2e-1"), wantID: "sns-e2e-1", forged: ptr(msg(k.snsOther, "Notification", "sns-e2e-1")),
			handshakes: []handshake{{name: "subscription_confirmation", req: msg(k.snsKey, "SubscriptionConfirmation", "sns-e2e-sub"),
				check: func(t *testing.T, _ []byte) {
					if k.confirmed.Load() != 1 {
						t.Fatalf("SubscribeURL fetched %d times, want once", k.confirmed.Load())
					}
				}, forged: msg(k.snsOther, "SubscriptionConfirmation", "sns-e2e-sub")}}}
	}})
	cases = append(cases, schemeCase{name: "pubsub", env: []string{"WHGUARD_PUBSUB_AUDIENCE=" + k.audience, "WHGUARD_PUBSUB_KEY_HOSTS=" + k.keyHost(),
		"WHGUARD_PUBSUB_CA_FILE=" + k.caFile, "WHGUARD_PUBSUB_SERVICE_ACCOUNTS=push@project.iam.gserviceaccount.com"}, build: func(now time.Time) schemeReqs {
		body := `{"message":{"data":"eyJvcmRlciI6MX0=","messageId":"ps-e2e-1"},"subscription":"projects/p/subscriptions/s"}`
		push := func(aud string) wireReq {
			return wireReq{header: hdr("Content-Type", jsonCT, "Authorization", "Bearer "+k.jwt(aud, now)), body: []byte(body)}
		}
		return schemeReqs{event: push(k.audience), wantID: "ps-e2e-1", forged: ptr(push("https://someone-else.example.com/push"))}
	}})
	return cases
}
