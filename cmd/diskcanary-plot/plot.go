package main

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/diskcanary/diskcanary/internal/capacityjson"
)

// drawCurve draws a sweep in format (svg, png) to w: the p50, p90 and p99
// latency in ms against the achieved IOPS, both axes logarithmic as the
// rates rise geometrically, the bound as a dashed horizontal line and the
// knee (the last step that held) ringed on the p99 curve with its IOPS.
func drawCurve(w io.Writer, format string, r *capacityjson.Result) error {
	p := plot.New()
	where := r.Filesystem
	if r.Device != "" {
		where += " on " + r.Device
	}
	p.Title.Text = fmt.Sprintf("diskcanary capacity: %s (%s)", r.Path, where)
	p.X.Label.Text = xLabel(r)
	p.Y.Label.Text = "latency from scheduled start (ms)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.TickerFunc(ticks125), plot.TickerFunc(ticks125)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	ms := func(s float64) float64 { return max(s*1e3, 1e-3) } // log scale: > 0
	var p50, p90, p99 plotter.XYs
	lo, hi := 0.0, 0.0
	for _, s := range r.Steps {
		if !(s.AchievedIOPS > 0) || math.IsInf(s.AchievedIOPS, 0) {
			continue
		}
		p50 = append(p50, plotter.XY{X: s.AchievedIOPS, Y: ms(s.LatencySeconds.P50)})
		p90 = append(p90, plotter.XY{X: s.AchievedIOPS, Y: ms(s.LatencySeconds.P90)})
		p99 = append(p99, plotter.XY{X: s.AchievedIOPS, Y: ms(s.LatencySeconds.P99)})
		if lo == 0 || s.AchievedIOPS < lo {
			lo = s.AchievedIOPS
		}
		hi = max(hi, s.AchievedIOPS)
	}
	if len(p50) == 0 {
		return errors.New("no step of the sweep completed an op: nothing to draw")
	}
	for _, c := range []struct {
		name string
		xys  plotter.XYs
		col  color.Color
	}{
		{"p50", p50, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
		{"p90", p90, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
		{"p99", p99, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
	} {
		l, s, err := plotter.NewLinePoints(c.xys)
		if err != nil {
			return err
		}
		l.Color, s.Color = c.col, c.col
		l.Width = vg.Points(1.5)
		p.Add(l, s)
		p.Legend.Add(c.name, l, s)
	}
	bound := time.Duration(r.ThresholdSeconds * 1e9)
	b, err := plotter.NewLine(plotter.XYs{{X: lo, Y: ms(r.ThresholdSeconds)}, {X: hi, Y: ms(r.ThresholdSeconds)}})
	if err != nil {
		return err
	}
	b.Color = color.Gray{Y: 0x60}
	b.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
	p.Add(b)
	p.Legend.Add("p99 bound "+bound.String(), b)
	if k := r.Knee(); k >= 0 && r.Steps[k].AchievedIOPS > 0 {
		at := plotter.XYs{{X: r.Steps[k].AchievedIOPS, Y: ms(r.Steps[k].LatencySeconds.P99)}}
		ring, err := plotter.NewScatter(at)
		if err != nil {
			return err
		}
		ring.Radius = vg.Points(7)
		ring.Color = color.Black
		label, err := plotter.NewLabels(plotter.XYLabels{XYs: at, Labels: []string{fmt.Sprintf("  knee: %.0f IOPS", r.Steps[k].AchievedIOPS)}})
		if err != nil {
			return err
		}
		p.Add(ring, label)
	}
	wt, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, format)
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

// xLabel names what the sweep offered (a sweep from before patterns is
// of reads).
func xLabel(r *capacityjson.Result) string {
	switch r.Pattern {
	case "randwrite":
		return fmt.Sprintf("achieved write IOPS (%d-byte O_DIRECT random writes, open loop)", r.BlockSize)
	case "wal":
		return fmt.Sprintf("achieved appends/s (%d-byte WAL appends + fdatasync, one writer, open loop)", r.BlockSize)
	}
	return fmt.Sprintf("achieved read IOPS (%d-byte O_DIRECT random reads, open loop)", r.BlockSize)
}

// ticks125 ticks a log axis at 1, 2 and 5 times the powers of ten,
// labelled, and at the other digits, unlabelled: a sweep often spans less
// than a decade, which plot.LogTicks would leave without a label.
func ticks125(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for decade := math.Pow10(int(math.Floor(math.Log10(lo)))); decade <= hi; decade *= 10 {
		for d := 1.0; d < 10; d++ {
			v := d * decade
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if d == 1 || d == 2 || d == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
