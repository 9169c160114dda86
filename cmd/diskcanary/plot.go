package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/diskcanary/diskcanary/probes"
)

// writeCurvePlot draws a capacity sweep into path (.svg or .png): the p50
// and p99 latency in ms against the achieved IOPS, both axes logarithmic as
// the rates rise geometrically, the bound as a horizontal line and the knee
// (the last step that held) ringed on the p99 curve with its IOPS. A
// symlink is never followed (O_NOFOLLOW, as plotUsable checked before the
// run); an existing file is replaced.
func writeCurvePlot(path string, r *probes.CapacityResult, bound time.Duration) error {
	p := plot.New()
	where := r.Filesystem
	if r.Device != "" {
		where += " on " + r.Device
	}
	p.Title.Text = fmt.Sprintf("diskcanary capacity: %s (%s)", r.Path, where)
	p.X.Label.Text = "achieved read IOPS (4 KiB O_DIRECT, open loop)"
	p.Y.Label.Text = "latency from scheduled start (ms)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.TickerFunc(ticks125), plot.TickerFunc(ticks125)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	ms := func(d time.Duration) float64 { return max(float64(d)/1e6, 1e-3) } // log scale: > 0
	var p50, p99 plotter.XYs
	lo, hi := 0.0, 0.0
	for _, s := range r.Steps {
		if s.AchievedIOPS <= 0 {
			continue
		}
		p50 = append(p50, plotter.XY{X: s.AchievedIOPS, Y: ms(s.P50)})
		p99 = append(p99, plotter.XY{X: s.AchievedIOPS, Y: ms(s.P99)})
		if lo == 0 || s.AchievedIOPS < lo {
			lo = s.AchievedIOPS
		}
		hi = max(hi, s.AchievedIOPS)
	}
	if len(p50) == 0 {
		return fmt.Errorf("--plot %s: no step completed a read", path)
	}
	blue := color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	red := color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	for _, c := range []struct {
		name string
		xys  plotter.XYs
		col  color.Color
	}{{"p50", p50, blue}, {"p99", p99, red}} {
		l, s, err := plotter.NewLinePoints(c.xys)
		if err != nil {
			return fmt.Errorf("--plot %s: %w", path, err)
		}
		l.Color, s.Color = c.col, c.col
		l.Width = vg.Points(1.5)
		p.Add(l, s)
		p.Legend.Add(c.name, l, s)
	}
	b, err := plotter.NewLine(plotter.XYs{{X: lo, Y: ms(bound)}, {X: hi, Y: ms(bound)}})
	if err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	b.Color = color.Gray{Y: 0x60}
	b.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
	p.Add(b)
	p.Legend.Add("p99 bound "+fmtDur(bound), b)
	if r.Knee >= 0 && r.Steps[r.Knee].AchievedIOPS > 0 {
		k := r.Steps[r.Knee]
		at := plotter.XYs{{X: k.AchievedIOPS, Y: ms(k.P99)}}
		ring, err := plotter.NewScatter(at)
		if err != nil {
			return fmt.Errorf("--plot %s: %w", path, err)
		}
		ring.Radius = vg.Points(7)
		ring.Color = color.Black
		label, err := plotter.NewLabels(plotter.XYLabels{XYs: at, Labels: []string{fmt.Sprintf("  knee: %.0f IOPS", k.AchievedIOPS)}})
		if err != nil {
			return fmt.Errorf("--plot %s: %w", path, err)
		}
		p.Add(ring, label)
	}
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	wt, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, format)
	if err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("--plot %s: is a symlink; not followed: name the file itself", path)
	}
	if err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	_, err = wt.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	return nil
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
