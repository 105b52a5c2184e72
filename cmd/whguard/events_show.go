package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/whguard/whguard/journal"
)

// `whguard events show` and `whguard events conflicts`: one event, the
// first as its story for people (or the API's JSON with -json), the
// second as the API's JSON.

// showArgs parses `ID [-provider P | -row] [-json]`, the id before or
// after the flags.
func showArgs(name string, args []string) (id, provider string, asJSON bool, err error) {
	fs := flag.NewFlagSet("events "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	prov := fs.String("provider", "", "the provider whose event id ID is")
	row := fs.Bool("row", false, "ID is the journal's row id (when a provider's id is also a number)")
	js := fs.Bool("json", false, "print the API's JSON")
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", "", false, usageError(err.Error() + "\n" + eventsUsage)
	}
	if id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	} else if fs.NArg() > 0 {
		id = ""
	}
	if *row {
		*prov = rowProvider
	}
	if id == "" {
		return "", "", false, usageError(name + " takes one event id (the journal's, or the provider's such as evt_…)\n" + eventsUsage)
	}
	return id, *prov, *js, nil
}

// shownEvent is GET /api/events/{id}'s answer.
type shownEvent struct {
	journal.Detail
	Unsigned string `json:"unsigned"`
}

// show prints one event: what it is, its timeline, its headers as
// received and its body; with -json, the API's JSON.
func (c *apiClient) show(args []string, w io.Writer) error {
	id, provider, asJSON, err := showArgs("show", args)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.call(http.MethodGet, eventPath(id, provider, ""), nil, &raw); err != nil {
		return err
	}
	if asJSON {
		return printIndented(w, raw)
	}
	var e shownEvent
	if err := json.Unmarshal(raw, &e); err != nil {
		return fmt.Errorf("read the admin API's answer: %w", err)
	}
	var b strings.Builder
	writeEvent(&b, &e, time.Now())
	_, err = io.WriteString(w, printableLines(b.String()))
	return err
}

func (c *apiClient) conflicts(args []string, w io.Writer) error {
	id, provider, _, err := showArgs("conflicts", args)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.call(http.MethodGet, eventPath(id, provider, "/conflicts"), nil, &raw); err != nil {
		return err
	}
	return printIndented(w, raw)
}

// printIndented prints the API's JSON, indented.
func printIndented(w io.Writer, raw json.RawMessage) error {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := out.WriteTo(w)
	return err
}

// stamp is how `events show` writes an instant: local time, to the
// millisecond.
const stamp = "2006-01-02 15:04:05.000"

// writeEvent writes e for people, now being the time it is read.
func writeEvent(b *strings.Builder, e *shownEvent, now time.Time) {
	status := string(e.Status)
	if e.Held != "" {
		status += " (held: " + e.Held + ")"
	}
	fmt.Fprintf(b, "event %d: %s %s (%s), %s\n", e.ID, e.Provider, e.EventID, e.EventType, status)
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(b, "  %-13s %s\n", name, value)
		}
	}
	field("received", e.ReceivedAt.Local().Format(stamp)+" by "+e.Source)
	field("attempts", fmt.Sprint(e.Attempts))
	if next := nextAttempt(&e.Detail, now); next != "" {
		field("next attempt", next)
	}
	field("last error", e.LastError)
	field("path", e.Path+queryOf(e.RawQuery))
	if e.OrderKey != "" {
		key := e.OrderKey
		if e.WaitingFor != 0 {
			key += fmt.Sprintf(" (waits for event %d)", e.WaitingFor)
		}
		if e.HoldsKey && e.Status == journal.StatusDead {
			key += " (holds its key: the events behind it wait)"
		}
		field("order key", key)
	}
	field("signature", e.Unsigned)
	if e.Conflicts > 0 {
		field("conflicts", fmt.Sprintf("%d copies with other content (whguard events conflicts %d)", e.Conflicts, e.ID))
	}
	if r := e.Reply; r != nil {
		field("stored reply", fmt.Sprintf("%d %s, %d bytes, %s", r.Status, r.ContentType, r.BodyBytes, r.StoredAt.Local().Format(stamp)))
	}
	b.WriteString("\ntimeline:\n")
	for _, t := range e.Timeline {
		fmt.Fprintf(b, "  %s  %s\n", t.At.Local().Format(stamp), timelineLine(t, now))
		if t.Kind == journal.TimelineAttempt && len(t.Headers) > 0 {
			b.WriteString("      headers sent:\n")
			writeHeaders(b, t.Headers, "        ")
		}
	}
	b.WriteString("\nheaders as received:\n")
	writeHeaders(b, e.ReceivedHeaders, "  ")
	b.WriteString("\nbody:\n")
	if e.BodyBase64 != nil {
		fmt.Fprintf(b, "  (binary, %d bytes)\n", len(e.BodyBase64))
		return
	}
	var pretty bytes.Buffer
	body := e.Body
	if json.Indent(&pretty, []byte(e.Body), "  ", "  ") == nil {
		body = pretty.String()
	}
	b.WriteString("  " + body + "\n")
}

// queryOf is a query string as written after a path.
func queryOf(q string) string {
	if q == "" {
		return ""
	}
	return "?" + q
}

// nextAttempt says when an event waiting for an attempt gets it, "" for
// one that has none coming (done, dead, ignored, being delivered, or
// waiting for its order key's turn).
func nextAttempt(d *journal.Detail, now time.Time) string {
	if (d.Status != journal.StatusPending && d.Status != journal.StatusRetry) || d.Held == journal.HeldOrder || d.WaitingFor != 0 {
		return ""
	}
	at := d.NextAttemptAt.Local().Format(stamp)
	if in := d.NextAttemptAt.Sub(now); in > 0 {
		return at + " (in " + humanDuration(in) + ")"
	}
	return at + " (due now)"
}

// timelineLine says what one timeline entry is, in a line.
func timelineLine(t journal.TimelineEntry, now time.Time) string {
	answered := ""
	if t.Answer != 0 {
		answered = fmt.Sprintf(", answered %d", t.Answer)
	}
	switch t.Kind {
	case journal.TimelineReceived:
		s := "received"
		if t.Source == journal.SourceCatchup {
			s += " by catch-up"
		}
		s += answered
		if t.Duplicates > 0 {
			s += fmt.Sprintf("; resent %d times since", t.Duplicates)
		}
		return s
	case journal.TimelineDuplicate:
		return fmt.Sprintf("duplicate #%d%s", t.Number, answered)
	case journal.TimelineConflict:
		return "a copy with other content" + answered + ": the first payload is kept (whguard events conflicts)"
	case journal.TimelineCopy:
		return "the same body under another event id" + answered + ": recorded, not forwarded"
	case journal.TimelineHold:
		if t.From != nil && t.Until != nil {
			return fmt.Sprintf("held: %s for %s, until %s", t.Reason, humanDuration(t.Until.Sub(*t.From)), t.Until.Local().Format(stamp))
		}
		if t.From != nil {
			return fmt.Sprintf("held: %s, still waiting (%s so far)", t.Reason, humanDuration(now.Sub(*t.From)))
		}
		return "held: " + t.Reason
	case journal.TimelineAttempt:
		result := t.Error
		if t.StatusCode != 0 {
			result = fmt.Sprint(t.StatusCode)
			if t.Error != "" {
				result += " (" + t.Error + ")"
			}
		}
		var took time.Duration
		if t.DurationMS != nil {
			took = time.Duration(*t.DurationMS) * time.Millisecond
		}
		s := fmt.Sprintf("attempt %d: %s in %s", t.Number, result, humanDuration(took))
		if t.ResponseExcerpt != "" {
			s += ": " + truncate(strings.Join(strings.Fields(t.ResponseExcerpt), " "), 80)
		}
		return s
	case journal.ActionSkip:
		return "skipped (order key released)" + reasonOf(t.Reason)
	case journal.ActionRetry:
		return "retried now from " + string(t.FromStatus) + reasonOf(t.Reason)
	}
	return "replayed from " + string(t.FromStatus) + reasonOf(t.Reason)
}

// reasonOf is a reason given, as written after what was done.
func reasonOf(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}

// writeHeaders writes headers one per line, sorted by name.
func writeHeaders(b *strings.Builder, h http.Header, indent string) {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(b, "%s%s: %s\n", indent, name, strings.Join(h[name], ", "))
	}
}

// humanDuration writes d in human units, at most two of them: 850 ms,
// 1.2 s, 36 s, 4 min 51 s, 2 h 5 min, 3 d 4 h. The inspector's duration
// (proxy/admin/inspector) writes the same.
func humanDuration(d time.Duration) string {
	ms := max(0, float64(d)/float64(time.Millisecond))
	if r := math.Round(ms); r < 1000 {
		return fmt.Sprintf("%d ms", int64(r))
	}
	if tenths := int64(math.Round(ms / 100)); tenths < 100 {
		if tenths%10 != 0 {
			return fmt.Sprintf("%d.%d s", tenths/10, tenths%10)
		}
		return fmt.Sprintf("%d s", tenths/10)
	}
	pair := func(n, per int64, unit, sub string) string {
		if n%per == 0 {
			return fmt.Sprintf("%d %s", n/per, unit)
		}
		return fmt.Sprintf("%d %s %d %s", n/per, unit, n%per, sub)
	}
	s := int64(math.Round(ms / 1000))
	switch {
	case s < 60:
		return fmt.Sprintf("%d s", s)
	case s < 3600:
		return pair(s, 60, "min", "s")
	}
	if m := int64(math.Round(ms / 60000)); m < 1440 {
		return pair(m, 60, "h", "min")
	}
	return pair(int64(math.Round(ms/3600000)), 24, "d", "h")
}
