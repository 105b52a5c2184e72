package journal

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// LatencyBounds are the upper bounds of the buckets of the ack-to-delivery
// latency histogram kept per minute (Minute.Latency); a last bucket holds
// everything slower. Percentiles read from it are interpolated inside a
// bucket, so they are as precise as the buckets are narrow.
var LatencyBounds = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour,
}

// MinuteRetention is how long per-minute figures are kept.
const MinuteRetention = 25 * time.Hour

// Minute is one replica's delivery figures for one provider in one minute:
// deliveries that succeeded, attempts that failed (to be retried or dead),
// events that went dead, and the histogram of the time from
// acknowledgement to delivery of the ones delivered.
type Minute struct {
	Minute    time.Time
	Provider  string
	Delivered int64
	Failed    int64
	Dead      int64
	// Latency has len(LatencyBounds)+1 counts.
	Latency []int64
}

// ObserveLatency counts one delivery that took d from acknowledgement.
func (m *Minute) ObserveLatency(d time.Duration) {
	if len(m.Latency) != len(LatencyBounds)+1 {
		m.Latency = make([]int64, len(LatencyBounds)+1)
	}
	i := 0
	for i < len(LatencyBounds) && d > LatencyBounds[i] {
		i++
	}
	m.Latency[i]++
}

// Add adds o's figures to m (same minute, any replica or provider).
func (m *Minute) Add(o Minute) {
	m.Delivered += o.Delivered
	m.Failed += o.Failed
	m.Dead += o.Dead
	if len(o.Latency) == 0 {
		return
	}
	if len(m.Latency) != len(LatencyBounds)+1 {
		m.Latency = make([]int64, len(LatencyBounds)+1)
	}
	for i := range min(len(o.Latency), len(m.Latency)) {
		m.Latency[i] += o.Latency[i]
	}
}

// Percentile estimates the q-quantile (0 < q ≤ 1) of the latency histogram,
// interpolating linearly inside the bucket it falls in; ok is false when
// nothing was delivered. The open last bucket answers its lower bound.
func (m Minute) Percentile(q float64) (d time.Duration, ok bool) {
	var total int64
	for _, c := range m.Latency {
		total += c
	}
	if total == 0 {
		return 0, false
	}
	rank := q * float64(total)
	var seen float64
	for i, c := range m.Latency {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			if i == len(LatencyBounds) {
				return LatencyBounds[i-1], true
			}
			lo := time.Duration(0)
			if i > 0 {
				lo = LatencyBounds[i-1]
			}
			frac := math.Max(0, (rank-seen)/float64(c))
			return lo + time.Duration(frac*float64(LatencyBounds[i]-lo)), true
		}
		seen += float64(c)
	}
	return LatencyBounds[len(LatencyBounds)-1], true
}

// latencyText stores a histogram as comma-separated counts.
func latencyText(h []int64) string {
	var b strings.Builder
	for i, c := range h {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(c, 10))
	}
	return b.String()
}

// parseLatency reads latencyText's format; an empty text is no histogram.
func parseLatency(s string) ([]int64, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	out := make([]int64, len(LatencyBounds)+1)
	for i, p := range parts {
		if i >= len(out) {
			break
		}
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("latency histogram: %w", err)
		}
		out[i] = n
	}
	return out, nil
}
