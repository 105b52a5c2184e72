package main

import (
	"slices"
	"strconv"
	"time"
)

// Latency is a latency distribution's percentiles, in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	N    int     `json:"n"`
}

// percentiles sorts d in place and reads the nearest-rank percentiles.
func percentiles(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	at := func(q float64) float64 {
		i := min(len(d)-1, max(0, int(q*float64(len(d))+0.999999)-1))
		return float64(d[i]) / float64(time.Millisecond)
	}
	return Latency{P50: at(0.50), P99: at(0.99), P999: at(0.999), N: len(d)}
}

// Result is one server's run, as printed and written to results.json.
type Result struct {
	Server     string  `json:"server"`
	Mode       string  `json:"mode"` // "throughput" (closed loop) or "fixed-rate" (open loop)
	Senders    int     `json:"senders,omitempty"`
	TargetRate int     `json:"target_rate,omitempty"`
	Seconds    float64 `json:"seconds"`  // the measured window, warm-up excluded
	Requests   int     `json:"requests"` // started in the window
	AcksPerSec float64 `json:"acks_per_sec"`
	// Ack is the latency from (scheduled) send to answer of the requests
	// started in the window.
	Ack Latency `json:"ack_latency_ms"`
	// Statuses and Errors cover the whole run, warm-up included; an error
	// is a transport error or any non-2xx answer.
	Statuses    map[string]int `json:"statuses"`
	Errors      int            `json:"errors"`
	ErrorSample []string       `json:"error_sample,omitempty"`
	PeakRSSMB   float64        `json:"peak_rss_mb"`
	Deliveries  *Deliveries    `json:"deliveries,omitempty"`
	CPU         CPUUse         `json:"cpu_cores"`
	// Exhausted: the pre-signed requests ran out before the time was up;
	// the window was shortened to match.
	Exhausted bool   `json:"exhausted,omitempty"`
	Failed    string `json:"failed,omitempty"`
	// Statements: PostgreSQL's statements of a closed-loop run, when the
	// server loads pg_stat_statements.
	Statements *Statements `json:"statements,omitempty"`
}

// Deliveries is what the fast backend saw of a whguard run.
type Deliveries struct {
	Expected    int     `json:"expected"`    // unique events acknowledged with a 2xx
	Received    int     `json:"received"`    // of those, received by the backend
	Redelivered int     `json:"redelivered"` // deliveries beyond the first of an event
	PerSec      float64 `json:"per_sec"`     // received / (last receipt − first receipt)
	// DrainSeconds is how long after the load stopped the last event
	// arrived; DrainPerSec the rate of the events that arrived then.
	DrainSeconds float64 `json:"drain_seconds"`
	DrainPerSec  float64 `json:"drain_per_sec"`
	// E2E runs from the sender seeing the ack to the backend receiving the
	// event, for unique events acknowledged in the window. A delivery that
	// arrives before the sender has read its ack counts as 0 (BeforeAck).
	E2E       Latency `json:"e2e_latency_ms"`
	BeforeAck int     `json:"before_ack"`
	// EndToEndPerSec is the whole run as the user sees it: the distinct
	// events acknowledged and delivered, over the time from the first
	// request to the last of them delivered (or acknowledged, if later).
	// Set only when every acknowledged event was delivered.
	EndToEndPerSec float64 `json:"end_to_end_per_sec"`
	// EndToEndSeconds is that time.
	EndToEndSeconds float64 `json:"end_to_end_seconds"`
}

// summarize fills in the load figures of r from l.
func summarize(r *Result, l *load) {
	r.Statuses = map[string]int{}
	var lat []time.Duration
	ok := 0
	for i := 0; i < l.issued; i++ {
		o := l.out[i]
		key := strconv.Itoa(o.status)
		if o.status == 0 {
			key = "transport error"
		}
		r.Statuses[key]++
		good := o.status >= 200 && o.status <= 299
		if !good {
			r.Errors++
		}
		if o.start >= l.window[0] && o.start < l.window[1] {
			lat = append(lat, o.latency)
			if good {
				ok++
			}
		}
	}
	r.Requests = len(lat)
	r.Seconds = (l.window[1] - l.window[0]).Seconds()
	if r.Seconds > 0 {
		r.AcksPerSec = float64(ok) / r.Seconds
	}
	r.Ack = percentiles(lat)
	r.ErrorSample = l.errSample
	r.Exhausted = l.exhausted.Load()
}

// deliveries compares the sender's acks with the backend's receipts.
func deliveries(l *load, be *backend) *Deliveries {
	recv := be.receipts()
	d := &Deliveries{Redelivered: int(be.total.Load() - be.received.Load() - be.foreign.Load())}
	var first, last int64
	stop := l.stopped.UnixNano()
	afterStop := 0
	for _, t := range recv {
		if t == 0 {
			continue
		}
		d.Received++
		if first == 0 || t < first {
			first = t
		}
		last = max(last, t)
		if t > stop {
			afterStop++
		}
	}
	for _, a := range l.ackNs {
		if a != 0 {
			d.Expected++
		}
	}
	if last > first {
		d.PerSec = float64(d.Received) / (float64(last-first) / 1e9)
	}
	if last > stop {
		d.DrainSeconds = float64(last-stop) / 1e9
		d.DrainPerSec = float64(afterStop) / d.DrainSeconds
	}
	var e2e []time.Duration
	for i := 0; i < l.issued; i++ {
		o := l.out[i]
		u, dup := uniqueOf(i)
		if dup || o.start < l.window[0] || o.start >= l.window[1] || l.ackNs[u] == 0 || recv[u] == 0 {
			continue
		}
		lag := time.Duration(recv[u] - l.ackNs[u])
		if lag < 0 {
			lag = 0
			d.BeforeAck++
		}
		e2e = append(e2e, lag)
	}
	d.E2E = percentiles(e2e)
	if d.Received >= d.Expected && d.Expected > 0 {
		end := max(last, stop)
		d.EndToEndSeconds = float64(end-l.t0.UnixNano()) / 1e9
		d.EndToEndPerSec = float64(d.Received) / d.EndToEndSeconds
	}
	return d
}
