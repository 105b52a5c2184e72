package twiml

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestReplyIsTwiML(t *testing.T) {
	a := New()
	srv := httptest.NewServer(a)
	defer srv.Close()
	resp, err := http.PostForm(srv.URL, url.Values{"From": {"+14155550100"}, "Body": {"hi <there>"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/xml" ||
		!strings.Contains(string(b), "<Response><Message>You said: hi &lt;there&gt;</Message></Response>") {
		t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if a.Calls() != 1 {
		t.Fatalf("calls %d", a.Calls())
	}
}
