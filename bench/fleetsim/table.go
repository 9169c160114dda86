package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// budgetShare is "well within the interval": the slowest rule group may take
// a quarter of the evaluation interval, the rest is headroom for query load,
// head compaction and GC pauses on the same CPUs.
const budgetShare = 0.25

func tableMain(args []string, w io.Writer) error {
	if len(args) == 0 {
		return errors.New("table: result files expected")
	}
	var rs []result
	for _, f := range args {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r result
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("table: %s: %w", f, err)
		}
		rs = append(rs, r)
	}
	// Stable: a sharded run's engines stay in the order given.
	slices.SortStableFunc(rs, func(a, b result) int { return a.Nodes - b.Nodes })
	if rs[0].Engine != "" {
		writeShardedTables(w, rs)
		return nil
	}
	writeTables(w, rs)
	return nil
}

func writeTables(w io.Writer, rs []result) {
	r0 := rs[0]
	fmt.Fprintf(w, "Prometheus %s, scrape interval %s (timeout 10 s), evaluation interval %s, the shipped rules; "+
		"medians and maxima over the last %s of each run.\n\n",
		r0.Prometheus, secs(r0.ScrapeInterval), secs(r0.EvalInterval), secs(r0.Steady))
	fmt.Fprintln(w, "| nodes | targets up | samples/scrape | head series | per node | rule series | RSS | per node | Prometheus CPU | slowest group, median / max | all groups, sum of medians | missed iterations | scrape p50 / p99 / max | 1h windows | run |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---:|")
	for _, r := range rs {
		slow := slowest(r)
		sum, missed := 0.0, 0.0
		for _, g := range r.Groups {
			sum += g.Median
			missed += g.Missed
		}
		up := fmt.Sprintf("%.0f/%.0f", r.TargetsUp, r.Targets)
		if r.EtcdTargets > 0 {
			up += fmt.Sprintf(" (+%.0f etcd)", r.EtcdTargets)
		}
		fmt.Fprintf(w, "| %d | %s | %.0f | %s | %.0f | %s | %s | %s | %.2f cores | %s %s / %s | %s | %.0f | %s / %s / %s | %.0f %% | %s |\n",
			r.Nodes, up, r.Samples, count(r.HeadSeries), r.HeadSeries/float64(r.Nodes), count(r.RuleSeries),
			mib(r.RSS), size(r.RSS/float64(r.Nodes)), r.CPU,
			slow.Name, dur(slow.Median), dur(slow.Max), dur(sum), missed,
			dur(r.ScrapeP50), dur(r.ScrapeP99), dur(r.ScrapeMax),
			100*math.Min(1, (r.End-r.Start)/3600), secs(r.Wall))
	}

	fmt.Fprintln(w)
	fmt.Fprint(w, "| rule group | rules | interval |")
	for _, r := range rs {
		fmt.Fprintf(w, " %d nodes: median / max |", r.Nodes)
	}
	fmt.Fprint(w, "\n|---|---:|---:|")
	for range rs {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	last := rs[len(rs)-1]
	for _, g := range last.Groups {
		fmt.Fprintf(w, "| %s | %d | %s |", g.Name, g.Rules, secs(g.every(last)))
		for _, r := range rs {
			for _, h := range r.Groups {
				if h.Name == g.Name {
					fmt.Fprintf(w, " %s / %s |", dur(h.Median), dur(h.Max))
				}
			}
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintf(w, "\nSlowest rules at %d nodes (last evaluation):\n\n", last.Nodes)
	for _, t := range last.TopRules[:min(5, len(last.TopRules))] {
		fmt.Fprintf(w, "- %s `%s`: %s\n", t.Group, t.Name, dur(t.Seconds))
	}
	if len(last.Alerts) > 0 {
		fmt.Fprintf(w, "\nAlerts at the end of the %d-node run: %s.\n", last.Nodes, alertsSaid(last.Alerts))
	}
	for _, r := range rs {
		if r.EvalFailures > 0 || r.TargetsUp < r.Targets {
			fmt.Fprintf(w, "\nWARNING: %d nodes: %.0f rule evaluation failures, %.0f of %.0f targets up.\n", r.Nodes, r.EvalFailures, r.TargetsUp, r.Targets)
		}
	}

	fmt.Fprintln(w)
	writeCapacity(w, rs)
	fmt.Fprintln(w)
	writeVerdicts(w, rs)
}

// writeVerdicts judges each run by the fleet target: every group's worst
// evaluation within budgetShare of its own interval, and no missed
// iteration. One line each, "ok: " or "FAIL: ", which the bench runner
// reads for the scenario's verdict.
func writeVerdicts(w io.Writer, rs []result) {
	for _, r := range rs {
		slow := slowest(r)
		share := slow.Max / slow.every(r)
		verdict := "ok"
		if share > budgetShare {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "%s: %s: slowest group %s at most %s of its %s interval (%.0f %%; ≤ %.0f %%)\n",
			verdict, r.label(), slow.Name, dur(slow.Max), secs(slow.every(r)), 100*share, 100*budgetShare)
		missed := 0.0
		for _, g := range r.Groups {
			missed += g.Missed
		}
		verdict = "ok"
		if missed > 0 {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "%s: %s: %.0f missed iterations (0)\n", verdict, r.label(), missed)
	}
}

// label names a run in the verdicts: its fleet size, and in a sharded run
// the engine.
func (r result) label() string {
	if r.Name != "" {
		return fmt.Sprintf("%d nodes, %s", r.Nodes, r.Name)
	}
	return fmt.Sprintf("%d nodes", r.Nodes)
}

// writeShardedTables: one table per fleet size of a sharded run, a row per
// engine (each cluster shard's Prometheus, then the global layer) and a row
// summing them, whose series and memory per node are the whole fleet's
// cost; each engine's groups beside each other; the same verdicts as one
// Prometheus, per engine.
func writeShardedTables(w io.Writer, rs []result) {
	for i := 0; i < len(rs); {
		j := i
		for j < len(rs) && rs[j].Nodes == rs[i].Nodes {
			j++
		}
		writeShardedRun(w, rs[i:j])
		fmt.Fprintln(w)
		i = j
	}
	writeVerdicts(w, rs)
}

func writeShardedRun(w io.Writer, set []result) {
	n := float64(set[0].Nodes)
	var versions []string
	for _, r := range set {
		if v := r.Engine + " " + r.Prometheus; !slices.Contains(versions, v) {
			versions = append(versions, v)
		}
	}
	fmt.Fprintf(w, "%d nodes sharded by cluster: %s; scrape interval %s (timeout 10 s), evaluation interval %s; "+
		"medians and maxima over the last %s of the run.\n\n",
		set[0].Nodes, strings.Join(versions, ", "), secs(set[0].ScrapeInterval), secs(set[0].EvalInterval), secs(set[0].Steady))
	fmt.Fprintln(w, "| engine | targets up | head series | rule series | RSS | CPU | slowest group, median / max | all groups, sum of medians | missed iterations | scrape p50 / p99 / max |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---|---:|---:|---|")
	var series, rss, cpu, missedAll float64
	for _, r := range set {
		slow := slowest(r)
		sum, missed := 0.0, 0.0
		for _, g := range r.Groups {
			sum += g.Median
			missed += g.Missed
		}
		up, scrape := "", ""
		if r.Engine == "prometheus" {
			up = fmt.Sprintf("%.0f/%.0f", r.TargetsUp, r.Targets)
			if r.EtcdTargets > 0 {
				up += fmt.Sprintf(" (+%.0f etcd)", r.EtcdTargets)
			}
			scrape = fmt.Sprintf("%s / %s / %s", dur(r.ScrapeP50), dur(r.ScrapeP99), dur(r.ScrapeMax))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.2f cores | %s %s / %s | %s | %.0f | %s |\n",
			r.Name, up, count(r.HeadSeries), count(r.RuleSeries), mib(r.RSS), r.CPU,
			slow.Name, dur(slow.Median), dur(slow.Max), dur(sum), missed, scrape)
		series, rss, cpu, missedAll = series+r.HeadSeries, rss+r.RSS, cpu+r.CPU, missedAll+missed
	}
	fmt.Fprintf(w, "| all engines | | %s | | %s | %.2f cores | | | %.0f | |\n", count(series), mib(rss), cpu, missedAll)
	fmt.Fprintf(w, "\nPer node, all engines: %.0f series, %s of RSS.\n\n", series/n, size(rss/n))

	fmt.Fprint(w, "| rule group | interval |")
	for _, r := range set {
		fmt.Fprintf(w, " %s: median / max |", r.Name)
	}
	fmt.Fprint(w, "\n|---|---:|")
	for range set {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	var names []string
	every := map[string]float64{}
	for _, r := range set {
		for _, g := range r.Groups {
			if !slices.Contains(names, g.Name) {
				names = append(names, g.Name)
				every[g.Name] = g.every(r)
			}
		}
	}
	for _, name := range names {
		fmt.Fprintf(w, "| %s | %s |", name, secs(every[name]))
		for _, r := range set {
			cell := ""
			for _, g := range r.Groups {
				if g.Name == name {
					cell = dur(g.Median) + " / " + dur(g.Max)
				}
			}
			fmt.Fprintf(w, " %s |", cell)
		}
		fmt.Fprintln(w)
	}
	for _, r := range set {
		if len(r.Alerts) > 0 {
			fmt.Fprintf(w, "\nAlerts at the end, %s: %s.\n", r.Name, alertsSaid(r.Alerts))
		}
	}
	for _, r := range set {
		if r.EvalFailures > 0 || r.TargetsUp < r.Targets {
			fmt.Fprintf(w, "\nWARNING: %s: %.0f rule evaluation failures, %.0f of %.0f targets up.\n", r.label(), r.EvalFailures, r.TargetsUp, r.Targets)
		}
	}
}

// writeCapacity fits the slowest group's worst evaluation and RSS to a + b×N
// and says where the budget runs out.
func writeCapacity(w io.Writer, rs []result) {
	var ns, evals, rss []float64
	for _, r := range rs {
		ns = append(ns, float64(r.Nodes))
		slow := slowest(r)
		evals = append(evals, slow.Max*r.EvalInterval/slow.every(r))
		rss = append(rss, r.RSS)
	}
	interval := rs[0].EvalInterval
	ea, eb := fit(ns, evals)
	ra, rb := fit(ns, rss)
	fit := "one N: through the origin, so fixed costs count as per-node costs and the N below is a lower bound"
	if len(rs) > 1 {
		fit = fmt.Sprintf("linear fit over %s nodes", joinNodes(rs))
	}
	fmt.Fprintf(w, "Capacity (%s): the slowest group's worst evaluation (scaled to the global interval where its own is longer) ≈ %s + %s × N; RSS ≈ %s + %s × N.\n",
		fit, dur(ea), dur(eb), mib(ra), size(rb))
	if eb <= 0 {
		fmt.Fprintln(w, "Evaluation time does not grow with N in these runs: run a larger N.")
		return
	}
	budget := budgetShare * interval
	nb, nf := (budget-ea)/eb, (interval-ea)/eb
	fmt.Fprintf(w, "One Prometheus with a %s evaluation interval keeps the slowest group within %.0f %% of it (%s) up to N ≈ %s nodes "+
		"(RSS ≈ %s); the group would take the whole interval, and miss iterations, at N ≈ %s.\n",
		secs(interval), 100*budgetShare, dur(budget), count(nb), mib(ra+rb*nb), count(nf))
	if nb > ns[len(ns)-1]*1.5 {
		fmt.Fprintln(w, "(An extrapolation beyond the largest N measured: verify with a run at that N.)")
	}
}

// slowest is the group whose worst evaluation takes the largest share of
// its own interval.
func slowest(r result) groupStat {
	var s groupStat
	for _, g := range r.Groups {
		if s.Name == "" || g.Max/g.every(r) > s.Max/s.every(r) {
			s = g
		}
	}
	return s
}

// every is the group's evaluation interval: its own, else the global one.
func (g groupStat) every(r result) float64 {
	if g.Interval > 0 {
		return g.Interval
	}
	return r.EvalInterval
}

// fit: least squares a + b×x; one point: through the origin.
func fit(x, y []float64) (a, b float64) {
	if len(x) == 1 {
		return 0, y[0] / x[0]
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= float64(len(x))
	my /= float64(len(x))
	var sxy, sxx float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
	}
	if sxx == 0 {
		return 0, my / mx
	}
	b = sxy / sxx
	return my - b*mx, b
}

func joinNodes(rs []result) string {
	var s []string
	for _, r := range rs {
		s = append(s, fmt.Sprint(r.Nodes))
	}
	return strings.Join(s, ", ")
}

func dur(s float64) string {
	d := time.Duration(s * 1e9)
	switch {
	case s < 0:
		return "-" + dur(-s)
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", s*1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", s*1e3)
	}
	return fmt.Sprintf("%.2f s", s)
}

func secs(s float64) string {
	d := time.Duration(s) * time.Second
	if d >= time.Minute && d%time.Minute == 0 || d >= 10*time.Minute {
		return fmt.Sprintf("%.0f min", d.Minutes())
	}
	return fmt.Sprintf("%.0f s", s)
}

func mib(b float64) string { return fmt.Sprintf("%.0f MiB", b/(1<<20)) }

func size(b float64) string {
	if b >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	}
	return fmt.Sprintf("%.0f KiB", b/(1<<10))
}

func count(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// alertsSaid is the alerts by name and state with their counts, sorted:
// "DiskcanaryReadSlow pending 23, …".
func alertsSaid(alerts map[string]float64) string {
	var as []string
	for k, v := range alerts {
		as = append(as, fmt.Sprintf("%s %.0f", k, v))
	}
	slices.Sort(as)
	return strings.Join(as, ", ")
}
