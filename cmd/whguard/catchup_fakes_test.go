package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fake provider APIs for catch-up's tests. They speak the documented wire
// shapes, which the official clients (stripe-go, go-github) page through
// unchanged, and record every request. A fault mode makes them fail.

// Fault modes of the fakes.
const (
	faultNone      = ""
	fault401       = "401"
	fault404       = "404"
	fault429       = "429"
	fault500       = "500"
	faultHang      = "hang"
	faultSecondary = "secondary" // GitHub's secondary rate limit (403 + Retry-After)
	faultLowRate   = "low-rate"  // answers, with under a fifth of the rate limit left
)

// fakePageSize caps a page below the clients' 100, so that paging is
// exercised.
const fakePageSize = 10

// stripeEvent is one event the fake Stripe API holds.
type stripeEvent struct {
	id, typ   string
	created   int64
	delivered bool // delivery_success
}

// render is the event as the API lists it.
func (e stripeEvent) render() []byte {
	return fmt.Appendf(nil, `{"id":"%s","object":"event","api_version":"2024-06-20","created":%d,"data":{"object":{"id":"in_%s","object":"invoice","amount_due":1200}},"livemode":false,"pending_webhooks":1,"request":{"id":null,"idempotency_key":null},"type":"%s"}`,
		e.id, e.created, e.id, e.typ)
}

// webhookRendering is the same event as its webhook carries it: another
// key order, other whitespace, and pending_webhooks already counted down.
func (e stripeEvent) webhookRendering() []byte {
	return fmt.Appendf(nil, "{\n  \"type\": \"%s\",\n  \"id\": \"%s\",\n  \"object\": \"event\",\n  \"pending_webhooks\": 0,\n  \"created\": %d,\n  \"livemode\": false,\n  \"api_version\": \"2024-06-20\",\n  \"request\": {\"idempotency_key\": null, \"id\": null},\n  \"data\": {\"object\": {\"amount_due\": 1200, \"object\": \"invoice\", \"id\": \"in_%s\"}}\n}",
		e.typ, e.id, e.created, e.id)
}

type fakeStripe struct {
	t       *testing.T
	srv     *httptest.Server
	key     string
	enabled []string // the endpoint's enabled_events

	mu       sync.Mutex
	events   []stripeEvent // oldest first
	fault    string
	version  string     // the endpoint's api_version ("": null, the account's)
	requests []*url.URL // every request's URL
	auths    []string
}

func newFakeStripe(t *testing.T, key string, enabled []string) *fakeStripe {
	f := &fakeStripe{t: t, key: key, enabled: enabled}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeStripe) add(e stripeEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.created == 0 {
		e.created = time.Now().Unix()
	}
	f.events = append(f.events, e)
}

func (f *fakeStripe) setEndpointVersion(v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version = v
}

func (f *fakeStripe) setFault(m string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = m
}

// listCalls counts the event listings that started a pass (no
// starting_after).
func (f *fakeStripe) listCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, u := range f.requests {
		if u.Path == "/v1/events" && u.Query().Get("starting_after") == "" {
			n++
		}
	}
	return n
}

func (f *fakeStripe) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.URL)
	f.auths = append(f.auths, r.Header.Get("Authorization"))
	fault := f.fault
	version := "null"
	if f.version != "" {
		version = strconv.Quote(f.version)
	}
	f.mu.Unlock()
	stripeError := func(status int, typ, code, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"type":%q,"code":%q,"message":%q}}`, typ, code, msg)
	}
	masked := "rk_test_****" + f.key[len(f.key)-4:]
	switch {
	case fault == faultHang:
		<-r.Context().Done()
		return
	case fault == fault401 || r.Header.Get("Authorization") != "Bearer "+f.key:
		stripeError(http.StatusUnauthorized, "invalid_request_error", "", "Invalid API Key provided: "+masked)
		return
	case fault == fault429:
		w.Header().Set("Retry-After", "7")
		stripeError(http.StatusTooManyRequests, "invalid_request_error", "rate_limit", "Too many requests hit the API too quickly.")
		return
	case fault == fault500:
		stripeError(http.StatusInternalServerError, "api_error", "", "Something went wrong on Stripe's end.")
		return
	}
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/webhook_endpoints/"):
		id := strings.TrimPrefix(r.URL.Path, "/v1/webhook_endpoints/")
		if fault == fault404 || id != "we_catchup" {
			stripeError(http.StatusNotFound, "invalid_request_error", "resource_missing", "No such webhook endpoint: '"+id+"'")
			return
		}
		enabled, _ := json.Marshal(f.enabled)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"we_catchup","object":"webhook_endpoint","api_version":%s,"enabled_events":%s,"status":"enabled","url":"https://example.com/webhooks/stripe"}`, version, enabled)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/events":
		f.list(w, r)
	default:
		stripeError(http.StatusNotFound, "invalid_request_error", "", "Unrecognized request URL")
	}
}

// list answers GET /v1/events: newest first, delivery_success,
// created[gte], types[] and starting_after honoured.
func (f *fakeStripe) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var types []string
	for k, vs := range q {
		if strings.HasPrefix(k, "types[") {
			types = append(types, vs...)
		}
	}
	gte, _ := strconv.ParseInt(q.Get("created[gte]"), 10, 64)
	limit, _ := strconv.Atoi(q.Get("limit"))
	limit = min(max(limit, 1), fakePageSize)
	f.mu.Lock()
	var match []stripeEvent
	for i := len(f.events) - 1; i >= 0; i-- {
		e := f.events[i]
		switch {
		case q.Get("delivery_success") == "false" && e.delivered, q.Get("delivery_success") == "true" && !e.delivered:
		case e.created < gte:
		case len(types) > 0 && !slices.Contains(types, e.typ):
		default:
			match = append(match, e)
		}
	}
	f.mu.Unlock()
	if after := q.Get("starting_after"); after != "" {
		i := slices.IndexFunc(match, func(e stripeEvent) bool { return e.id == after })
		match = match[i+1:]
	}
	more := len(match) > limit
	if more {
		match = match[:limit]
	}
	var b bytes.Buffer
	b.WriteString(`{"object":"list","url":"/v1/events","has_more":` + strconv.FormatBool(more) + `,"data":[`)
	for i, e := range match {
		if i > 0 {
			b.WriteString(",")
		}
		b.Write(e.render())
	}
	b.WriteString("]}")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b.Bytes())
}

// ghDelivery is one delivery attempt the fake GitHub API recorded.
type ghDelivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	Duration    float64   `json:"duration"`
	Status      string    `json:"status"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
	Action      *string   `json:"action"`
	RepoID      int64     `json:"repository_id"`
}

type fakeGitHub struct {
	t       *testing.T
	srv     *httptest.Server
	token   string
	secret  string
	hook    string // repos/OWNER/REPO/hooks/ID
	ingress string // where deliveries go

	mu          sync.Mutex
	deliveries  []ghDelivery // oldest first
	payloads    map[string][]byte
	nextID      int64
	fault       string
	redelivered []string // GUIDs redelivery was asked for, in order
	requests    int
	pending     sync.WaitGroup
}

func newFakeGitHub(t *testing.T, token, secret, hook string) *fakeGitHub {
	f := &fakeGitHub{t: t, token: token, secret: secret, hook: hook, payloads: map[string][]byte{}, nextID: 1000}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() { f.pending.Wait(); f.srv.Close() })
	return f
}

func (f *fakeGitHub) setFault(m string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = m
}

func (f *fakeGitHub) payload(guid string) []byte {
	return fmt.Appendf(nil, `{"ref":"refs/heads/main","after":"%s","repository":{"id":1,"full_name":"acme/app"}}`, guid)
}

// record adds a delivery attempt of guid with status code (0: GitHub
// could not connect).
func (f *fakeGitHub) record(guid string, code int, redelivery bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	status := "OK"
	if code == 0 {
		status = "failed to connect to host"
	} else if code/100 != 2 {
		status = "Invalid HTTP Response: " + strconv.Itoa(code)
	}
	f.deliveries = append(f.deliveries, ghDelivery{ID: f.nextID, GUID: guid, DeliveredAt: time.Now().UTC(), Redelivery: redelivery,
		Duration: 0.05, Status: status, StatusCode: code, Event: "push", RepoID: 1})
	f.payloads[guid] = f.payload(guid)
}

// deliver sends guid to the ingress, signed, as GitHub does, and records
// the attempt with the answer's status (0: no answer).
func (f *fakeGitHub) deliver(guid string, redelivery bool) int {
	body := f.payload(guid)
	mac := hmac.New(sha256.New, []byte(f.secret))
	mac.Write(body)
	req, _ := http.NewRequest(http.MethodPost, f.ingress, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", guid)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	code := 0
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err == nil {
		code = resp.StatusCode
		resp.Body.Close()
	}
	f.record(guid, code, redelivery)
	return code
}

func (f *fakeGitHub) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.redelivered)
}

func (f *fakeGitHub) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests++
	fault := f.fault
	f.mu.Unlock()
	doc := "https://docs.github.com/rest"
	ghError := func(status int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"message":%q,"documentation_url":%q}`, msg, doc)
	}
	reset := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	w.Header().Set("X-RateLimit-Limit", "5000")
	w.Header().Set("X-RateLimit-Remaining", "4990")
	w.Header().Set("X-RateLimit-Reset", reset)
	if fault == faultLowRate {
		w.Header().Set("X-RateLimit-Remaining", "900")
	}
	switch {
	case fault == faultHang:
		<-r.Context().Done()
		return
	case fault == fault401 || r.Header.Get("Authorization") != "Bearer "+f.token:
		ghError(http.StatusUnauthorized, "Bad credentials")
		return
	case fault == fault429:
		w.Header().Set("X-RateLimit-Remaining", "0")
		ghError(http.StatusForbidden, "API rate limit exceeded for user ID 1.")
		return
	case fault == faultSecondary:
		w.Header().Set("Retry-After", "60")
		doc = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"
		ghError(http.StatusForbidden, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
		return
	case fault == fault500:
		ghError(http.StatusInternalServerError, "Server Error")
		return
	}
	base := "/" + f.hook + "/deliveries"
	switch {
	case fault == fault404 || !strings.HasPrefix(r.URL.Path, base):
		ghError(http.StatusNotFound, "Not Found")
	case r.Method == http.MethodGet && r.URL.Path == base:
		f.list(w, r)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/attempts"):
		id, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, base+"/"), "/attempts"), 10, 64)
		f.mu.Lock()
		i := slices.IndexFunc(f.deliveries, func(d ghDelivery) bool { return d.ID == id })
		var guid string
		if i >= 0 {
			guid = f.deliveries[i].GUID
			f.redelivered = append(f.redelivered, guid)
		}
		f.mu.Unlock()
		if i < 0 {
			ghError(http.StatusNotFound, "Not Found")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte("{}"))
		// GitHub delivers it again, on its own time.
		f.pending.Add(1)
		go func() { defer f.pending.Done(); f.deliver(guid, true) }()
	default:
		ghError(http.StatusNotFound, "Not Found")
	}
}

// list answers GET …/deliveries: newest first, cursor paging with a Link
// header.
func (f *fakeGitHub) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	per = min(max(per, 1), fakePageSize)
	start, _ := strconv.Atoi(q.Get("cursor"))
	f.mu.Lock()
	all := slices.Clone(f.deliveries)
	f.mu.Unlock()
	slices.Reverse(all)
	page := all[min(start, len(all)):]
	if len(page) > per {
		page = page[:per]
		next := *r.URL
		nq := next.Query()
		nq.Set("cursor", strconv.Itoa(start+per))
		next.RawQuery = nq.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, f.srv.URL, next.String()))
	}
	if page == nil {
		page = []ghDelivery{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(page)
}
