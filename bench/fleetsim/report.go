package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// result is one run (one N) as report measured it; table reads several.
type result struct {
	Nodes          int                `json:"nodes"`
	Prometheus     string             `json:"prometheus"`       // the engine's version
	Engine         string             `json:"engine,omitempty"` // in a sharded run: "prometheus" (a cluster shard) or "vmalert" (the global layer)
	Name           string             `json:"name,omitempty"`   // in a sharded run: which engine, as the table names it
	ScrapeInterval float64            `json:"scrape_interval_seconds"`
	EvalInterval   float64            `json:"evaluation_interval_seconds"`
	Start          float64            `json:"start"` // the targets appeared
	End            float64            `json:"end"`
	Steady         float64            `json:"steady_seconds"` // the window the medians and maxima cover, ending at End
	Wall           float64            `json:"wall_seconds"`   // the whole run, setup included
	Targets        float64            `json:"targets"`
	TargetsUp      float64            `json:"targets_up"`
	EtcdTargets    float64            `json:"etcd_targets"`
	Samples        float64            `json:"samples_per_scrape"`
	HeadSeries     float64            `json:"head_series"`
	HeadSeriesMax  float64            `json:"head_series_max"`
	RuleSeries     float64            `json:"rule_series"`
	RSS            float64            `json:"rss_bytes"`
	RSSMax         float64            `json:"rss_max_bytes"`
	HeapInuse      float64            `json:"heap_inuse_bytes"`
	CPU            float64            `json:"cpu_cores"`
	SimCPU         float64            `json:"sim_cpu_cores"`
	ScrapeP50      float64            `json:"scrape_p50_seconds"`
	ScrapeP99      float64            `json:"scrape_p99_seconds"`
	ScrapeMax      float64            `json:"scrape_max_seconds"`
	IntervalP99    float64            `json:"scrape_interval_p99_seconds"`
	EvalFailures   float64            `json:"rule_evaluation_failures"`
	Groups         []groupStat        `json:"groups"`
	TopRules       []ruleStat         `json:"top_rules"`
	Rules          []ruleStat         `json:"rules"`           // every rule, slowest first
	RecordedSeries map[string]float64 `json:"recorded_series"` // series per recording rule
	Alerts         map[string]float64 `json:"alerts"`
}

type groupStat struct {
	Name       string  `json:"name"`
	Rules      int     `json:"rules"`
	Interval   float64 `json:"interval_seconds"` // its own evaluation interval; 0 in older results: the global one
	Median     float64 `json:"median_seconds"`
	Max        float64 `json:"max_seconds"`
	MaxRun     float64 `json:"max_run_seconds"` // over the whole run, warm-up included
	Iterations float64 `json:"iterations"`
	Missed     float64 `json:"missed"`
}

type ruleStat struct {
	Group   string  `json:"group"`
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

func reportMain(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	url := fs.String("prometheus", "http://127.0.0.1:19090", "the Prometheus under test")
	nodes := fs.Int("nodes", 0, "simulated nodes (required)")
	start := fs.Float64("start", 0, "unix time the targets appeared (required)")
	steady := fs.Duration("steady", 10*time.Minute, "window at the end of the run for medians and maxima")
	wall := fs.Float64("wall", 0, "wall time of the whole run, seconds")
	scrape := fs.Duration("scrape-interval", 30*time.Second, "the diskcanary job's scrape interval")
	eval := fs.Duration("evaluation-interval", 30*time.Second, "the rule evaluation interval")
	out := fs.String("out", "", "write the result here as JSON (default: stdout)")
	engine := fs.String("engine", "", "a sharded run's engine: prometheus (-prometheus is a cluster shard), or vmalert (-prometheus is the VictoriaMetrics single node that scrapes vmalert and itself, -ruler is vmalert); empty: the one Prometheus of fleet-scale")
	ruler := fs.String("ruler", "", "the rules API (/api/v1/rules) to read, when not -prometheus's: vmalert's")
	name := fs.String("name", "", "the engine's name in the tables (sharded runs)")
	version := fs.String("version", "", "the engine's version, when its build_info does not say")
	brief := fs.Bool("brief", false, "print one progress line instead")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodes < 1 || *start == 0 {
		return errors.New("report: -nodes and -start are required")
	}
	c, err := api.NewClient(api.Config{Address: *url})
	if err != nil {
		return err
	}
	q := querier{api: v1.NewAPI(c), ctx: context.Background(), end: time.Now()}
	if *engine != "" && *engine != "prometheus" && *engine != "vmalert" {
		return fmt.Errorf("report: -engine %q: want prometheus or vmalert", *engine)
	}
	if *brief && *engine == "vmalert" {
		return vmalertProgress(&q, *name, *start)
	}
	if *brief {
		return progress(&q, *name, *start)
	}
	rulesAPI := q.api
	if *ruler != "" {
		rc, err := api.NewClient(api.Config{Address: *ruler})
		if err != nil {
			return err
		}
		rulesAPI = v1.NewAPI(rc)
	}
	r := result{Nodes: *nodes, Engine: *engine, Name: *name, Prometheus: *version, Start: *start, End: float64(q.end.Unix()), Steady: steady.Seconds(), Wall: *wall,
		ScrapeInterval: scrape.Seconds(), EvalInterval: eval.Seconds()}
	run := fmt.Sprintf("%ds", int(r.End-r.Start))
	win := fmt.Sprintf("%ds", int(r.Steady))
	type measure struct {
		dst  *float64
		expr string
	}
	self := `{job="prometheus"}`
	measures := []measure{
		{&r.Targets, `count(up{job="diskcanary"})`},
		{&r.TargetsUp, `sum(up{job="diskcanary"})`},
		{&r.EtcdTargets, `count(up{job="etcd"})`},
		{&r.Samples, `avg(scrape_samples_scraped{job="diskcanary"})`},
		{&r.HeadSeries, `prometheus_tsdb_head_series` + self},
		{&r.HeadSeriesMax, `max_over_time(prometheus_tsdb_head_series` + self + `[` + run + `])`},
		{&r.RuleSeries, `count({__name__=~".+:.+"})`},
		{&r.RSS, `process_resident_memory_bytes` + self},
		{&r.RSSMax, `max_over_time(process_resident_memory_bytes` + self + `[` + run + `])`},
		{&r.HeapInuse, `go_memstats_heap_inuse_bytes` + self},
		{&r.CPU, `rate(process_cpu_seconds_total` + self + `[` + win + `])`},
		{&r.SimCPU, `rate(process_cpu_seconds_total{job="fleetsim"}[` + win + `])`},
		{&r.ScrapeP50, `quantile(0.5, avg_over_time(scrape_duration_seconds{job="diskcanary"}[` + win + `]))`},
		{&r.ScrapeP99, `quantile(0.99, max_over_time(scrape_duration_seconds{job="diskcanary"}[` + win + `]))`},
		{&r.ScrapeMax, `max(max_over_time(scrape_duration_seconds{job="diskcanary"}[` + win + `]))`},
		{&r.IntervalP99, `max(prometheus_target_interval_length_seconds{quantile="0.99"})`},
		{&r.EvalFailures, `sum(prometheus_rule_evaluation_failures_total)`},
	}
	gq := prometheusGroups
	if *engine == "vmalert" {
		// The global layer: VictoriaMetrics and vmalert, counted as one
		// engine (both scraped by VictoriaMetrics itself); its series are
		// what the clusters remote-write and vmalert writes back, the
		// storage's active series of the current hour.
		both := `{job=~"victoria-metrics|vmalert"}`
		active := `vm_cache_entries{job="victoria-metrics", type="storage/hour_metric_ids"}`
		measures = []measure{
			{&r.HeadSeries, active},
			{&r.HeadSeriesMax, `max_over_time(` + active + `[` + run + `])`},
			{&r.RuleSeries, `count({__name__=~".+:.+"})`},
			{&r.RSS, `sum(process_resident_memory_bytes` + both + `)`},
			{&r.RSSMax, `sum(max_over_time(process_resident_memory_bytes` + both + `[` + run + `]))`},
			{&r.HeapInuse, `sum(go_memstats_heap_inuse_bytes` + both + `)`},
			{&r.CPU, `sum(rate(process_cpu_seconds_total` + both + `[` + win + `]))`},
			{&r.EvalFailures, `sum({__name__=~"vmalert_(recording|alerting)_rules_errors_total"})`},
		}
		gq = vmalertGroups
	}
	for _, m := range measures {
		*m.dst = q.scalar(m.expr)
	}
	if v := q.vector(`prometheus_build_info`); len(v) > 0 && r.Prometheus == "" {
		r.Prometheus = string(v[0].Metric["version"])
	}
	r.Alerts = map[string]float64{}
	for _, s := range q.vector(`count by (alertname, alertstate) (ALERTS)`) {
		r.Alerts[string(s.Metric["alertname"])+" "+string(s.Metric["alertstate"])] = float64(s.Value)
	}

	groups := map[string]*groupStat{}
	group := func(m model.Metric) *groupStat {
		name := string(m[model.LabelName(gq.label)])
		if i := strings.LastIndex(name, ";"); i >= 0 {
			name = name[i+1:]
		}
		if groups[name] == nil {
			groups[name] = &groupStat{Name: name}
		}
		return groups[name]
	}
	for _, s := range q.matrix(gq.median, q.end.Add(-*steady)) {
		vals := make([]float64, len(s.Values))
		for i, p := range s.Values {
			vals[i] = float64(p.Value)
		}
		group(s.Metric).Median = median(vals)
	}
	for _, s := range q.matrix(gq.max, q.end.Add(-*steady)) {
		vals := make([]float64, len(s.Values))
		for i, p := range s.Values {
			vals[i] = float64(p.Value)
		}
		group(s.Metric).Max = slices.Max(vals)
	}
	for _, s := range q.vector(`max_over_time(` + gq.max + `[` + run + `])`) {
		group(s.Metric).MaxRun = float64(s.Value)
	}
	for _, s := range q.vector(gq.iterations) {
		group(s.Metric).Iterations = float64(s.Value)
	}
	for _, s := range q.vector(gq.missed) {
		group(s.Metric).Missed = float64(s.Value)
	}
	rules, err := rulesAPI.Rules(q.ctx, nil)
	if err != nil {
		return fmt.Errorf("report: /api/v1/rules: %w", err)
	}
	for _, g := range rules.Groups {
		if gs := groups[g.Name]; gs != nil {
			gs.Interval = g.Interval
			gs.Rules = len(g.Rules)
		}
		for _, rule := range g.Rules {
			switch x := rule.(type) {
			case v1.RecordingRule:
				r.TopRules = append(r.TopRules, ruleStat{g.Name, x.Name, x.EvaluationTime})
			case v1.AlertingRule:
				r.TopRules = append(r.TopRules, ruleStat{g.Name, x.Name, x.EvaluationTime})
			}
		}
	}
	slices.SortFunc(r.TopRules, func(a, b ruleStat) int { return cmpDesc(a.Seconds, b.Seconds) })
	r.Rules = r.TopRules
	r.TopRules = r.TopRules[:min(10, len(r.TopRules))]
	r.RecordedSeries = map[string]float64{}
	for _, s := range q.vector(`count by (__name__) ({__name__=~".+:.+"})`) {
		r.RecordedSeries[string(s.Metric["__name__"])] = float64(s.Value)
	}
	for _, g := range groups {
		r.Groups = append(r.Groups, *g)
	}
	slices.SortFunc(r.Groups, func(a, b groupStat) int { return strings.Compare(a.Name, b.Name) })
	if q.err != nil {
		return q.err
	}

	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = os.Stdout.Write(append(data, '\n'))
		return err
	}
	return os.WriteFile(*out, append(data, '\n'), 0o644)
}

// groupQueries are where an engine keeps its rule groups' figures.
type groupQueries struct {
	label       string // the series' label naming the group
	median, max string // sampled over the steady window for the group's median and maximum
	iterations  string
	missed      string
}

var prometheusGroups = groupQueries{
	label:  "rule_group",
	median: `prometheus_rule_group_last_duration_seconds`, max: `prometheus_rule_group_last_duration_seconds`,
	iterations: `prometheus_rule_group_iterations_total`, missed: `prometheus_rule_group_iterations_missed_total`,
}

// vmalertGroups: vmalert keeps no last duration, but a summary of its
// iterations over a sliding window of a few minutes; its median and its
// maximum (quantile 1), sampled through the steady window, stand for
// Prometheus' median and maximum of the last durations.
var vmalertGroups = groupQueries{
	label:  "group",
	median: `vmalert_iteration_duration_seconds{quantile="0.5"}`, max: `vmalert_iteration_duration_seconds{quantile="1"}`,
	iterations: `vmalert_iteration_total`, missed: `vmalert_iteration_missed_total`,
}

// progress prints one line: how far the run is and how Prometheus is doing.
func progress(q *querier, name string, start float64) error {
	slow, last := "", 0.0
	for _, s := range q.vector(`topk(1, prometheus_rule_group_last_duration_seconds)`) {
		slow, last = string(s.Metric["rule_group"]), float64(s.Value)
		slow = slow[strings.LastIndex(slow, ";")+1:]
	}
	if name != "" {
		fmt.Printf("%s: ", name)
	}
	fmt.Printf("%5.0f s: targets up %.0f/%.0f, head series %s, RSS %s, CPU %.2f cores (fleetsim %.2f), slowest group %s %s, missed iterations %.0f, scrape max %s\n",
		float64(q.end.Unix())-start,
		q.scalar(`sum(up{job="diskcanary"})`), q.scalar(`count(up{job="diskcanary"})`),
		count(q.scalar(`prometheus_tsdb_head_series{job="prometheus"}`)), mib(q.scalar(`process_resident_memory_bytes{job="prometheus"}`)),
		q.scalar(`rate(process_cpu_seconds_total{job="prometheus"}[2m])`), q.scalar(`rate(process_cpu_seconds_total{job="fleetsim"}[2m])`),
		slow, dur(last), q.scalar(`sum(prometheus_rule_group_iterations_missed_total)`),
		dur(q.scalar(`max(scrape_duration_seconds{job="diskcanary"})`)))
	return q.err
}

// vmalertProgress is progress for the global layer: VictoriaMetrics'
// active series, both processes' memory and CPU, vmalert's slowest group.
func vmalertProgress(q *querier, name string, start float64) error {
	slow, last := "", 0.0
	for _, s := range q.vector(`topk(1, ` + vmalertGroups.max + `)`) {
		slow, last = string(s.Metric["group"]), float64(s.Value)
	}
	fmt.Printf("%s: %5.0f s: active series %s, RSS %s, CPU %.2f cores, slowest group %s %s, missed iterations %.0f\n",
		name, float64(q.end.Unix())-start,
		count(q.scalar(`vm_cache_entries{job="victoria-metrics", type="storage/hour_metric_ids"}`)),
		mib(q.scalar(`sum(process_resident_memory_bytes{job=~"victoria-metrics|vmalert"})`)),
		q.scalar(`sum(rate(process_cpu_seconds_total{job=~"victoria-metrics|vmalert"}[2m]))`),
		slow, dur(last), q.scalar(`sum(vmalert_iteration_missed_total)`))
	return q.err
}

// querier runs queries at one end time and keeps the first error.
type querier struct {
	api v1.API
	ctx context.Context
	end time.Time
	err error
}

func (q *querier) vector(expr string) model.Vector {
	ctx, cancel := context.WithTimeout(q.ctx, 2*time.Minute)
	defer cancel()
	v, _, _, err := q.api.Query(ctx, expr, q.end)
	if err != nil {
		q.fail(expr, err)
		return nil
	}
	vec, _ := v.(model.Vector)
	return vec
}

// scalar: the query's single value, 0 when it returns nothing (count() of
// no series).
func (q *querier) scalar(expr string) float64 {
	v := q.vector(expr)
	if len(v) == 0 {
		return 0
	}
	return float64(v[0].Value)
}

func (q *querier) matrix(expr string, from time.Time) model.Matrix {
	ctx, cancel := context.WithTimeout(q.ctx, 2*time.Minute)
	defer cancel()
	v, _, _, err := q.api.QueryRange(ctx, expr, v1.Range{Start: from, End: q.end, Step: 15 * time.Second})
	if err != nil {
		q.fail(expr, err)
		return nil
	}
	m, _ := v.(model.Matrix)
	return m
}

func (q *querier) fail(expr string, err error) {
	if q.err == nil {
		q.err = fmt.Errorf("report: %s: %w", expr, err)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
