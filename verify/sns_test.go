package verify

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// snsAWSFixtures are the four notifications AWS signed for
// aws/aws-php-sns-message-validator tests/FunctionalValidationsTest.php
// (us-east-2; SignatureVersion 1 and 2, with and without Subject), signed
// by the certificate in testdata/ringd/sns-aws-fixture-cert.pem. Their
// SigningCertURL is https://sns.us-east-2.amazonaws.com + snsAWSCertPath.
var snsAWSFixtures = []map[string]string{
	{
		"Type": "Notification", "MessageId": "792cda85-518f-5dd3-9163-81d851212f3a",
		"TopicArn": "arn:aws:sns:us-east-2:295079676684:publish-and-verify-892f85fe-4836-424d-8188-ab85bef0f362",
		"Message":  "Hello world", "Timestamp": "2022-07-28T21:23:58.317Z", "SignatureVersion": "1",
		"Signature":      "ghtf+deOBAzHJJZ6s6CdRLfTQAlcGzq9naoFM1wi0CJiq//uVRuZnamrkWNF0fhouMFvuLVRwcz8PZLUMSfnmd5VpdTKpTyiKmy1qJAZXma0w+yi7G+I33hD1Jyk1Nbym2n0kqp3fVu2aoooiN2ZeLAT2bH0/BtjLSfN1yAOKNoprco4qV9gGUZinXJdj9a1YdNhDR2jKi33ldlsVtEXAtiaDklGEk7DgRKX38GerBPiLg3FdtgY6KC7cdeGpU/dGK+4hjc83Ive1HoFkAwqhpgInM2sMytBosoiXfCmOKmU4xeGD0gHDNZTlJUJQDlzw8Eag0H9f/5zXF9d3uy0YQ==",
		"UnsubscribeURL": "https://sns.us-east-2.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-east-2:295079676684:publish-and-verify-892f85fe-4836-424d-8188-ab85bef0f362:2296bc94-7992-4be1-b15f-b97229b5c1d8",
	},
	{
		"Type": "Notification", "MessageId": "17dea24b-55c2-540b-8362-f916557af765",
		"TopicArn": "arn:aws:sns:us-east-2:295079676684:publish-and-verify-62674b1d-4295-426b-88e7-5fb75652a04e",
		"Message":  "Hello world", "Timestamp": "2022-07-28T21:24:08.324Z", "SignatureVersion": "2",
		"Signature":      "CXVqp9PfZAL+4JHS3Zxo1PFbQsvnOjvmYhtIf17TWpwc+iIVas8kZ8GopuzVzVMdatE7rCl/O4P91Zp05Dwz8lk8dLhfp8gSu3Njlzxlyrmzo9x3va3Jb7zFnedgS2GKnZWHGBdwTXho+TosNUE+3e10OMSlwN5XGDwX7+R3WL+rn+AXmFAqp3alg27sYa55h1dLE9cGszGPjScPdtF3BmZsUDMx9wSdNKsCk+vSvE8yBjnCmUl7laSFj3LzPVrlSwgNYCF3kYnNAkah7NplK4SFhJYLwS0HCVCQJKa8rVbQLf9cBTu60U402mrgy0bN8xWoyimzbYbrOMJjalqkUg==",
		"UnsubscribeURL": "https://sns.us-east-2.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-east-2:295079676684:publish-and-verify-62674b1d-4295-426b-88e7-5fb75652a04e:ad7d16e3-0a7c-46aa-b23e-ffaf02250cbe",
	},
	{
		"Type": "Notification", "MessageId": "11405cc3-9ac7-56d5-b45d-079e8f7a8edf",
		"TopicArn": "arn:aws:sns:us-east-2:295079676684:publish-and-verify-6e11fed2-fcdf-4c52-9dc4-36ef43f37f84",
		"Subject":  "Hello world", "Message": "Hello world", "Timestamp": "2022-07-28T22:53:49.654Z", "SignatureVersion": "1",
		"Signature":      "AItkS26d8yvnIKJevdirIPW7eM/yKbZy3/CF2EreCHmXWB3etWaV5Fb7SYpGABMpugpDZzNyGY1wCVWaopDoQ+7Q/kI2TpDu8bw1eExbi8U3kduvc/2m2fIrI4gDEY8/v3nzoLcr8pPodqMzrX6SzQou4klfaqbNK+rFmH0LVf2Q1VyOROODoSXmo4jg2Yu12jfxccBl96Drr/ihq4MJ4OcrWh6UzXXlVYjJHx2Ui4anNwNEb+Z4C2CAF1DjQUbhDtaoajDBPY+4d9C1OwbqwQpXsd6tyVcI9nFyEsVK8lfnAV+/3GZQcdXHbIUYBRGcBa4X5TlWJku5nDH2ERtHHw==",
		"UnsubscribeURL": "https://sns.us-east-2.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-east-2:295079676684:publish-and-verify-6e11fed2-fcdf-4c52-9dc4-36ef43f37f84:adb318c3-2234-4c56-905d-c324cf0df874",
	},
	{
		"Type": "Notification", "MessageId": "4504e649-d933-5aa9-8199-bd14ccf05f0b",
		"TopicArn": "arn:aws:sns:us-east-2:295079676684:publish-and-verify-530b26da-0687-4fe4-9f71-780bad3181e2",
		"Subject":  "Hello world", "Message": "Hello world", "Timestamp": "2022-07-28T22:53:55.086Z", "SignatureVersion": "2",
		"Signature":      "cETcSvmmkt+My05qCLKexyl0+RyG83mSryKPqTfS+tYcxDJWVcjPJAr+qdpElzVaBl1aTGYVWMY64i9JqZ/JES8pylNj8LGvdhuNQKO59/WCoIimZAsNhn0xEgOeeDU+W/0BU4sdpCGMNjo0S/FuIiWaRe4E0YWRVrxeQevaQ70euDdfWgd5v1eCKQz8b367b9XBmMztL/CWUFI6YaKK/MV21eyvJe3Y7CtVYiOKEYiAZnAEkynK7gUGO5TsgDjGNYhj6U3xYsWgI03bmioSl7kdFSUj+AZ7ugas5fghqxgoDsdfqsjMYKRm5KKHQWsgzI619yIzpNKUiSMHxdZXpQ==",
		"UnsubscribeURL": "https://sns.us-east-2.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-east-2:295079676684:publish-and-verify-530b26da-0687-4fe4-9f71-780bad3181e2:db0ad2ad-03d1-48ca-a5da-51f317800a57",
	},
}

const snsAWSCertPath = "/SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem"

// snsJSON writes an SNS envelope.
func snsJSON(t testing.TB, fields map[string]string) string {
	t.Helper()
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readTestFile reads a file of testdata/ringd.
func readTestFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/ringd/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readRSAKey reads a PKCS#1 PEM test key of testdata/ringd.
func readRSAKey(t testing.TB, name string) *rsa.PrivateKey {
	t.Helper()
	block, _ := pem.Decode(readTestFile(t, name))
	if block == nil {
		t.Fatalf("%s: no PEM", name)
	}
	k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return k
}

// snsTestSignedKeys is the string-to-sign order of AWS's docs and PHP
// validator, written out again here so that the tests do not take it from
// the code under test.
var snsTestSignedKeys = map[string][]string{
	"Notification":             {"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"},
	"SubscriptionConfirmation": {"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"},
	"UnsubscribeConfirmation":  {"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"},
}

// signSNS sets fields' Signature: RSA PKCS#1 v1.5 with key over the
// string to sign of keys (the type's list when nil), SHA1 or SHA256 by
// SignatureVersion.
func signSNS(t testing.TB, key *rsa.PrivateKey, fields map[string]string, keys []string) map[string]string {
	t.Helper()
	if keys == nil {
		keys = snsTestSignedKeys[fields["Type"]]
	}
	var b strings.Builder
	for _, k := range keys {
		if v, ok := fields[k]; ok {
			b.WriteString(k + "\n" + v + "\n")
		}
	}
	var sig []byte
	var err error
	if fields["SignatureVersion"] == "1" {
		sum := sha1.Sum([]byte(b.String()))
		sig, err = rsa.SignPKCS1v15(nil, key, crypto.SHA1, sum[:])
	} else {
		sum := sha256.Sum256([]byte(b.String()))
		sig, err = rsa.SignPKCS1v15(nil, key, crypto.SHA256, sum[:])
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range fields {
		out[k] = v
	}
	out["Signature"] = base64.StdEncoding.EncodeToString(sig)
	return out
}

// The four AWS-signed fixtures verify through NewProvider and Check, their
// certificate served by a test HTTPS server: SigningCertURL is not part of
// the string to sign, so pointing it at that server leaves AWS's signatures
// valid. The certificate is fetched once for the four (and for a burst of
// concurrent requests).
func TestSNSAWSFixtures(t *testing.T) {
	ks := newKeyServer(t)
	ks.handle(snsAWSCertPath, func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(50 * time.Millisecond) // long enough for the burst below to queue on one fetch
		_, _ = w.Write(readTestFile(t, "sns-aws-fixture-cert.pem"))
	})
	p := mustProvider(t, ProviderConfig{Name: "aws", Scheme: SchemeSNS, KeyHosts: []string{ks.host}, CAFile: ks.caFile})

	bodies := make([]string, len(snsAWSFixtures))
	for i, f := range snsAWSFixtures {
		g := map[string]string{"SigningCertURL": ks.URL + snsAWSCertPath}
		for k, v := range f {
			g[k] = v
		}
		bodies[i] = snsJSON(t, g)
	}
	var wg sync.WaitGroup
	for i, f := range snsAWSFixtures {
		now, err := time.Parse(time.RFC3339, f["Timestamp"])
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ev, err := p.Check(Input{Header: headers("Content-Type", "text/plain; charset=UTF-8", "x-amz-sns-message-type", "Notification"), Body: []byte(bodies[i])}, now.Add(time.Minute))
				if err != nil {
					t.Errorf("fixture %d (SignatureVersion %s): %v", i, f["SignatureVersion"], err)
					return
				}
				if ev.ID != f["MessageId"] || ev.Type != f["TopicArn"] || ev.Handshake != nil || ev.Note != "" {
					t.Errorf("fixture %d: event %+v", i, ev)
				}
			}()
		}
	}
	wg.Wait()
	if n := ks.pathHits(snsAWSCertPath); n != 1 {
		t.Errorf("certificate fetched %d times, want once", n)
	}

	// Tampering with any signed field breaks AWS's signature.
	now, _ := time.Parse(time.RFC3339, snsAWSFixtures[0]["Timestamp"])
	for _, change := range []struct{ key, value string }{{"Message", "Hello world!"}, {"Subject", "Hello world"}, {"TopicArn", "arn:aws:sns:us-east-2:1:other"}, {"SignatureVersion", "2"}} {
		g := map[string]string{"SigningCertURL": ks.URL + snsAWSCertPath}
		for k, v := range snsAWSFixtures[0] {
			g[k] = v
		}
		g[change.key] = change.value
		_, err := p.Check(Input{Body: []byte(snsJSON(t, g))}, now)
		if !errors.Is(err, ErrUnauthorized) || Reason(err) != ReasonSignatureMismatch {
			t.Errorf("fixture with %s changed: err = %v", change.key, err)
		}
	}
}

// With AWS's own hosts (no KeyHosts), a fixture naming its real
// SigningCertURL verifies against the cached certificate: this is the
// fixture exactly as AWS signed it, and no request leaves the test.
func TestSNSDefaultHostsFixture(t *testing.T) {
	p := mustProvider(t, ProviderConfig{Name: "aws", Scheme: SchemeSNS})
	s := p.keys.Load().verifier.(*snsScheme)
	pub, err := parseSNSCert(readTestFile(t, "sns-aws-fixture-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	const certURL = "https://sns.us-east-2.amazonaws.com" + snsAWSCertPath
	then, _ := time.Parse(time.RFC3339, snsAWSFixtures[0]["Timestamp"])
	s.certs.store(certURL, keyEntry[*rsa.PublicKey]{val: pub, fetched: then, expires: then.Add(snsCertTTL)}, then)
	s.keys.client.Transport = failingTransport{t}
	for i, f := range snsAWSFixtures {
		g := map[string]string{"SigningCertURL": certURL}
		for k, v := range f {
			g[k] = v
		}
		now, _ := time.Parse(time.RFC3339, f["Timestamp"])
		ev, err := p.Check(Input{Body: []byte(snsJSON(t, g))}, now)
		if err != nil || ev.ID != f["MessageId"] {
			t.Errorf("fixture %d: %+v, %v", i, ev, err)
		}
	}
}

// failingTransport fails a test that makes a request.
type failingTransport struct{ t *testing.T }

func (f failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.t.Errorf("unexpected request to %s", r.URL.Host)
	return nil, errors.New("no network in this test")
}

// A key host that cannot be reached is a 503, never an accept; the
// provider's other properties follow the registry.
func TestSNSKeyHostDownAndProperties(t *testing.T) {
	ks := newKeyServer(t)
	down := downHost(t)
	p := mustProvider(t, ProviderConfig{Name: "orders", Scheme: SchemeSNS, KeyHosts: []string{down}, CAFile: ks.caFile})
	f := signSNS(t, readRSAKey(t, "sns-test-key.pem"), map[string]string{"Type": "Notification", "MessageId": "m1", "TopicArn": snsTestTopic,
		"Message": "x", "Timestamp": snsTestTS, "SignatureVersion": "2", "SigningCertURL": "https://" + down + "/cert.pem"}, nil)
	_, err := p.Check(Input{Body: []byte(snsJSON(t, f))}, time.Unix(1700000000, 0))
	if !errors.Is(err, ErrUnavailable) || Reason(err) != ReasonKeyUnavailable || errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrBadRequest) {
		t.Fatalf("key host down: err = %v, want 503 %s", err, ReasonKeyUnavailable)
	}

	if !p.IDSigned() || p.CanResign() || ResignSupport(SchemeSNS) != ResignPublicKey || len(RequiredFields(SchemeSNS)) != 0 || DefaultTolerance(SchemeSNS) != time.Hour {
		t.Errorf("IDSigned %v, CanResign %v, resign %q, required %v, tolerance %v", p.IDSigned(), p.CanResign(),
			ResignSupport(SchemeSNS), RequiredFields(SchemeSNS), DefaultTolerance(SchemeSNS))
	}
	// Precheck refuses raw delivery before the body is read, and lets an
	// envelope through to Check without fetching anything.
	if err := p.Precheck(headers("x-amz-sns-rawdelivery", "true"), "", "", time.Unix(1700000000, 0)); !errors.Is(err, ErrBadRequest) {
		t.Errorf("Precheck of a raw delivery: %v", err)
	}
	if err := p.Precheck(headers("x-amz-sns-message-type", "Notification"), "", "", time.Unix(1700000000, 0)); err != nil {
		t.Errorf("Precheck of an envelope: %v", err)
	}
	if p.Accepts(http.MethodGet) {
		t.Error("sns accepts GET")
	}
	if _, err := NewProvider(ProviderConfig{Name: "x", Scheme: SchemeSNS, KeyHosts: []string{"https://x"}}); len(FieldErrors(err)) != 1 {
		t.Errorf("bad KeyHosts: %v", err)
	}
}

// A SigningCertURL or SubscribeURL on a host off the allow-list is refused
// before any request: the host it names, a live HTTPS server whose CA is
// trusted, sees nothing.
func TestSNSOffListHostGetsNoRequest(t *testing.T) {
	listed, other := newKeyServer(t), newKeyServer(t)
	listed.serve("/cert.pem", string(readTestFile(t, "sns-test-cert.pem")))
	other.serve("/cert.pem", string(readTestFile(t, "sns-test-cert.pem")))
	p := mustProvider(t, ProviderConfig{Name: "orders", Scheme: SchemeSNS, KeyHosts: []string{listed.host}, CAFile: other.caFile})
	key := readRSAKey(t, "sns-test-key.pem")
	for _, f := range []map[string]string{
		{"Type": "Notification", "SigningCertURL": other.URL + "/cert.pem"},
		{"Type": "SubscriptionConfirmation", "SigningCertURL": listed.URL + "/cert.pem", "Token": "t", "SubscribeURL": other.URL + "/?Action=ConfirmSubscription"},
	} {
		for k, v := range map[string]string{"MessageId": "m", "TopicArn": snsTestTopic, "Message": "x", "Timestamp": snsTestTS, "SignatureVersion": "2"} {
			f[k] = v
		}
		_, err := p.Check(Input{Body: []byte(snsJSON(t, signSNS(t, key, f, nil)))}, time.Unix(1700000000, 0))
		if !errors.Is(err, ErrUnauthorized) || Reason(err) != ReasonUntrustedKeyURL {
			t.Errorf("%s naming %s: err = %v", f["Type"], other.host, err)
		}
	}
	if n := other.hits.Load() + listed.hits.Load(); n != 0 {
		t.Errorf("%d requests made", n)
	}
}
