package main

import (
	"fmt"
)

// Target is one goal of the benchmark issue, checked against a run and
// reported, never asserted.
type Target struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Goal   string `json:"goal"`
	Status string `json:"status"` // MET, NOT MET, or n/a (not measured in this run)
}

const (
	statusMet    = "MET"
	statusNotMet = "NOT MET"
	statusNA     = "n/a"
)

func verdict(measured, ok bool) string {
	switch {
	case !measured:
		return statusNA
	case ok:
		return statusMet
	}
	return statusNotMet
}

// find returns the successful result of server in rs, if any.
func find(rs []Result, server string) (Result, bool) {
	for _, r := range rs {
		if r.Server == server && r.Failed == "" {
			return r, true
		}
	}
	return Result{}, false
}

// targets evaluates the targets against rep.
func targets(rep *Report) []Target {
	var ts []Target
	pg, havePG := find(rep.Throughput, serverWhguardPG)
	naive, haveNaive := find(rep.Throughput, serverNaive)
	null, haveNull := find(rep.Throughput, serverNull)
	lite, haveLite := find(rep.Throughput, serverWhguardSQLite)
	ratio := func(name string, a, b Result, haveA, haveB bool, goal float64) Target {
		t := Target{Name: name, Goal: fmt.Sprintf("≥ %.1f×", goal)}
		ok := haveA && haveB && b.AcksPerSec > 0
		if ok {
			x := a.AcksPerSec / b.AcksPerSec
			t.Value = fmt.Sprintf("%.2f× (%.0f vs %.0f acks/s)", x, a.AcksPerSec, b.AcksPerSec)
			t.Status = verdict(true, x >= goal)
		} else {
			t.Status = statusNA
		}
		return t
	}
	ts = append(ts,
		ratio("whguard-pg / naive-pg acks/s", pg, naive, havePG, haveNaive, 3),
		ratio("whguard-pg / null acks/s", pg, null, havePG, haveNull, 0.6))

	ts = append(ts, tracesTarget(rep, pg, havePG))

	t := Target{Name: "whguard-pg errors", Goal: "0", Status: statusNA}
	if havePG {
		t.Value = fmt.Sprintf("%d", pg.Errors)
		t.Status = verdict(true, pg.Errors == 0)
	}
	ts = append(ts, t)

	t = Target{Name: "whguard-pg ack p99 vs naive-pg", Goal: "below naive-pg", Status: statusNA}
	if havePG && haveNaive {
		t.Value = fmt.Sprintf("%.2f ms vs %.2f ms", pg.Ack.P99, naive.Ack.P99)
		t.Status = verdict(true, pg.Ack.P99 < naive.Ack.P99)
	}
	ts = append(ts, t)

	t = Target{Name: "whguard-pg deliveries/s to a fast backend", Goal: "≥ 10000/s sustained", Status: statusNA}
	var backlogRate float64
	for _, b := range rep.Backlog {
		if b.Server == serverWhguardPG && b.Failed == "" {
			backlogRate = b.PerSec
		}
	}
	switch {
	case backlogRate > 0:
		t.Value = fmt.Sprintf("%.0f/s draining a backlog", backlogRate)
		if havePG && pg.Deliveries != nil {
			t.Value += fmt.Sprintf(" (%.0f/s under the throughput load)", pg.Deliveries.PerSec)
		}
		t.Status = verdict(true, backlogRate >= 10000)
	case havePG && pg.Deliveries != nil:
		t.Value = fmt.Sprintf("%.0f/s under the throughput load", pg.Deliveries.PerSec)
		t.Status = verdict(true, pg.Deliveries.PerSec >= 10000)
	}
	ts = append(ts, t)

	t = Target{Name: "whguard-pg deliveries/s with generous limits in Redis / without", Goal: "≥ 0.8×", Status: statusNA}
	var limitedRate float64
	for _, b := range rep.Backlog {
		if b.Server == serverWhguardPGLimited && b.Failed == "" {
			limitedRate = b.PerSec
		}
	}
	if backlogRate > 0 && limitedRate > 0 {
		x := limitedRate / backlogRate
		t.Value = fmt.Sprintf("%.2f× (%.0f vs %.0f/s draining a backlog)", x, limitedRate, backlogRate)
		t.Status = verdict(true, x >= 0.8)
	}
	ts = append(ts, t)

	t = Target{Name: "whguard-pg deliveries/s ordered on many keys / unordered", Goal: "≥ 0.7×", Status: statusNA}
	var orderedRate float64
	for _, b := range rep.Backlog {
		if b.Server == serverWhguardPGOrdered && b.Failed == "" {
			orderedRate = b.PerSec
		}
	}
	if backlogRate > 0 && orderedRate > 0 {
		x := orderedRate / backlogRate
		t.Value = fmt.Sprintf("%.2f× (%.0f vs %.0f/s draining a backlog)", x, orderedRate, backlogRate)
		t.Status = verdict(true, x >= 0.7)
	}
	ts = append(ts, t)

	t = Target{Name: fmt.Sprintf("whguard-pg ack→backend p50 at %d req/s", rep.Settings.Rate), Goal: "< 10 ms", Status: statusNA}
	if fr, ok := find(rep.FixedRate, serverWhguardPG); ok && fr.Deliveries != nil && fr.Deliveries.E2E.N > 0 {
		t.Value = fmt.Sprintf("%.2f ms (p99 %.2f ms)", fr.Deliveries.E2E.P50, fr.Deliveries.E2E.P99)
		t.Status = verdict(true, fr.Deliveries.E2E.P50 < 10)
	}
	ts = append(ts, t)

	t = Target{Name: fmt.Sprintf("whguard-pg peak RSS at %d senders", rep.Settings.Senders), Goal: "< 150 MB", Status: statusNA}
	if havePG {
		t.Value = fmt.Sprintf("%.0f MB", pg.PeakRSSMB)
		t.Status = verdict(true, pg.PeakRSSMB < 150)
	}
	ts = append(ts, t)

	ts = append(ts, ratio("whguard-sqlite / naive-pg acks/s", lite, naive, haveLite, haveNaive, 1))

	// What the user feels at the settings they run: ack and delivery
	// together, and a backlog drained, against naive-pg's ack-only rate.
	perNaive := func(name string, rate float64, what string, goal, stretch float64) Target {
		t := Target{Name: name, Goal: fmt.Sprintf("≥ %.1f× naive-pg acks/s", goal), Status: statusNA}
		if stretch > 0 {
			t.Goal += fmt.Sprintf(" (goal %.1f×)", stretch)
		}
		if rate > 0 && haveNaive && naive.AcksPerSec > 0 {
			x := rate / naive.AcksPerSec
			t.Value = fmt.Sprintf("%.2f× (%.0f %s vs %.0f acks/s)", x, rate, what, naive.AcksPerSec)
			t.Status = verdict(true, x >= goal)
		}
		return t
	}
	var e2e float64
	if havePG && pg.Deliveries != nil {
		e2e = pg.Deliveries.EndToEndPerSec
	}
	ts = append(ts, perNaive("whguard-pg end to end (acked and delivered)", e2e, "events/s", 1, 1.5))
	drain := func(server string) float64 {
		for _, b := range rep.Backlog {
			if b.Server == server && b.Failed == "" {
				return b.PerSec
			}
		}
		return 0
	}
	conc := rep.Settings.ForwardConcurrency
	ts = append(ts,
		perNaive("whguard-pg drain, fast backend, concurrency "+conc, drain(serverWhguardPG), "deliveries/s", 1, 0),
		perNaive("whguard-pg drain, 50 ms backend, concurrency "+conc, drain(serverWhguardPGSlow), "deliveries/s", 1, 0))

	if l := rep.Long; l != nil {
		ts = append(ts, l.targets()...)
	}
	t = Target{Name: "bench wall time", Goal: "< 10 min (make bench, without -long)",
		Value: fmt.Sprintf("%.0f s", rep.Seconds), Status: verdict(rep.Long == nil, rep.Seconds < 600)}
	ts = append(ts, t)
	return ts
}
