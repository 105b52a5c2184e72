package main

// The demo's catch-up scene: a stand-in for Stripe's Events API that lists
// what "Stripe" could not deliver while whguard was down, and the pass the
// demo runs through the admin API, as an operator would after an outage.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// demoStripeKey is the stand-in API's credential (a restricted key's shape).
const demoStripeKey = "rk_test_whguardDemoCatchup"

// demoStripeAPI answers GET /v1/events as Stripe does (a list object,
// newest first), listing the events it "could not deliver".
type demoStripeAPI struct {
	srv  *http.Server
	addr string

	mu     sync.Mutex
	events [][]byte // oldest first
}

func startDemoStripeAPI() (*demoStripeAPI, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &demoStripeAPI{addr: ln.Addr().String()}
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

// miss records an event Stripe tried to deliver while whguard was down.
func (a *demoStripeAPI) miss(id, typ, order string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, fmt.Appendf(nil, `{"id":%q,"object":"event","created":%d,"type":%q,"pending_webhooks":1,"data":{"object":{"object":"order","order_id":%q,"amount":4200,"currency":"eur"}}}`,
		id, time.Now().Unix(), typ, order))
}

func (a *demoStripeAPI) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer "+demoStripeKey {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"type":"invalid_request_error","message":"Invalid API Key provided"}}`))
		return
	}
	if r.URL.Path != "/v1/events" {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"type":"invalid_request_error","message":"Unrecognized request URL"}}`))
		return
	}
	a.mu.Lock()
	var data [][]byte
	for i := len(a.events) - 1; i >= 0; i-- {
		data = append(data, a.events[i])
	}
	a.mu.Unlock()
	_, _ = fmt.Fprintf(w, `{"object":"list","url":"/v1/events","has_more":false,"data":[%s]}`, bytes.Join(data, []byte(",")))
}

// catchupRun runs a catch-up pass of provider through the admin API.
func (d *demoRun) catchupRun(provider string) (journaled int, err error) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+d.admin+"/api/catchup/"+provider, strings.NewReader(`{"since":"1h"}`))
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Journaled int    `json:"journaled"`
		Error     string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK || out.Error != "" {
		return out.Journaled, fmt.Errorf("catch-up pass: %d %s", resp.StatusCode, out.Error)
	}
	return out.Journaled, nil
}
