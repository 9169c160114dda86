package rulegen

import (
	"fmt"

	"github.com/diskcanary/diskcanary/internal/config"
)

// The capacity group: a capacity probe's IOPS at its p99 bound (one
// opt-in sweep a day) against the same figure a week earlier, so a fleet
// sees a disk's headroom shrink before its latency alerts fire.

// ruleCapacityWeek is the ratio. The offset reads one sample a week back,
// not a week of samples; a series that was 0 then (even the first step
// broke the bound) has no ratio.
const ruleCapacityWeek = "target:diskcanary_capacity_iops:ratio_1w"

// capacityRecording is evaluated with the hour groups: the figure changes
// once a day.
func capacityRecording(p Params) Group {
	return Group{Name: "diskcanary.capacity.recording", Interval: interval(p.Interval1h), Rules: []Rule{{
		Record: ruleCapacityWeek,
		Expr:   "diskcanary_capacity_iops\n/\n(diskcanary_capacity_iops offset 1w > 0)",
	}}}
}

// capacityPanels is the fleet dashboard's capacity row: one panel per
// pattern, each target's ratio to a week earlier.
func (d *board) capacityPanels(sel func(...string) string) {
	d.row("Capacity: IOPS at the p99 bound against a week earlier (opt-in daily sweeps)")
	for _, pattern := range config.CapacityPatterns {
		d.add(d.timeseries(fmt.Sprintf("%s capacity ÷ a week earlier", pattern),
			fmt.Sprintf("Each %s capacity probe's IOPS at its p99 bound (diskcanary_capacity_iops, measured once a day) over the same figure a week earlier: under 100 %% the disk carries less load within the bound than it did, before any latency alert fires. Empty without capacity probes (kind: capacity, opt-in) or before their second week.", pattern),
			"percentunit",
			q(fmt.Sprintf(`%s%s`, ruleCapacityWeek, sel(fmt.Sprintf(`pattern="%s"`, pattern))), d.legend("{{instance}} {{probe}} {{device}}"))).Span(8).Height(8))
	}
	// A ratio is only as good as the sweep behind it: each probe's last
	// sweep, how long ago, and whether it failed or stopped part way.
	d.add(d.table("Capacity sweeps: the last one of each probe",
		"Each capacity probe's last sweep: how long ago it ended (diskcanary_capacity_last_run_timestamp_seconds), whether it measured (diskcanary_capacity_success: 0 is a sweep that could not run, the daemon's log says why) and whether it stopped before a step broke the bound (diskcanary_capacity_partial: the write budget, the time cap or a stop ended it, so its IOPS at the bound is a lower bound). Empty without capacity probes.",
		[]column{col("instance", "Node", ""), col("probe", "Probe", ""), col("Value #A", "Ended", "s"),
			col("Value #B", "Measured", "none").mapped(valueMap(mapped{"1", "yes", "green"}, mapped{"0", "NO", "red"})),
			col("Value #C", "Partial", "none").mapped(valueMap(mapped{"0", "no", "green"}, mapped{"1", "PARTIAL", "orange"})),
			hide("job"), hide(d.p.ClusterLabel)},
		q(fmt.Sprintf("time() - diskcanary_capacity_last_run_timestamp_seconds%s", sel()), ""),
		q(fmt.Sprintf("diskcanary_capacity_success%s", sel()), ""),
		q(fmt.Sprintf("diskcanary_capacity_partial%s", sel()), "")).
		DataLinks(d.nodeLink("On-call view of ${__data.fields.instance}", "job", "instance", "probe")).Span(24).Height(6))
}

// capacityCases: hourly inputs, a week and two hours of them. a held 1000
// IOPS a week ago and 800 now: 0.8; b was 0 a week ago (even the first
// step broke the bound): no ratio; c is steady: 1.
func capacityCases() []alertCase {
	const a = `job="diskcanary", instance="n1:9742", probe="cap", device="sda", pattern="randread", percentile="0.99", bound="0.01"`
	const b = `job="diskcanary", instance="n2:9742", probe="cap", device="sda", pattern="randread", percentile="0.99", bound="0.01"`
	const c = `job="diskcanary", instance="n3:9742", probe="cap", device="sda", pattern="wal", percentile="0.99", bound="0.01"`
	in := concat(
		s("diskcanary_capacity_iops{"+a+"}", "1000x168 800x2"),
		s("diskcanary_capacity_iops{"+b+"}", "0x168 500x2"),
		s("diskcanary_capacity_iops{"+c+"}", "300x170"),
	)
	return []alertCase{{name: "capacity against a week earlier", interv: "1h", input: in, expr: []exprTest{{Expr: ruleCapacityWeek, EvalTime: "170h",
		ExpSamples: []expSample{{ruleCapacityWeek + "{" + a + "}", 0.8}, {ruleCapacityWeek + "{" + c + "}", 1}}}}}}
}
