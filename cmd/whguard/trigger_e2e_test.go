package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PagerDuty/go-pagerduty/webhookv3"
	"github.com/google/go-github/v89/github"
	"github.com/slack-go/slack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82/webhook"
	svix "github.com/svix/svix-webhooks/go"
	twilioclient "github.com/twilio/twilio-go/client"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/verify"
)

// TestE2ETriggerEveryScheme starts one real whguard with every scheme
// configured as its own provider (TestE2EEveryScheme's configuration), and
// runs the real `whguard trigger NAME` for each: the sample it sends is
// accepted (202, or Adyen's 200 [accepted]) and reaches a backend that
// verifies it with the provider's SDK where go.mod has one (stripe-go,
// go-github, slack-go, the Standard Webhooks and Svix libraries, twilio-go,
// go-pagerduty), else with verify's own check of the same configuration.
// The schemes whose sender holds its key are refused by trigger with a
// message saying how to test them, and exit 2.
func TestE2ETriggerEveryScheme(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, drop, err := testdb.Create(ctx, "trigger")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)

	listen, admin := freePort(t), freePort(t)
	k, ring := newSchemeKeys(t), newRingKeys(t)
	cases := append(everySchemeCase(t, listen, k), secondRingCases(t, listen, ring)...)
	env := []string{
		"WHGUARD_DATABASE_URL=" + db,
		"WHGUARD_LISTEN=" + listen,
		"WHGUARD_ADMIN_LISTEN=" + admin,
		"WHGUARD_ADMIN_TOKEN=trigger-admin-token",
		"WHGUARD_RETRY_BASE_DELAY=100ms",
		"WHGUARD_RETRY_MAX_DELAY=1s",
		"WHGUARD_FORWARD_TIMEOUT=5s",
		"WHGUARD_SHUTDOWN_TIMEOUT=5s",
	}
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.name
		env = append(env, "WHGUARD_"+strings.ToUpper(c.name)+"_SCHEME="+c.name)
		env = append(env, c.env...)
	}
	env = append(env, "WHGUARD_PROVIDERS="+strings.Join(names, ","))

	// The backend checks with the same configuration as whguard's, which
	// names the backend's URL: known before it serves.
	be := &sdkBackend{k: k, verified: map[string]int{}}
	backend := httptest.NewUnstartedServer(be)
	env = append(env, "WHGUARD_BACKEND_URL=http://"+backend.Listener.Addr().String())
	if be.cfg, _, err = loadConfig(env); err != nil {
		t.Fatal(err)
	}
	backend.Start()
	t.Cleanup(backend.Close)

	wh := start(t, binary, env)
	waitHTTP(t, "http://"+admin+"/readyz", 20*time.Second)

	var sent []string
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runTrigger(t, env, name)
			if hint := verify.SenderKeyHint(name); hint != "" {
				if code != 2 || !strings.Contains(errOut, "a key only the provider holds") || !strings.Contains(errOut, hint) || out != "" {
					t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 saying the provider holds the key and how to test", code, out, errOut)
				}
				return
			}
			want := "\n202 {\"status\":\"accepted\",\"provider\":\"" + name + "\",\"event_id\":\""
			if name == "adyen" {
				want = "\n200 [accepted]\n"
			}
			if code != 0 || !strings.Contains(out, want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 and %q", code, out, errOut, want)
			}
			sent = append(sent, name)
		})
	}

	waitFor(t, 15*time.Second, "every triggered event verified by the backend", func() bool {
		be.mu.Lock()
		defer be.mu.Unlock()
		for _, name := range sent {
			if be.verified[name] == 0 {
				return false
			}
		}
		return true
	})
	be.mu.Lock()
	defer be.mu.Unlock()
	if len(be.failures) > 0 {
		t.Errorf("the backend refused deliveries: %v", be.failures)
	}
	for _, s := range sdkSchemes {
		if be.verified[s] == 0 {
			t.Errorf("%s: not verified with its SDK", s)
		}
	}
	if len(sent) != len(names)-4 {
		t.Errorf("%d providers triggered, want every one but sendgrid, discord, sns and pubsub", len(sent))
	}
	for _, s := range append(k.secrets(), ring.secrets()...) {
		if strings.Contains(wh.out.String(), s) {
			t.Errorf("whguard's logs contain a configured secret (%.8s…)", s)
		}
	}
}

// runTrigger runs the real `whguard trigger args…` with env.
func runTrigger(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	return runBinary(t, env, append([]string{"trigger"}, args...)...)
}

// runBinary runs the real whguard binary with args and env, and returns
// its exit code, standard output and standard error.
func runBinary(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// sdkSchemes are the schemes sdkBackend checks with the provider's SDK.
var sdkSchemes = []string{"stripe", "github", "slack", "standard", "svix", "twilio", "pagerduty"}

// sdkBackend is a backend that verifies each delivery as the provider's
// own library would, answering 401 to what does not verify.
type sdkBackend struct {
	k   *schemeKeys
	cfg *config // the same configuration as whguard's, for verify's check

	mu       sync.Mutex
	verified map[string]int // provider → deliveries verified
	failures []string
}

func (b *sdkBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	name := r.Header.Get("X-Whguard-Provider")
	r.Body = io.NopCloser(bytes.NewReader(body))
	err = b.check(name, r, body)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.failures = append(b.failures, name+": "+err.Error())
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	b.verified[name]++
}

// check verifies one delivery of provider name.
func (b *sdkBackend) check(name string, r *http.Request, body []byte) error {
	k := b.k
	switch name {
	case "stripe":
		// Re-signed by whguard with the current and the previous secret.
		_, err := webhook.ConstructEvent(body, r.Header.Get("Stripe-Signature"), k.stripeCur)
		return err
	case "github":
		_, err := github.ValidatePayload(r, []byte(k.github))
		return err
	case "slack":
		sv, err := slack.NewSecretsVerifier(r.Header, k.slack)
		if err != nil {
			return err
		}
		_, _ = sv.Write(body)
		return sv.Ensure()
	case "standard":
		wh, err := standardwebhooks.NewWebhook(k.standardCur)
		if err != nil {
			return err
		}
		return wh.Verify(body, r.Header)
	case "svix":
		wh, err := svix.NewWebhook(k.svix)
		if err != nil {
			return err
		}
		return wh.Verify(body, r.Header)
	case "twilio":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return err
		}
		params := map[string]string{}
		for p := range form {
			params[p] = form.Get(p)
		}
		rv := twilioclient.NewRequestValidator(k.twilioCur)
		if !rv.Validate(findProvider(b.cfg, name).env.PublicURL, params, r.Header.Get("X-Twilio-Signature")) {
			return errUnverified
		}
		return nil
	case "pagerduty":
		return webhookv3.VerifySignature(r, k.pagerDutyCur)
	}
	p := findProvider(b.cfg, name)
	if p == nil {
		return errUnverified
	}
	_, err := p.provider.Check(verify.Input{Header: r.Header, Body: body, RawQuery: r.URL.RawQuery}, time.Now())
	return err
}

var errUnverified = errors.New("signature does not verify")
