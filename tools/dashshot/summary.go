package main

import "math"

// summary is what -json prints: what each drawn panel got, for a test or
// a reader to check the picture against.
type summary struct {
	Dashboard string            `json:"dashboard"`
	Variables map[string]string `json:"variables"`
	Width     int               `json:"width"`
	Height    int               `json:"height"`
	Panels    []panelSummary    `json:"panels"`
}

type panelSummary struct {
	Title  string          `json:"title"`
	Type   string          `json:"type"`
	Box    [4]int          `json:"box"` // x, y, width, height in pixels
	Series int             `json:"series"`
	Values []seriesSummary `json:"values,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// seriesSummary is one series' legend, first, last and largest value
// (null for none).
type seriesSummary struct {
	Name  string   `json:"name"`
	First *float64 `json:"first"`
	Last  *float64 `json:"last"`
	Max   *float64 `json:"max"`
}

func summarize(d *dashboard, results []panelResult, values map[string]string, lay layout) summary {
	s := summary{Dashboard: d.Title, Variables: values, Width: lay.W, Height: lay.H}
	for i, r := range results {
		if r.panel.Type == "row" {
			continue
		}
		b := lay.boxes[i]
		ps := panelSummary{Title: r.panel.Title, Type: r.panel.Type, Box: [4]int{b.X, b.Y, b.W, b.H}}
		if r.err != nil {
			ps.Error = r.err.Error()
		}
		for _, n := range ordered(r) {
			ps.Series++
			first := math.NaN()
			for _, p := range n.Points {
				if !math.IsNaN(p.V) {
					first = p.V
					break
				}
			}
			last, mx := lastMax(n.Points)
			ps.Values = append(ps.Values, seriesSummary{Name: n.name, First: finite(first), Last: finite(last), Max: finite(mx)})
		}
		s.Panels = append(s.Panels, ps)
	}
	return s
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
