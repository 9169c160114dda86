package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The subset of Grafana's classic dashboard JSON that dashshot draws:
// panels with their grid position, targets and field config, and the
// template variables the targets use.

type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	GridPos     gridPos     `json:"gridPos"`
	Targets     []target    `json:"targets"`
	FieldConfig fieldConfig `json:"fieldConfig"`
	Options     struct {
		ColorMode string `json:"colorMode"`
	} `json:"options"`
	Transformations []struct {
		ID      string `json:"id"`
		Options struct {
			ExcludeByName map[string]bool   `json:"excludeByName"`
			RenameByName  map[string]string `json:"renameByName"`
			IndexByName   map[string]int    `json:"indexByName"`
		} `json:"options"`
	} `json:"transformations"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

type gridPos struct{ X, Y, W, H int }

type target struct {
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
	RefID        string `json:"refId"`
	Format       string `json:"format"`
	Instant      bool   `json:"instant"`
	Hide         bool   `json:"hide"`
}

type fieldConfig struct {
	Defaults  fieldDefaults `json:"defaults"`
	Overrides []struct {
		Matcher struct {
			ID      string `json:"id"`
			Options any    `json:"options"`
		} `json:"matcher"`
		Properties []struct {
			ID    string          `json:"id"`
			Value json.RawMessage `json:"value"`
		} `json:"properties"`
	} `json:"overrides"`
}

type fieldDefaults struct {
	Unit       string     `json:"unit"`
	NoValue    string     `json:"noValue"`
	Min        *float64   `json:"min"`
	Max        *float64   `json:"max"`
	Thresholds thresholds `json:"thresholds"`
	Mappings   []mapping  `json:"mappings"`
	Custom     struct {
		ThresholdsStyle struct {
			Mode string `json:"mode"`
		} `json:"thresholdsStyle"`
	} `json:"custom"`
}

type thresholds struct {
	Steps []struct {
		Value *float64 `json:"value"`
		Color string   `json:"color"`
	} `json:"steps"`
}

// mapping is a value mapping: "value" maps exact texts, "special" maps
// null (a missing value).
type mapping struct {
	Type    string          `json:"type"`
	Options json.RawMessage `json:"options"`
}

type mappingResult struct {
	Text  string `json:"text"`
	Color string `json:"color"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Regex      string          `json:"regex"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	AllValue   string          `json:"allValue"`
	Sort       int             `json:"sort"`
}

// queryText is a variable's query: a string, or an object with one.
func (v variable) queryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

func parseDashboard(b []byte) (*dashboard, error) {
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("not a Grafana dashboard: %w", err)
	}
	if len(d.Panels) == 0 {
		return nil, errors.New("not a Grafana dashboard: no panels")
	}
	return &d, nil
}

// drawable is the dashboard's panels in layout order, rows included, the
// panels of collapsed rows after their row.
func (d *dashboard) drawable() []panel {
	var out []panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].GridPos, out[j].GridPos
		if a.Y != b.Y {
			return a.Y < b.Y
		}
		return a.X < b.X
	})
	return out
}

// Grafana's variable syntaxes: $name, ${name}, ${name:format}, [[name]].
var varRef = regexp.MustCompile(`\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// macros are Grafana's own interval variables for one query range.
type macros struct {
	interval, rateInterval, rng time.Duration
}

// newMacros derives them as Grafana does for a Prometheus data source: the
// interval is the step, never under the scrape interval; the rate interval
// is the larger of interval + scrape interval and four scrape intervals, so
// a rate always spans enough samples.
func newMacros(step, scrape, rng time.Duration) macros {
	iv := max(step, scrape)
	return macros{interval: iv, rateInterval: max(iv+scrape, 4*scrape), rng: rng}
}

// interpolate replaces the variables in q: values holds each variable's
// value ("$__all" for All); a multi-value or All variable's value is
// regex-escaped (it is used with =~), as Grafana's Prometheus data source
// does. A reference to no variable ($1 of label_replace) stays as it is,
// as in Grafana.
func interpolate(q string, vars map[string]variable, values map[string]string, m macros) string {
	return varRef.ReplaceAllStringFunc(q, func(ref string) string {
		sm := varRef.FindStringSubmatch(ref)
		name := sm[1] + sm[2] + sm[3]
		switch name {
		case "__rate_interval":
			return promDuration(m.rateInterval)
		case "__interval":
			return promDuration(m.interval)
		case "__interval_ms":
			return strconv.FormatInt(m.interval.Milliseconds(), 10)
		case "__range":
			return promDuration(m.rng)
		case "__range_s":
			return strconv.FormatInt(int64(m.rng.Seconds()), 10)
		case "__range_ms":
			return strconv.FormatInt(m.rng.Milliseconds(), 10)
		}
		val, ok := values[name]
		if !ok {
			return ref
		}
		v := vars[name]
		if val == "$__all" {
			return v.AllValue
		}
		if v.Multi || v.IncludeAll {
			return strings.ReplaceAll(regexp.QuoteMeta(val), `\`, `\\`)
		}
		return val
	})
}

// promDuration renders d in PromQL's duration syntax, in the largest unit
// that divides it.
func promDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// Variable queries Grafana's Prometheus data source understands.
var (
	labelValuesQuery = regexp.MustCompile(`(?s)^\s*label_values\((?:(.*),)?\s*(\w+)\s*\)\s*$`)
	queryResultQuery = regexp.MustCompile(`(?s)^\s*query_result\((.*)\)\s*$`)
)

// legend renders a legendFormat with a series' labels; with no format, the
// series as Prometheus prints it.
func legend(format string, labels map[string]string) string {
	if format == "" || format == "__auto" {
		return seriesName(labels)
	}
	return legendRef.ReplaceAllStringFunc(format, func(ref string) string {
		return labels[legendRef.FindStringSubmatch(ref)[1]]
	})
}

var legendRef = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// seriesName is name{label="value", ...} with the labels sorted.
func seriesName(labels map[string]string) string {
	var ls []string
	for k, v := range labels {
		if k != "__name__" {
			ls = append(ls, fmt.Sprintf("%s=%q", k, v))
		}
	}
	sort.Strings(ls)
	return labels["__name__"] + "{" + strings.Join(ls, ", ") + "}"
}
