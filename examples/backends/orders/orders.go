// Package orders is a deliberately naive, non-idempotent order service: the
// kind of legacy backend whguard is put in front of. Every webhook it
// receives applies a state change, duplicates included, and it knows
// nothing of whguard. GET /orders/{id} shows stateChanges, the number of
// changes really applied, so duplicate effects are visible.
//
// A webhook body is JSON naming an order, at the top level, under "data":
// {"type":"order.paid","data":{"order_id":"o-1"}}, or under
// "data"."object", as a Stripe event carries the object it is about.
package orders

import (
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Order is the state of one order.
type Order struct {
	ID           string    `json:"id"`
	Status       string    `json:"status"`
	StateChanges int       `json:"stateChanges"`
	History      []string  `json:"history"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

// Config tunes the service's failure behaviour.
type Config struct {
	// FailFirst makes the first N webhook requests answer 503 (a backend
	// still warming up), to show retries.
	FailFirst int
	// RejectType answers 422 to events of this type (a permanent refusal),
	// to show quarantine. "" rejects nothing.
	RejectType string
	// FlakyType answers 503 to the first event of this type (a dependency
	// down for a moment), to show a retry. "" fails nothing.
	FlakyType string
}

// Service holds the orders in memory.
type Service struct {
	cfg    Config
	mu     sync.Mutex
	orders map[string]*Order
	calls  int
	flaked bool
}

// New returns an empty service.
func New(cfg Config) *Service {
	return &Service{cfg: cfg, orders: map[string]*Order{}}
}

// Handler serves POST /webhooks/{provider}, GET /orders, GET /orders/{id}
// and GET /health.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhooks/{provider}", s.webhook)
	mux.HandleFunc("GET /orders", s.list)
	mux.HandleFunc("GET /orders/{id}", s.get)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return mux
}

type event struct {
	Type    string `json:"type"`
	OrderID string `json:"order_id"`
	Data    struct {
		OrderID string `json:"order_id"`
		Object  struct {
			OrderID string `json:"order_id"`
		} `json:"object"`
	} `json:"data"`
}

func (s *Service) webhook(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "cannot read body"})
		return
	}
	var ev event
	if err := json.Unmarshal(b, &ev); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body is not JSON"})
		return
	}
	id := ev.OrderID
	if id == "" {
		id = ev.Data.OrderID
	}
	if id == "" {
		id = ev.Data.Object.OrderID
	}
	if id == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "no order_id"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls <= s.cfg.FailFirst {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "warming up"})
		return
	}
	if s.cfg.FlakyType != "" && ev.Type == s.cfg.FlakyType && !s.flaked {
		s.flaked = true
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "inventory service unavailable, try again"})
		return
	}
	if s.cfg.RejectType != "" && ev.Type == s.cfg.RejectType {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "unsupported event type " + ev.Type})
		return
	}
	// The naive part: no check whether this event was seen before.
	o, ok := s.orders[id]
	if !ok {
		o = &Order{ID: id}
		s.orders[id] = o
	}
	o.Status = ev.Type
	o.StateChanges++
	o.History = append(o.History, ev.Type)
	o.UpdatedAt = time.Now().UTC()
	writeJSON(w, http.StatusOK, o)
}

func (s *Service) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[r.PathValue("id")]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such order"})
		return
	}
	writeJSON(w, http.StatusOK, o)
}

func (s *Service) list(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"orders": s.Orders()})
}

// Orders returns a snapshot of every order, sorted by id.
func (s *Service) Orders() []Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Order, 0, len(s.orders))
	for _, o := range s.orders {
		c := *o
		c.History = append([]string(nil), o.History...)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
