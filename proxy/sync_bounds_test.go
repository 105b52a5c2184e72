package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSyncReplyContentTypeBounds: the Content-Type of a sync reply is the
// backend's, so it is bounded like the rest of what is stored from it: over
// 256 bytes, the reply is not stored and the sender gets the usual 202
// (found: 1 MB was stored and served to the sender and every duplicate);
// not UTF-8, it is stored escaped and served so.
func TestSyncReplyContentTypeBounds(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		t.Run("TooLong", func(t *testing.T) {
			long := "text/xml; x=" + strings.Repeat("a", 1<<20)
			s := newSyncStack(t, store, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header()["Content-Type"] = []string{long}
				io.WriteString(w, "<Response/>")
			}), 2*time.Second)
			h, body := twilioSMS(t, s.url+"/webhooks/twilio", "long content type")
			r := s.post(t, "/webhooks/twilio", h, body)
			if r.status != http.StatusAccepted || !isAccepted(r) || len(r.header.Get("Content-Type")) > 256 {
				t.Fatalf("reply with a 1 MB Content-Type: %d %.80s (Content-Type %d bytes)", r.status, r.body, len(r.header.Get("Content-Type")))
			}
			if d := s.waitStatus(t, s.only(t).ID, "done"); d.Reply != nil {
				t.Fatalf("stored a reply with a 1 MB Content-Type: %+v", d.Reply.ContentType[:80])
			}
			if r := s.post(t, "/webhooks/twilio", h, body); r.status != http.StatusOK || !isAccepted(r) {
				t.Fatalf("duplicate: %d %.80s", r.status, r.body)
			}
		})
		t.Run("NotUTF8", func(t *testing.T) {
			s := newSyncStack(t, store, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header()["Content-Type"] = []string{"text/xml; charset=\xff\xfe"}
				io.WriteString(w, "<Response/>")
			}), 2*time.Second)
			h, body := twilioSMS(t, s.url+"/webhooks/twilio", "odd content type")
			r := s.post(t, "/webhooks/twilio", h, body)
			want := `text/xml; charset=\xff\xfe`
			if r.status != http.StatusOK || r.body != "<Response/>" || r.header.Get("Content-Type") != want {
				t.Fatalf("reply: %d %q, Content-Type %q; want %q", r.status, r.body, r.header.Get("Content-Type"), want)
			}
			d := s.waitStatus(t, s.only(t).ID, "done")
			if d.Reply == nil || d.Reply.ContentType != want {
				t.Fatalf("stored reply %+v", d.Reply)
			}
			if r := s.post(t, "/webhooks/twilio", h, body); r.status != http.StatusOK || r.header.Get("Content-Type") != want {
				t.Fatalf("duplicate: %d %q", r.status, r.header.Get("Content-Type"))
			}
		})
	})
}

// TestSyncSenderThatHalfCloses: a sender that closes its side of the
// connection once its request is sent still gets the backend's answer
// (found: it got an empty 200).
func TestSyncSenderThatHalfCloses(t *testing.T) {
	t.Parallel()
	s := newSyncStack(t, "sqlite", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(100 * time.Millisecond)
		w.Header().Set("Content-Type", "text/xml")
		io.WriteString(w, "<Response><Message>hi</Message></Response>")
	}), 2*time.Second)
	h, body := twilioSMS(t, s.url+"/webhooks/twilio", "half close")
	c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var req strings.Builder
	fmt.Fprintf(&req, "POST /webhooks/twilio HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", strings.TrimPrefix(s.url, "http://"), len(body))
	for k, vs := range h {
		fmt.Fprintf(&req, "%s: %s\r\n", k, vs[0])
	}
	req.WriteString("\r\n" + body)
	if _, err := io.WriteString(c, req.String()); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "<Response><Message>hi</Message></Response>" {
		t.Fatalf("half-closed sender got %d %q", resp.StatusCode, b)
	}
}
