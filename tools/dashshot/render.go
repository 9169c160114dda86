package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Layout in pixels: a grid unit of height is unitH, as in Grafana; the
// width is the picture's over 24 columns. The canvas is 72 dpi, so one vg
// length unit is one pixel.
const (
	unitH   = 30
	gap     = 8
	headerH = 58
)

// box is a rectangle in pixels from the picture's top-left corner.
type box struct{ X, Y, W, H int }

// layout is the picture's size and where each panel went, in the order of
// the results.
type layout struct {
	W, H  int
	boxes []box
}

// span is the time range the queries covered.
type span struct {
	start, end time.Time
	step       time.Duration
}

type canvas struct {
	c  *vgimg.Canvas
	h  int
	th theme
}

func (cv canvas) rect(b box) vg.Rectangle {
	return vg.Rectangle{
		Min: vg.Point{X: vg.Length(b.X), Y: vg.Length(cv.h - b.Y - b.H)},
		Max: vg.Point{X: vg.Length(b.X + b.W), Y: vg.Length(cv.h - b.Y)},
	}
}

func (cv canvas) sub(b box) draw.Canvas { return draw.Canvas{Canvas: cv.c, Rectangle: cv.rect(b)} }

func (cv canvas) fill(b box, c color.Color) {
	if c == nil {
		return
	}
	r := cv.rect(b)
	cv.c.SetColor(c)
	cv.c.Fill(vg.Path{{Type: vg.MoveComp, Pos: r.Min}, {Type: vg.LineComp, Pos: vg.Point{X: r.Max.X, Y: r.Min.Y}},
		{Type: vg.LineComp, Pos: r.Max}, {Type: vg.LineComp, Pos: vg.Point{X: r.Min.X, Y: r.Max.Y}}, {Type: vg.CloseComp}})
}

func (cv canvas) stroke(b box, c color.Color) {
	r := cv.rect(b)
	dc := cv.sub(b)
	dc.StrokeLines(draw.LineStyle{Color: c, Width: 1}, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}, r.Min})
}

var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

func textStyle(size float64, bold bool, c color.Color, xa text.XAlignment) text.Style {
	f := font.From(sans, vg.Length(size))
	if bold {
		f.Weight = 700 // font.WeightBold of golang.org/x/image
	}
	return text.Style{Color: c, Font: f, XAlign: xa, YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
}

// text draws s with its top at y, from x (left), around x (centre) or up
// to x (right) by the style's alignment, cut to maxW pixels.
func (cv canvas) text(x, y int, s string, sty text.Style, maxW int) {
	s = fit(s, sty, maxW)
	if s == "" {
		return
	}
	dc := draw.New(cv.c)
	dc.FillText(sty, vg.Point{X: vg.Length(x), Y: vg.Length(cv.h - y)}, s)
}

// fit cuts s with an ellipsis until it is at most maxW pixels wide.
func fit(s string, sty text.Style, maxW int) string {
	if maxW <= 0 || float64(sty.Width(s)) <= float64(maxW) {
		return s
	}
	r := []rune(s)
	for len(r) > 0 && float64(sty.Width(string(r)+"…")) > float64(maxW) {
		r = r[:len(r)-1]
	}
	if len(r) == 0 {
		return ""
	}
	return string(r) + "…"
}

// render draws the results (the dashboard's panels in layout order) under
// a header naming the dashboard, the variables and the time range.
func render(d *dashboard, results []panelResult, values map[string]string, sp span, width int, th theme) (func(io.Writer) error, layout) {
	plot.DefaultFont = sans
	cols := float64(width-gap) / 24
	maxY := 0
	for _, r := range results {
		maxY = max(maxY, r.panel.GridPos.Y+r.panel.GridPos.H)
	}
	height := headerH + maxY*unitH
	img := vgimg.NewWith(vgimg.UseWH(vg.Length(width), vg.Length(height)), vgimg.UseDPI(72))
	cv := canvas{c: img, h: height, th: th}
	cv.fill(box{0, 0, width, height}, th.bg)

	cv.text(gap, 8, d.Title, textStyle(20, true, th.text, draw.XLeft), width-2*gap)
	var vs []string
	for _, v := range d.Templating.List {
		if val, ok := values[v.Name]; ok {
			if val == "$__all" {
				val = "All"
			}
			vs = append(vs, v.Name+"="+val)
		}
	}
	sub := fmt.Sprintf("%s · %s to %s UTC, step %s · drawn by tools/dashshot from Prometheus (not Grafana)",
		strings.Join(vs, "  "), sp.start.UTC().Format("2006-01-02 15:04:05"), sp.end.UTC().Format("15:04:05"), promDuration(sp.step))
	cv.text(gap, 34, sub, textStyle(12, false, th.dim, draw.XLeft), width-2*gap)

	lay := layout{W: width, H: height}
	for _, r := range results {
		g := r.panel.GridPos
		x0 := gap + int(float64(g.X)*cols)
		x1 := gap + int(float64(g.X+g.W)*cols)
		b := box{X: x0, Y: headerH + g.Y*unitH, W: x1 - x0 - gap, H: g.H*unitH - gap}
		lay.boxes = append(lay.boxes, b)
		if r.panel.Type == "row" {
			cv.text(b.X, b.Y+6, r.panel.Title, textStyle(15, true, th.text, draw.XLeft), b.W)
			continue
		}
		cv.fill(b, th.panel)
		cv.stroke(b, th.border)
		cv.text(b.X+8, b.Y+6, r.panel.Title, textStyle(13, true, th.text, draw.XLeft), b.W-16)
		in := box{X: b.X + 6, Y: b.Y + 26, W: b.W - 12, H: b.H - 30}
		switch {
		case r.err != nil:
			cv.message(in, "Query failed: "+r.err.Error(), namedColors["red"])
		case r.panel.Type == "timeseries":
			cv.timeseries(in, r, sp)
		case r.panel.Type == "heatmap":
			cv.heatmap(in, r, sp)
		case r.panel.Type == "stat":
			cv.stat(in, r)
		case r.panel.Type == "table":
			cv.table(in, r)
		default:
			cv.message(in, "panel type "+r.panel.Type+" is not drawn by dashshot", th.dim)
		}
	}
	return func(w io.Writer) error {
		return encodePNG(w, img.Image(), th.colors())
	}, lay
}

// message writes one line in the middle of b.
func (cv canvas) message(b box, s string, c color.Color) {
	cv.text(b.X+b.W/2, b.Y+b.H/2-8, s, textStyle(13, false, c, draw.XCenter), b.W-8)
}

// ordered is a panel's series in the order of its targets, each target's
// by name.
func ordered(r panelResult) []named {
	var out []named
	for _, t := range r.panel.Targets {
		ss := append([]named(nil), r.series[t.RefID]...)
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].name < ss[j].name })
		out = append(out, ss...)
	}
	return out
}

func (cv canvas) newPlot() *plot.Plot {
	p := plot.New()
	p.BackgroundColor = color.Transparent
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Color = cv.th.border
		a.Tick.Color = cv.th.border
		a.Tick.Label.Color = cv.th.dim
		a.Tick.Label.Font = font.From(sans, 10)
		a.Padding = 2
	}
	return p
}

// timeseries draws the series as lines, the panel's thresholds as dashed
// lines where the panel draws them, and a legend with each series' last
// and largest value under the plot.
func (cv canvas) timeseries(b box, r panelResult, sp span) {
	all := ordered(r)
	if len(all) == 0 {
		cv.message(b, "No data", cv.th.dim)
		return
	}
	unit := r.panel.FieldConfig.Defaults.Unit
	const lineH = 14
	rows := min(len(all), max(1, (b.H-90)/lineH-1))
	legendH := (rows + 1) * lineH
	plotBox := box{b.X, b.Y, b.W, b.H - legendH - 4}

	p := cv.newPlot()
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = cv.th.grid, cv.th.grid
	p.Add(grid)
	x0, x1 := float64(sp.start.Unix()), float64(sp.end.Unix())
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range all {
		c := seriesColors[i%len(seriesColors)]
		for _, seg := range segments(s.Points, sp.step) {
			l, err := plotter.NewLine(seg)
			if err != nil {
				continue // NaN or Inf points: not drawn
			}
			l.LineStyle = draw.LineStyle{Color: c, Width: 2}
			p.Add(l)
			for _, pt := range seg {
				lo, hi = math.Min(lo, pt.Y), math.Max(hi, pt.Y)
			}
		}
	}
	fd := r.panel.FieldConfig.Defaults
	if strings.Contains(fd.Custom.ThresholdsStyle.Mode, "line") || strings.Contains(fd.Custom.ThresholdsStyle.Mode, "dash") {
		for _, st := range fd.Thresholds.Steps {
			c := cv.th.colorOf(st.Color)
			if st.Value == nil || c == nil {
				continue
			}
			l, _ := plotter.NewLine(plotter.XYs{{X: x0, Y: *st.Value}, {X: x1, Y: *st.Value}})
			l.LineStyle = draw.LineStyle{Color: c, Width: 2, Dashes: []vg.Length{6, 4}}
			p.Add(l)
			lo, hi = math.Min(lo, *st.Value), math.Max(hi, *st.Value)
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	if lo > 0 {
		lo = 0
	}
	if hi <= lo {
		hi = lo + 1
	}
	p.X.Min, p.X.Max = x0, x1
	p.Y.Min, p.Y.Max = lo, hi+(hi-lo)*0.05
	p.X.Tick.Marker = timeTicks{}
	p.Y.Tick.Marker = unitTicks{unit}
	p.Draw(cv.sub(plotBox))

	// The legend: name, last, max.
	y := b.Y + b.H - legendH
	colW := min(90, b.W/5)
	head := textStyle(10, true, cv.th.dim, draw.XRight)
	cv.text(b.X+b.W-colW-4, y, "Last *", head, colW)
	cv.text(b.X+b.W-4, y, "Max", head, colW)
	norm := textStyle(11, false, cv.th.text, draw.XLeft)
	numStyle := textStyle(11, false, cv.th.text, draw.XRight)
	for i := 0; i < rows; i++ {
		y += lineH
		s := all[i]
		if i == rows-1 && rows < len(all) {
			cv.text(b.X+4, y, fmt.Sprintf("+%d more series", len(all)-rows+1), textStyle(11, false, cv.th.dim, draw.XLeft), b.W)
			break
		}
		c := seriesColors[i%len(seriesColors)]
		cv.fill(box{b.X + 4, y + 5, 14, 3}, c)
		last, mx := lastMax(s.Points)
		cv.text(b.X+24, y, s.name, norm, b.W-2*colW-32)
		cv.text(b.X+b.W-colW-4, y, formatValue(last, unit), numStyle, colW)
		cv.text(b.X+b.W-4, y, formatValue(mx, unit), numStyle, colW)
	}
}

// lastMax is a series' last value and its largest, NaN for none.
func lastMax(pts []point) (last, mx float64) {
	last, mx = math.NaN(), math.NaN()
	for _, p := range pts {
		if math.IsNaN(p.V) {
			continue
		}
		last = p.V
		if math.IsNaN(mx) || p.V > mx {
			mx = p.V
		}
	}
	return last, mx
}

// segments splits a series where points are missing (more than 1.5 steps
// apart), so a gap shows as one, as Grafana does.
func segments(pts []point, step time.Duration) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	var prev time.Time
	for _, p := range pts {
		if math.IsNaN(p.V) || math.IsInf(p.V, 0) {
			continue
		}
		if len(cur) > 0 && p.T.Sub(prev) > step*3/2 {
			out = append(out, cur)
			cur = nil
		}
		cur = append(cur, plotter.XY{X: float64(p.T.UnixMilli()) / 1000, Y: p.V})
		prev = p.T
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	// A lone point is a short flat line, so it shows.
	for i, s := range out {
		if len(s) == 1 {
			out[i] = plotter.XYs{s[0], {X: s[0].X + step.Seconds()/2, Y: s[0].Y}}
		}
	}
	return out
}

// timeTicks marks a time axis (Unix seconds) at round clock times, about
// six of them.
type timeTicks struct{}

func (timeTicks) Ticks(lo, hi float64) []plot.Tick {
	steps := []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400}
	st := steps[len(steps)-1]
	for _, s := range steps {
		if (hi-lo)/s <= 7 {
			st = s
			break
		}
	}
	format := "15:04"
	if st < 60 {
		format = "15:04:05"
	}
	var out []plot.Tick
	for v := math.Ceil(lo/st) * st; v <= hi; v += st {
		out = append(out, plot.Tick{Value: v, Label: time.Unix(int64(v), 0).UTC().Format(format)})
	}
	return out
}

// unitTicks labels plot.DefaultTicks' marks in the panel's unit.
type unitTicks struct{ unit string }

func (u unitTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = formatValue(ts[i].Value, u.unit)
		}
	}
	return ts
}

// heatmap draws a Prometheus histogram's buckets over time: each bucket's
// own count (the difference of the cumulative le series), its colour
// growing with the square root of the count, as the dashboard's
// exponential scale with exponent 0.5 does. Only the buckets from the
// lowest to the highest that ever held a count are drawn.
func (cv canvas) heatmap(b box, r panelResult, sp span) {
	var les []float64
	byLE := map[float64][]point{}
	for _, s := range ordered(r) {
		le, err := strconv.ParseFloat(s.Labels["le"], 64)
		if err != nil {
			continue
		}
		if _, ok := byLE[le]; !ok {
			les = append(les, le)
		}
		byLE[le] = s.Points
	}
	sort.Float64s(les)
	var times []int64
	seen := map[int64]bool{}
	cum := map[int64][]float64{}
	for i, le := range les {
		for _, p := range byLE[le] {
			t := p.T.UnixMilli()
			if !seen[t] {
				seen[t] = true
				times = append(times, t)
				cum[t] = make([]float64, len(les))
			}
			cum[t][i] = p.V
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	counts := map[int64][]float64{}
	first, last, peak := len(les), -1, 0.0
	for _, t := range times {
		c := make([]float64, len(les))
		for i := range les {
			v := cum[t][i]
			if i > 0 {
				v -= cum[t][i-1]
			}
			if v > 0 && !math.IsInf(v, 0) {
				c[i] = v
				first, last, peak = min(first, i), max(last, i), math.Max(peak, v)
			}
		}
		counts[t] = c
	}
	if last < 0 {
		cv.message(b, "No data", cv.th.dim)
		return
	}
	p := cv.newPlot()
	p.X.Min, p.X.Max = float64(sp.start.Unix()), float64(sp.end.Unix())
	n := last - first + 1
	p.Y.Min, p.Y.Max = 0, float64(n)
	p.X.Tick.Marker = timeTicks{}
	labels := make([]string, n+1)
	for i := 0; i <= n; i++ {
		if j := first + i - 1; j >= 0 {
			labels[i] = formatValue(les[j], "s")
		}
	}
	p.Y.Tick.Marker = bucketTicks(labels)
	p.Add(heatCells{times: times, counts: counts, first: first, n: n, peak: peak, step: sp.step, th: cv.th})
	p.Draw(cv.sub(box{b.X, b.Y, b.W, b.H - 2}))
}

// heatCells is the heatmap's cells as a gonum plotter.
type heatCells struct {
	times    []int64
	counts   map[int64][]float64
	first, n int
	peak     float64
	step     time.Duration
	th       theme
}

func (h heatCells) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, t := range h.times {
		x1 := float64(t) / 1000
		x0 := x1 - h.step.Seconds()
		for i := 0; i < h.n; i++ {
			v := h.counts[t][h.first+i]
			if v <= 0 {
				continue
			}
			l, r := trX(x0)+0.5, trX(x1)-0.5
			bt, tp := trY(float64(i))+0.5, trY(float64(i+1))-0.5
			if r <= l {
				r = l + 1
			}
			c.FillPolygon(h.th.heat(math.Sqrt(v/h.peak)), c.ClipPolygonXY([]vg.Point{{X: l, Y: bt}, {X: r, Y: bt}, {X: r, Y: tp}, {X: l, Y: tp}}))
		}
	}
}

// bucketTicks labels bucket edges with their upper bounds, thinned to at
// most eight labels.
type bucketTicks []string

func (b bucketTicks) Ticks(lo, hi float64) []plot.Tick {
	every := (len(b) + 7) / 8
	var out []plot.Tick
	for i, l := range b {
		if i%every != 0 {
			l = ""
		}
		out = append(out, plot.Tick{Value: float64(i), Label: l})
	}
	return out
}

// shown is one value's text and colour after the value mappings and the
// thresholds.
func (cv canvas) shown(v *float64, unit string, mappings []mapping, th thresholds) (string, color.Color) {
	for _, m := range mappings {
		switch m.Type {
		case "value":
			if v == nil {
				continue
			}
			var opts map[string]mappingResult
			if json.Unmarshal(m.Options, &opts) != nil {
				continue
			}
			if res, ok := opts[strconv.FormatFloat(*v, 'f', -1, 64)]; ok {
				return res.Text, cv.th.colorOf(res.Color)
			}
		case "special":
			var o struct {
				Match  string        `json:"match"`
				Result mappingResult `json:"result"`
			}
			if v == nil && json.Unmarshal(m.Options, &o) == nil && (o.Match == "null" || o.Match == "null+nan") {
				return o.Result.Text, cv.th.colorOf(o.Result.Color)
			}
		}
	}
	if v == nil {
		return "", nil
	}
	return formatValue(*v, unit), cv.th.thresholdColor(th, *v)
}

// stat draws each series' last value as a big number, coloured (or on a
// background coloured) by the value mappings and thresholds, its legend
// over it when there are several.
func (cv canvas) stat(b box, r panelResult) {
	fd := r.panel.FieldConfig.Defaults
	all := ordered(r)
	if len(all) == 0 {
		txt, c := cv.shown(nil, fd.Unit, fd.Mappings, fd.Thresholds)
		if txt == "" {
			txt = fd.NoValue
		}
		if txt == "" {
			txt, c = "No data", cv.th.dim
		}
		if c == nil {
			c = cv.th.text
		}
		cv.text(b.X+b.W/2, b.Y+b.H/2-14, txt, textStyle(24, true, c, draw.XCenter), b.W)
		return
	}
	perRow := max(1, min(len(all), b.W/110))
	nRows := (len(all) + perRow - 1) / perRow
	cw, ch := b.W/perRow, b.H/nRows
	for i, s := range all {
		cell := box{b.X + (i%perRow)*cw, b.Y + (i/perRow)*ch, cw - 4, ch - 4}
		last, _ := lastMax(s.Points)
		txt, c := cv.shown(&last, fd.Unit, fd.Mappings, fd.Thresholds)
		if c == nil {
			c = cv.th.text
		}
		fg := c
		if r.panel.Options.ColorMode == "background" {
			cv.fill(cell, c)
			fg = color.White
		}
		top := cell.Y + 4
		if len(all) > 1 || s.name != seriesName(s.Labels) {
			cv.text(cell.X+cell.W/2, top, s.name, textStyle(12, false, fg, draw.XCenter), cell.W-4)
			top += 16
		}
		size := math.Min(float64(cell.Y+cell.H-top)*0.7, 44)
		sty := textStyle(size, true, fg, draw.XCenter)
		for size > 12 && float64(sty.Width(txt)) > float64(cell.W-8) {
			size *= 0.9
			sty = textStyle(size, true, fg, draw.XCenter)
		}
		cv.text(cell.X+cell.W/2, top+(cell.Y+cell.H-top-int(size))/2, txt, sty, cell.W-4)
	}
}
