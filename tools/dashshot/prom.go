package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// promClient queries a Prometheus's HTTP API.
type promClient struct {
	base string
	http *http.Client
}

// series is one series of a query result: an instant query gives one
// point, a range query many.
type series struct {
	Labels map[string]string
	Points []point
}

type point struct {
	T time.Time
	V float64
}

// get decodes the data of a successful API response.
func (c *promClient) get(ctx context.Context, path string, params url.Values, into any) error {
	u := c.base + path + "?" + params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: %s: not a Prometheus API answer: %w", path, resp.Status, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Data, into)
}

// query runs an instant query at t; a scalar result is one series.
func (c *promClient) query(ctx context.Context, q string, t time.Time) ([]series, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	p := url.Values{"query": {q}, "time": {unixString(t)}}
	if err := c.get(ctx, "/api/v1/query", p, &data); err != nil {
		return nil, err
	}
	switch data.ResultType {
	case "vector":
		var res []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(data.Result, &res); err != nil {
			return nil, err
		}
		out := make([]series, 0, len(res))
		for _, r := range res {
			pt, err := parsePoint(r.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, series{Labels: r.Metric, Points: []point{pt}})
		}
		return out, nil
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(data.Result, &v); err != nil {
			return nil, err
		}
		pt, err := parsePoint(v)
		if err != nil {
			return nil, err
		}
		return []series{{Labels: map[string]string{}, Points: []point{pt}}}, nil
	}
	return nil, fmt.Errorf("query %s: result type %s", q, data.ResultType)
}

// queryRange runs a range query.
func (c *promClient) queryRange(ctx context.Context, q string, start, end time.Time, step time.Duration) ([]series, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	p := url.Values{"query": {q}, "start": {unixString(start)}, "end": {unixString(end)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	if err := c.get(ctx, "/api/v1/query_range", p, &data); err != nil {
		return nil, err
	}
	out := make([]series, 0, len(data.Result))
	for _, r := range data.Result {
		s := series{Labels: r.Metric}
		for _, v := range r.Values {
			pt, err := parsePoint(v)
			if err != nil {
				return nil, err
			}
			s.Points = append(s.Points, pt)
		}
		out = append(out, s)
	}
	return out, nil
}

// labelValues is label's values on the series matching match (all series
// when empty) between start and end, as Grafana's label_values() asks.
func (c *promClient) labelValues(ctx context.Context, label, match string, start, end time.Time) ([]string, error) {
	p := url.Values{"start": {unixString(start)}, "end": {unixString(end)}}
	if strings.TrimSpace(match) != "" {
		p.Set("match[]", match)
	}
	var out []string
	err := c.get(ctx, "/api/v1/label/"+url.PathEscape(label)+"/values", p, &out)
	return out, err
}

func parsePoint(v [2]any) (point, error) {
	ts, ok := v[0].(float64)
	s, ok2 := v[1].(string)
	if !ok || !ok2 {
		return point{}, fmt.Errorf("malformed sample %v", v)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return point{}, fmt.Errorf("malformed sample value %q", s)
	}
	sec, frac := math.Modf(ts)
	return point{T: time.Unix(int64(sec), int64(frac*1e9)), V: f}, nil
}

func unixString(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

// resolveVars gives every query, custom and constant variable a value, in
// order, each query interpolated with the values before it: the value
// given on the command line (All for All), else All for a variable that
// includes All,
// else the first value Prometheus returns (sorted as the variable says).
// A variable with no value at all resolves to "" and is reported.
func resolveVars(ctx context.Context, c *promClient, d *dashboard, given map[string]string, start, end time.Time, m macros) (map[string]string, []string, error) {
	vars := map[string]variable{}
	values := map[string]string{}
	var empty []string
	for _, v := range d.Templating.List {
		vars[v.Name] = v
		if g, ok := given[v.Name]; ok {
			if v.IncludeAll && (g == "All" || g == "$__all") {
				g = "$__all"
			}
			values[v.Name] = g
			continue
		}
		var opts []string
		switch v.Type {
		case "query":
			var err error
			opts, err = variableOptions(ctx, c, v, interpolate(v.queryText(), vars, values, m), start, end)
			if err != nil {
				return nil, nil, fmt.Errorf("variable %s: %w", v.Name, err)
			}
		case "custom":
			for _, o := range strings.Split(v.queryText(), ",") {
				if o = strings.TrimSpace(o); o != "" {
					opts = append(opts, o)
				}
			}
		case "constant", "textbox":
			opts = []string{v.queryText()}
		default:
			continue // datasource, interval...: no query uses them
		}
		switch {
		case v.IncludeAll:
			values[v.Name] = "$__all"
			if v.AllValue == "" {
				// Grafana's All without an all value: every option.
				esc := make([]string, len(opts))
				for i, o := range opts {
					esc[i] = strings.ReplaceAll(regexp.QuoteMeta(o), `\`, `\\`)
				}
				v.AllValue = "(" + strings.Join(esc, "|") + ")"
				vars[v.Name] = v
			}
		case len(opts) > 0:
			values[v.Name] = opts[0]
		default:
			values[v.Name] = ""
			empty = append(empty, v.Name)
		}
	}
	for name := range given {
		if _, ok := vars[name]; !ok {
			return nil, nil, usageError{fmt.Errorf("-var %s: the dashboard has no variable %s", name, name)}
		}
	}
	return values, empty, nil
}

// variableOptions runs a variable's query: label_values(selector, label)
// or query_result(expr), whose result lines the variable's regex filters.
func variableOptions(ctx context.Context, c *promClient, v variable, q string, start, end time.Time) ([]string, error) {
	var opts []string
	seen := map[string]bool{}
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			opts = append(opts, s)
		}
	}
	var re *regexp.Regexp
	if v.Regex != "" {
		var err error
		if re, err = regexp.Compile(strings.TrimSuffix(strings.TrimPrefix(v.Regex, "/"), "/")); err != nil {
			return nil, fmt.Errorf("regex %s: %w", v.Regex, err)
		}
	}
	filter := func(s string) {
		if re == nil {
			add(s)
		} else if sm := re.FindStringSubmatch(s); sm != nil {
			add(sm[len(sm)-1])
		}
	}
	if m := labelValuesQuery.FindStringSubmatch(q); m != nil {
		vals, err := c.labelValues(ctx, m[2], m[1], start, end)
		if err != nil {
			return nil, err
		}
		for _, s := range vals {
			filter(s)
		}
	} else if m := queryResultQuery.FindStringSubmatch(q); m != nil {
		res, err := c.query(ctx, m[1], end)
		if err != nil {
			return nil, err
		}
		for _, s := range res {
			filter(fmt.Sprintf("%s %v %d", seriesName(s.Labels), s.Points[0].V, s.Points[0].T.UnixMilli()))
		}
	} else {
		return nil, fmt.Errorf("a query dashshot does not know: %s", q)
	}
	// Grafana's sorts: odd ascending, even descending (alphabetical,
	// numerical, case-insensitive: all alphabetical here).
	switch v.Sort {
	case 1, 3, 5:
		sort.Strings(opts)
	case 2, 4, 6:
		sort.Sort(sort.Reverse(sort.StringSlice(opts)))
	}
	return opts, nil
}
