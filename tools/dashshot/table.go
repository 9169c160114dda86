package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot/vg/draw"
)

// column is one column of a table panel after Grafana's merge and organize
// transformations and the field overrides.
type column struct {
	field, name, unit string
	mappings          []mapping
	th                thresholds
	colored           bool
}

// tableRow is one merged row: label values and query values by field.
type tableRow struct {
	labels map[string]string
	values map[string]float64
}

// tableRows merges the instant results as Grafana's "merge" does here:
// series with the same labels (bar __name__) are one row, each query's
// value in "Value", or "Value #refId" when the panel has several queries.
func tableRows(r panelResult) ([]tableRow, []string) {
	var targets int
	for _, t := range r.panel.Targets {
		if !t.Hide && t.Expr != "" {
			targets++
		}
	}
	var rows []tableRow
	index := map[string]int{}
	var fields []string
	seenField := map[string]bool{}
	addField := func(f string) {
		if !seenField[f] {
			seenField[f] = true
			fields = append(fields, f)
		}
	}
	for _, t := range r.panel.Targets {
		vf := "Value"
		if targets > 1 {
			vf = "Value #" + t.RefID
		}
		for _, s := range r.series[t.RefID] {
			ls := map[string]string{}
			var keys []string
			for k, v := range s.Labels {
				if k != "__name__" {
					ls[k] = v
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			var key strings.Builder
			for _, k := range keys {
				fmt.Fprintf(&key, "%s=%q,", k, ls[k])
				addField(k)
			}
			i, ok := index[key.String()]
			if !ok {
				i = len(rows)
				index[key.String()] = i
				rows = append(rows, tableRow{labels: ls, values: map[string]float64{}})
			}
			if len(s.Points) > 0 {
				rows[i].values[vf] = s.Points[len(s.Points)-1].V
			}
		}
		addField(vf)
	}
	return rows, fields
}

// tableColumns orders, renames, excludes and hides the fields as the
// panel's organize transformation and overrides say.
func tableColumns(p panel, fields []string) []column {
	exclude, rename, idx := map[string]bool{}, map[string]string{}, map[string]int{}
	for _, t := range p.Transformations {
		if t.ID != "organize" {
			continue
		}
		for k, v := range t.Options.ExcludeByName {
			exclude[k] = v
		}
		for k, v := range t.Options.RenameByName {
			rename[k] = v
		}
		for k, v := range t.Options.IndexByName {
			idx[k] = v
		}
	}
	sort.SliceStable(fields, func(i, j int) bool {
		a, aok := idx[fields[i]]
		b, bok := idx[fields[j]]
		if aok != bok {
			return aok
		}
		return aok && a < b
	})
	var out []column
	for _, f := range fields {
		if exclude[f] {
			continue
		}
		c := column{field: f, name: f, unit: p.FieldConfig.Defaults.Unit, mappings: p.FieldConfig.Defaults.Mappings, th: p.FieldConfig.Defaults.Thresholds}
		if n, ok := rename[f]; ok && n != "" {
			c.name = n
		}
		hidden := false
		for _, o := range p.FieldConfig.Overrides {
			if o.Matcher.ID != "byName" || fmt.Sprint(o.Matcher.Options) != c.name {
				continue
			}
			for _, prop := range o.Properties {
				switch prop.ID {
				case "custom.hidden":
					_ = json.Unmarshal(prop.Value, &hidden)
				case "unit":
					_ = json.Unmarshal(prop.Value, &c.unit)
				case "mappings":
					_ = json.Unmarshal(prop.Value, &c.mappings)
				case "thresholds":
					_ = json.Unmarshal(prop.Value, &c.th)
				case "custom.cellOptions":
					c.colored = strings.Contains(string(prop.Value), "color-text") || strings.Contains(string(prop.Value), "color-background")
				}
			}
		}
		if !hidden {
			out = append(out, c)
		}
	}
	return out
}

// table draws the merged rows under a header, as many as fit.
func (cv canvas) table(b box, r panelResult) {
	rows, fields := tableRows(r)
	if len(rows) == 0 {
		cv.message(b, "No data", cv.th.dim)
		return
	}
	cols := tableColumns(r.panel, fields)
	head := textStyle(11, true, cv.th.dim, draw.XLeft)
	cell := textStyle(11, false, cv.th.text, draw.XLeft)
	texts := make([][]string, len(rows))
	colors := make([][]color.Color, len(rows))
	width := make([]float64, len(cols))
	for j, c := range cols {
		width[j] = float64(head.Width(c.name)) + 14
	}
	for i, row := range rows {
		texts[i] = make([]string, len(cols))
		colors[i] = make([]color.Color, len(cols))
		for j, c := range cols {
			var txt string
			var clr color.Color
			if v, ok := row.values[c.field]; ok {
				txt, clr = cv.shown(&v, c.unit, c.mappings, c.th)
			} else if l, ok := row.labels[c.field]; ok {
				txt = l
				for _, m := range c.mappings {
					var opts map[string]mappingResult
					if m.Type == "value" && json.Unmarshal(m.Options, &opts) == nil {
						if res, ok := opts[l]; ok {
							txt, clr = res.Text, cv.th.colorOf(res.Color)
						}
					}
				}
			}
			if !c.colored || clr == nil {
				clr = cv.th.text
			}
			texts[i][j], colors[i][j] = txt, clr
			width[j] = math.Max(width[j], float64(cell.Width(txt))+14)
		}
	}
	total := 0.0
	for _, w := range width {
		total += w
	}
	scale := math.Min(1, float64(b.W)/total)
	const lineH = 17
	x := b.X
	xs := make([]int, len(cols))
	for j := range cols {
		xs[j] = x
		x += int(width[j] * scale)
	}
	colW := func(j int) int { return int(width[j]*scale) - 8 }
	for j, c := range cols {
		cv.text(xs[j]+4, b.Y, c.name, head, colW(j))
	}
	cv.fill(box{b.X, b.Y + lineH - 2, b.W, 1}, cv.th.border)
	fit := max(1, (b.H-lineH)/lineH)
	for i := range rows {
		y := b.Y + (i+1)*lineH
		if i == fit-1 && fit < len(rows) {
			cv.text(b.X+4, y, fmt.Sprintf("+%d more rows", len(rows)-i), textStyle(11, false, cv.th.dim, draw.XLeft), b.W)
			break
		}
		for j := range cols {
			cv.text(xs[j]+4, y, texts[i][j], textStyle(11, false, colors[i][j], draw.XLeft), colW(j))
		}
	}
}
