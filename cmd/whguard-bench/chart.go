package main

import (
	"fmt"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// series is one set of bars: a value per server.
type series struct {
	label  string
	values []float64
}

// writeChart draws throughput, closed-loop latency and fixed-rate latency
// side by side as grouped bars and writes them as a PNG to path.
func writeChart(path string, rep *Report) error {
	var names []string
	var acks, delivered, drained, p50, p99, p999 []float64
	for _, r := range rep.Throughput {
		names = append(names, r.Server)
		acks = append(acks, r.AcksPerSec)
		p50, p99, p999 = append(p50, r.Ack.P50), append(p99, r.Ack.P99), append(p999, r.Ack.P999)
		var d, b float64
		if r.Deliveries != nil {
			d = r.Deliveries.PerSec
		}
		for _, bl := range rep.Backlog {
			if bl.Server == r.Server {
				b = bl.PerSec
			}
		}
		delivered, drained = append(delivered, d), append(drained, b)
	}
	panels := []*plot.Plot{}
	p, err := bars(fmt.Sprintf("Throughput (%d senders)", rep.Settings.Senders), "per second", names, []series{
		{"acks/s", acks}, {"deliveries/s under load", delivered}, {"deliveries/s draining a backlog", drained},
	})
	if err != nil {
		return err
	}
	panels = append(panels, p)
	p, err = bars(fmt.Sprintf("Ack latency (%d senders)", rep.Settings.Senders), "ms", names, []series{
		{"p50", p50}, {"p99", p99}, {"p99.9", p999},
	})
	if err != nil {
		return err
	}
	panels = append(panels, p)
	if len(rep.FixedRate) > 0 {
		var fnames []string
		var a50, a99, e50, e99 []float64
		for _, r := range rep.FixedRate {
			fnames = append(fnames, r.Server)
			a50, a99 = append(a50, r.Ack.P50), append(a99, r.Ack.P99)
			var x50, x99 float64
			if r.Deliveries != nil {
				x50, x99 = r.Deliveries.E2E.P50, r.Deliveries.E2E.P99
			}
			e50, e99 = append(e50, x50), append(e99, x99)
		}
		p, err = bars(fmt.Sprintf("Latency at %d req/s (open loop)", rep.Settings.Rate), "ms", fnames, []series{
			{"ack p50", a50}, {"ack p99", a99}, {"ack→backend p50", e50}, {"ack→backend p99", e99},
		})
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}

	if p, ok, err := defaultsPanel(rep); err != nil {
		return err
	} else if ok {
		panels = append(panels, p)
	}

	const panelWidth = 5.5 * vg.Inch
	img := vgimg.New(vg.Length(len(panels))*panelWidth, 5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Inch / 4, PadTop: vg.Inch / 8,
		PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	canvases := plot.Align([][]*plot.Plot{panels}, tiles, dc)
	for i, p := range panels {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// defaultsPanel draws what a user running whguard-pg's defaults gets
// beside naive-pg's acknowledgement rate: the end-to-end rate and the two
// drains (fast and 50 ms backend); ok is false when the run has none.
func defaultsPanel(rep *Report) (*plot.Plot, bool, error) {
	naive, haveNaive := find(rep.Throughput, serverNaive)
	pg, havePG := find(rep.Throughput, serverWhguardPG)
	if !haveNaive || !havePG {
		return nil, false, nil
	}
	names, values := []string{"naive-pg acks"}, []float64{naive.AcksPerSec}
	if pg.Deliveries != nil {
		names, values = append(names, "end to end"), append(values, pg.Deliveries.EndToEndPerSec)
	}
	for _, b := range rep.Backlog {
		switch {
		case b.Failed != "":
		case b.Server == serverWhguardPG:
			names, values = append(names, "drain, fast"), append(values, b.PerSec)
		case b.Server == serverWhguardPGSlow:
			names, values = append(names, "drain, 50 ms"), append(values, b.PerSec)
		}
	}
	p, err := bars("whguard-pg at its defaults (concurrency "+rep.Settings.ForwardConcurrency+")", "per second", names,
		[]series{{"events/s", values}})
	return p, err == nil, err
}

// bars makes one grouped bar chart: a group per name, a bar per series.
func bars(title, yLabel string, names []string, ss []series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	p.Legend.Top = true
	w := vg.Points(60 / float64(len(ss)))
	top := 0.0
	for _, s := range ss {
		for _, v := range s.values {
			top = max(top, v)
		}
	}
	p.Y.Max = max(1, top) * (1.15 + 0.09*float64(len(ss))) // room for the legend
	for i, s := range ss {
		b, err := plotter.NewBarChart(plotter.Values(s.values), w)
		if err != nil {
			return nil, err
		}
		b.LineStyle.Width = 0
		b.Color = plotutil.Color(i)
		b.Offset = vg.Length(float64(i)-float64(len(ss)-1)/2) * w
		p.Add(b)
		p.Legend.Add(s.label, b)
	}
	p.NominalX(names...)
	return p, nil
}
