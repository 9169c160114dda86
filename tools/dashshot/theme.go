package main

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strings"
)

// theme is the picture's colours.
type theme struct {
	bg, panel, border, text, dim, grid color.Color
	heatLow, heatHigh                  color.RGBA
}

var themes = map[string]theme{
	"light": {
		bg: rgb(0xf4f5f5), panel: rgb(0xffffff), border: rgb(0xd8d9da), text: rgb(0x24292e), dim: rgb(0x6e7079), grid: rgb(0xe9eaeb),
		heatLow: rgb(0xfde7d2), heatHigh: rgb(0xc4410c),
	},
	"dark": {
		bg: rgb(0x111217), panel: rgb(0x181b1f), border: rgb(0x2c3235), text: rgb(0xd8d9da), dim: rgb(0x8e8e8e), grid: rgb(0x2c3235),
		heatLow: rgb(0x3d2314), heatHigh: rgb(0xff9830),
	},
}

func rgb(v uint32) color.RGBA {
	return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 0xff}
}

// colors is every colour the theme draws with, for the PNG's palette.
func (th theme) colors() []color.RGBA {
	out := []color.RGBA{th.heatLow, th.heatHigh, {0xff, 0xff, 0xff, 0xff}}
	for _, c := range []color.Color{th.bg, th.panel, th.border, th.text, th.dim, th.grid} {
		out = append(out, color.RGBAModel.Convert(c).(color.RGBA))
	}
	out = append(out, seriesColors...)
	names := make([]string, 0, len(namedColors))
	for n := range namedColors {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, namedColors[n])
	}
	return out
}

// seriesColors is Grafana's classic palette, in its order.
var seriesColors = []color.RGBA{
	rgb(0x73bf69), rgb(0xf2cc0c), rgb(0x8ab8ff), rgb(0xff780a), rgb(0xf2495c),
	rgb(0x5794f2), rgb(0xb877d9), rgb(0x705da0), rgb(0x37872d), rgb(0xfade2a),
}

// namedColors are Grafana's named colours a dashboard uses for thresholds
// and value mappings.
var namedColors = map[string]color.RGBA{
	"green": rgb(0x73bf69), "red": rgb(0xf2495c), "orange": rgb(0xff9830), "yellow": rgb(0xfade2a),
	"blue": rgb(0x5794f2), "purple": rgb(0xb877d9),
	"dark-green": rgb(0x37872d), "dark-red": rgb(0xc4162a), "dark-orange": rgb(0xfa6400),
	"dark-yellow": rgb(0xe0b400), "dark-blue": rgb(0x1f60c4), "dark-purple": rgb(0x8f3bb8),
}

// colorOf is a Grafana colour: a name, #rrggbb, or "text" (the theme's
// text). "transparent" and unknown names are nil: not drawn.
func (th theme) colorOf(name string) color.Color {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "text" {
		return th.text
	}
	if c, ok := namedColors[strings.TrimPrefix(strings.TrimPrefix(name, "semi-"), "super-light-")]; ok {
		return c
	}
	if c, ok := namedColors[name]; ok {
		return c
	}
	var v uint32
	if len(name) == 7 && name[0] == '#' {
		if _, err := fmt.Sscanf(name[1:], "%06x", &v); err == nil {
			return rgb(v)
		}
	}
	return nil
}

// heat is the heatmap colour of f in [0, 1], between the theme's two ends.
func (th theme) heat(f float64) color.Color {
	f = math.Max(0, math.Min(1, f))
	mix := func(a, b uint8) uint8 { return uint8(float64(a) + (float64(b)-float64(a))*f + 0.5) }
	return color.RGBA{mix(th.heatLow.R, th.heatHigh.R), mix(th.heatLow.G, th.heatHigh.G), mix(th.heatLow.B, th.heatHigh.B), 0xff}
}

// thresholdColor is the colour of the last step at or under v.
func (th theme) thresholdColor(t thresholds, v float64) color.Color {
	var c color.Color
	for _, s := range t.Steps {
		if s.Value == nil || v >= *s.Value {
			c = th.colorOf(s.Color)
		}
	}
	return c
}
