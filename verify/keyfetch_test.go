package verify

import (
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// keyServer is an HTTPS test server standing in for a provider's key host:
// it counts the requests it gets, per path too, and its certificate is
// written as a PEM file for ProviderConfig.CAFile.
type keyServer struct {
	*httptest.Server
	caFile string
	host   string // host:port, for ProviderConfig.KeyHosts
	hits   atomic.Int64
	mu     sync.Mutex
	routes map[string]http.HandlerFunc
	paths  map[string]int
}

func newKeyServer(t *testing.T) *keyServer {
	t.Helper()
	ks := &keyServer{routes: map[string]http.HandlerFunc{}, paths: map[string]int{}}
	ks.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ks.hits.Add(1)
		ks.mu.Lock()
		ks.paths[r.URL.Path]++
		h := ks.routes[r.URL.Path]
		ks.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}))
	ks.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	ks.StartTLS()
	t.Cleanup(ks.Close)
	ks.caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ks.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ks.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ks.host = strings.TrimPrefix(ks.URL, "https://")
	return ks
}

// handle serves path with h.
func (ks *keyServer) handle(path string, h http.HandlerFunc) {
	ks.mu.Lock()
	ks.routes[path] = h
	ks.mu.Unlock()
}

// serve answers path with 200, body and the given header pairs.
func (ks *keyServer) serve(path, body string, header ...string) {
	ks.handle(path, func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		_, _ = w.Write([]byte(body))
	})
}

// pathHits is how many requests path got.
func (ks *keyServer) pathHits(path string) int {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.paths[path]
}

// downHost returns a host:port where nothing listens.
func downHost(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	host := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	return host
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestKeyHostsAllowList(t *testing.T) {
	def, err := parseKeyHosts(nil, snsHostPattern)
	if err != nil {
		t.Fatal(err)
	}
	custom, err := parseKeyHosts([]string{" Keys.Example.COM ", "", "127.0.0.1:8443", "*.sns.example.net"}, snsHostPattern)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		hosts keyHosts
		url   string
		want  bool
	}{
		{def, "https://sns.us-east-1.amazonaws.com/x.pem", true},
		{def, "https://SNS.eu-west-3.AmazonAWS.com/x.pem", true},
		{def, "https://sns.cn-north-1.amazonaws.com.cn/x.pem", true},
		{def, "https://sns.us-east-1.amazonaws.com:443/x.pem", true},
		{def, "https://sns.us-east-1.amazonaws.com:8443/x.pem", false},
		{def, "https://sns.us.amazonaws.com/x.pem", false}, // region shorter than 3
		{def, "https://sns.us-east-1.amazonaws.com.evil.com/x.pem", false},
		{def, "https://evil.com/sns.us-east-1.amazonaws.com/x.pem", false},
		{def, "https://sqs.us-east-1.amazonaws.com/x.pem", false},
		{def, "https://sns.us-east-1.amazonaws.com./x.pem", false},
		{custom, "https://keys.example.com/x", true},
		{custom, "https://keys.example.com:443/x", true},
		{custom, "https://keys.example.com:444/x", false},
		{custom, "https://127.0.0.1:8443/x", true},
		{custom, "https://127.0.0.1/x", false},
		{custom, "https://a.sns.example.net/x", true},
		{custom, "https://sns.example.net/x", false},
		{custom, "https://sns.us-east-1.amazonaws.com/x.pem", false}, // KeyHosts replaces AWS's hosts
	} {
		if got := tc.hosts.allows(mustURL(t, tc.url)); got != tc.want {
			t.Errorf("allows(%s) = %v, want %v", tc.url, got, tc.want)
		}
	}
	v6, err := parseKeyHosts([]string{"[::1]:8443", "[::1]"}, nil)
	if err != nil || !v6.allows(mustURL(t, "https://[::1]:8443/x")) || !v6.allows(mustURL(t, "https://[::1]/x")) {
		t.Errorf("IPv6 entries: %+v, %v", v6, err)
	}
	for _, bad := range []string{"*", "*.com", "::1", "::1:8443", "host:0", "host:x", "a_b.com", "-a.com", "*.*.a.com", "https://keys.example.com", "keys.example.com/certs", "a b", "user@host", "*.a.com:443"} {
		if _, err := parseKeyHosts([]string{bad}, nil); len(FieldErrors(err)) != 1 || FieldErrors(err)[0].Field != FieldKeyHosts {
			t.Errorf("KeyHosts %q: err = %v, want one KeyHosts FieldError", bad, err)
		}
	}
}

func TestKeyClientConfiguration(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  ProviderConfig
		want []Field
	}{
		{"missing CA file", ProviderConfig{CAFile: filepath.Join(dir, "absent.pem")}, []Field{FieldCAFile}},
		{"CA file without a certificate", ProviderConfig{CAFile: notPEM}, []Field{FieldCAFile}},
		{"bad host and bad CA file", ProviderConfig{CAFile: notPEM, KeyHosts: []string{"*"}}, []Field{FieldKeyHosts, FieldCAFile}},
	} {
		_, err := newKeyClient(tc.cfg, snsHostPattern)
		var got []Field
		for _, fe := range FieldErrors(err) {
			got = append(got, fe.Field)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: fields %v, want %v (%v)", tc.name, got, tc.want, err)
		}
	}
}

func TestKeyClientFetch(t *testing.T) {
	ks := newKeyServer(t)
	ks.serve("/ok.pem", "key")
	ks.handle("/redirect.pem", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok.pem", http.StatusFound) })
	ks.serve("/huge.pem", strings.Repeat("k", maxKeyBody+1))
	// Answers only once the client has given up (or the test ends): a
	// timer here could fire first on a starved machine and answer 200.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	ks.handle("/slow.pem", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	c, err := newKeyClient(ProviderConfig{KeyHosts: []string{ks.host}, CAFile: ks.caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.client.Timeout = 300 * time.Millisecond

	body, _, err := c.fetch("key", mustURL(t, ks.URL+"/ok.pem"))
	if err != nil || string(body) != "key" {
		t.Fatalf("fetch = %q, %v", body, err)
	}
	for _, path := range []string{"/redirect.pem", "/huge.pem", "/slow.pem", "/absent.pem"} {
		began := time.Now()
		body, _, err := c.fetch("key", mustURL(t, ks.URL+path+"?Token=secret-token"))
		if !errors.Is(err, ErrUnavailable) || Reason(err) != ReasonKeyUnavailable || errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: err = %v after %v (%d bytes), want ErrUnavailable alone with %s", path, err, time.Since(began), len(body), ReasonKeyUnavailable)
		}
		if err != nil && strings.Contains(err.Error(), "secret-token") {
			t.Errorf("%s: error quotes the URL's query: %v", path, err)
		}
	}
	if n := ks.pathHits("/ok.pem"); n != 1 {
		t.Errorf("the redirect was followed: /ok.pem fetched %d times", n)
	}

	// Without the CA file the test server's certificate is not trusted.
	system, err := newKeyClient(ProviderConfig{KeyHosts: []string{ks.host}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := system.fetch("key", mustURL(t, ks.URL+"/ok.pem")); !errors.Is(err, ErrUnavailable) {
		t.Errorf("untrusted certificate: err = %v", err)
	}
}

func TestKeyClientAllowedURL(t *testing.T) {
	c, err := newKeyClient(ProviderConfig{}, snsHostPattern)
	if err != nil {
		t.Fatal(err)
	}
	const good = "https://sns.us-east-2.amazonaws.com/SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem"
	if u, err := c.allowedURL("SigningCertURL", good, ".pem"); err != nil || u.String() != good {
		t.Fatalf("allowedURL(%s) = %v, %v", good, u, err)
	}
	for _, raw := range []string{
		"http://sns.us-east-2.amazonaws.com/cert.pem",
		"https://sns.us-east-2.amazonaws.com/cert.txt",
		"https://user@sns.us-east-2.amazonaws.com/cert.pem",
		"https://evil.example.com/cert.pem",
		"https://evil.example.com\\@sns.us-east-2.amazonaws.com/cert.pem",
		"//sns.us-east-2.amazonaws.com/cert.pem",
		"sns.us-east-2.amazonaws.com/cert.pem",
		"https:sns.us-east-2.amazonaws.com/cert.pem",
		"https://sns.us-east-2.amazonaws.com/" + strings.Repeat("a", maxKeyURLLen) + ".pem",
		"",
		"%",
	} {
		_, err := c.allowedURL("SigningCertURL", raw, ".pem")
		if !errors.Is(err, ErrUnauthorized) || Reason(err) != ReasonUntrustedKeyURL {
			t.Errorf("allowedURL(%q): err = %v, want 401 %s", raw, err, ReasonUntrustedKeyURL)
		}
	}
}
