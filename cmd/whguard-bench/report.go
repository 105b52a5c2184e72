package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// printReport writes the tables, the targets and the machine to w.
func printReport(w io.Writer, rep *Report) {
	s := rep.Settings
	fmt.Fprintf(w, "\nwhguard bench: %d B Standard Webhooks requests, %d %% re-signed duplicates, pre-signed before the clock starts\n",
		s.BodyBytes, s.DuplicatePercent)

	if len(rep.Throughput) > 0 {
		fmt.Fprintf(w, "\nTHROUGHPUT (closed loop, %d senders, %gs measured after %gs warm-up; latencies in ms)\n",
			s.Senders, s.DurationSeconds, s.WarmupSeconds)
		resultTable(w, rep.Throughput, false)
		printStatements(w, rep.Throughput)
	}
	if len(rep.Traces) > 0 {
		fmt.Fprintf(w, "\nTRACES (whguard-pg's throughput run with traces on: every span sampled, exported to a local OTLP/HTTP sink; run after whguard-pg's above, then once more without)\n")
		runs := rep.Traces
		if rep.Untraced != nil {
			runs = append(slices.Clone(runs), *rep.Untraced)
		}
		resultTable(w, runs, false)
	}
	if len(rep.FixedRate) > 0 {
		fmt.Fprintf(w, "\nFIXED RATE (open loop, %d req/s, %gs measured after %gs warm-up; latency from the scheduled send)\n",
			s.Rate, s.FixedSeconds, s.WarmupSeconds)
		resultTable(w, rep.FixedRate, true)
	}
	if len(rep.Backlog) > 0 {
		fmt.Fprintf(w, "\nBACKLOG DRAIN (delivery capacity: events journaled while the backend holds deliveries, then released; forward concurrency %s)\n",
			s.ForwardConcurrency)
		naive, haveNaive := find(rep.Throughput, serverNaive)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "server\tbackend ms\tevents\tfill acks/s\tdelivered\tdrain s\tdeliveries/s\t/ naive-pg acks\tcores: whguard\tpostgres\tbench\tidle\tstolen\t")
		for _, b := range rep.Backlog {
			if b.Failed != "" {
				fmt.Fprintf(tw, "%s\tFAILED: %s\t\n", b.Server, firstLine(b.Failed))
				continue
			}
			x := "-"
			if haveNaive && naive.AcksPerSec > 0 {
				x = fmt.Sprintf("%.2f×", b.PerSec/naive.AcksPerSec)
			}
			drain := fmt.Sprintf("%.2f", b.DrainSeconds)
			if b.TimedOut {
				drain += " (cut)"
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%d\t%.0f\t%d\t%s\t%.0f\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", b.Server, b.BackendLatencyMS, b.Events, b.IngestPerSec,
				b.Received, drain, b.PerSec, x, b.CPU.Server, b.CPU.Postgres, b.CPU.Bench, b.CPU.Idle, b.CPU.Steal)
		}
		tw.Flush()
	}
	endToEnd(w, rep)
	if rep.Long != nil {
		rep.Long.print(w)
	}

	fmt.Fprintf(w, "\nTARGETS (reported, not asserted)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range rep.Targets {
		fmt.Fprintf(tw, "  %s\t= %s\t(target %s)\t%s\n", t.Name, orDash(t.Value), t.Goal, t.Status)
	}
	tw.Flush()

	m := rep.Machine
	fmt.Fprintf(w, "\nMACHINE: %d CPUs (%s), %d MB RAM, Linux %s, %s; PostgreSQL %s (%s)\n",
		m.CPUs, m.CPUModel, m.MemoryMB, m.Kernel, m.Go, m.Postgres, m.PostgresSettings)
	fmt.Fprintf(w, "The load generator and the fast backend share these cores with the server under test and PostgreSQL;\n"+
		"\"postgres\" CPU counts every postgres process on the machine, other sessions' included; \"other\" is the kernel's\n"+
		"own time (loopback networking in softirq) and any other process; \"stolen\" is CPU the hypervisor gave to other\n"+
		"guests while this one wanted it: runs with much of it measured a slower machine, and only ratios within\n"+
		"one run compare.\n")
	fmt.Fprintf(w, "bench wall time: %.0f s\n", rep.Seconds)
}

// endToEnd prints, for each whguard server of the closed loop, the rate at
// which its run's distinct events were acknowledged and delivered (first
// request to last delivery) beside naive-pg's acknowledgement-only rate.
func endToEnd(w io.Writer, rep *Report) {
	naive, haveNaive := find(rep.Throughput, serverNaive)
	var rows []string
	for _, r := range rep.Throughput {
		d := r.Deliveries
		if r.Failed != "" || d == nil {
			continue
		}
		if d.EndToEndPerSec == 0 {
			rows = append(rows, fmt.Sprintf("%s\tnot all delivered (%d of %d)\t\t\t\t", r.Server, d.Received, d.Expected))
			continue
		}
		x := "-"
		if haveNaive && naive.AcksPerSec > 0 {
			x = fmt.Sprintf("%.2f×", d.EndToEndPerSec/naive.AcksPerSec)
		}
		rows = append(rows, fmt.Sprintf("%s\t%d\t%.2f\t%.0f\t%s\t", r.Server, d.Received, d.EndToEndSeconds, d.EndToEndPerSec, x))
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\nEND TO END (closed loop: distinct events acknowledged and delivered, first request to last delivery; forward concurrency %s)\n",
		rep.Settings.ForwardConcurrency)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server\tevents\tseconds\tevents/s\t/ naive-pg acks\t")
	for _, row := range rows {
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
}

// resultTable prints one row per result, then where the CPU went.
func resultTable(w io.Writer, rs []Result, fixed bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "server\tacks/s\tp50\tp99\tp99.9\terrors\tpeak RSS MB\tdeliveries/s\te2e p50\te2e p99\t"
	if fixed {
		head = "server\tsent/s\tacks/s\tp50\tp99\tp99.9\terrors\tpeak RSS MB\tdelivered\te2e p50\te2e p99\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rs {
		if r.Failed != "" {
			fmt.Fprintf(tw, "%s\tFAILED: %s\t\n", r.Server, firstLine(r.Failed))
			continue
		}
		row := []string{r.Server}
		if fixed {
			row = append(row, fmt.Sprintf("%.0f", float64(r.Requests)/max(r.Seconds, 1e-9)))
		}
		acks := fmt.Sprintf("%.0f", r.AcksPerSec)
		if r.Exhausted {
			acks += "*"
		}
		row = append(row, acks, ms(r.Ack.P50), ms(r.Ack.P99), ms(r.Ack.P999),
			fmt.Sprint(r.Errors), fmt.Sprintf("%.0f", r.PeakRSSMB))
		if d := r.Deliveries; d != nil {
			if fixed {
				row = append(row, fmt.Sprintf("%d/%d", d.Received, d.Expected))
			} else {
				row = append(row, fmt.Sprintf("%.0f", d.PerSec))
			}
			row = append(row, ms(d.E2E.P50), ms(d.E2E.P99))
		} else {
			row = append(row, "-", "-", "-")
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  cores used by:\tserver\tpostgres\tbench (load + backend)\tother\tidle\tstolen\tstatuses\tnotes\t")
	for _, r := range rs {
		if r.Failed != "" {
			continue
		}
		var notes []string
		if r.Exhausted {
			notes = append(notes, "*pre-signed requests ran out: window shortened (raise -max-rate)")
		}
		if d := r.Deliveries; d != nil {
			notes = append(notes, fmt.Sprintf("drain %.2fs after the load", d.DrainSeconds))
			if d.Received < d.Expected {
				notes = append(notes, fmt.Sprintf("%d acked events NOT delivered", d.Expected-d.Received))
			}
			if d.Redelivered > 0 {
				notes = append(notes, fmt.Sprintf("%d redeliveries", d.Redelivered))
			}
		}
		if len(r.ErrorSample) > 0 {
			notes = append(notes, fmt.Sprintf("errors e.g. %q", r.ErrorSample))
		}
		fmt.Fprintf(tw, "  %s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t\n", r.Server, r.CPU.Server, r.CPU.Postgres,
			r.CPU.Bench, r.CPU.Other, r.CPU.Idle, r.CPU.Steal, statuses(r.Statuses), strings.Join(notes, "; "))
	}
	tw.Flush()
}

// statuses formats status counts as "202:123 200:12".
func statuses(m map[string]int) string {
	var parts []string
	for _, k := range []string{"202", "200"} {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
		}
	}
	for k, v := range m {
		if k != "202" && k != "200" {
			parts = append(parts, fmt.Sprintf("%s:%d", k, v))
		}
	}
	return strings.Join(parts, " ")
}

func ms(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
