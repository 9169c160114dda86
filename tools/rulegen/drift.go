package rulegen

import (
	"fmt"
	"slices"
	"strings"
)

// Drift: a probe target's p99 against its cohort's median (the targets on
// the same kind of disk, by the user's cohort label or the disk model) and
// against the same hour last week. The cohort recording rules, the drift
// alerts and their promtool cases.

func cohortTargetRule(op string) string {
	return fmt.Sprintf("target_cohort:diskcanary_%s_duration_seconds:p99_15m", op)
}

func cohortMedianRule(op string) string {
	return fmt.Sprintf("cohort:diskcanary_%s_duration_seconds:p99_15m_median", op)
}

func cohortMembersRule(op string) string {
	return fmt.Sprintf("cohort:diskcanary_%s_duration_seconds:p99_15m_members", op)
}

const (
	ruleTargetBusy  = "target:diskcanary_disk_utilization:ratio_15m"
	ruleCohortBusy  = "cohort:diskcanary_disk_utilization:ratio_15m_median"
	ruleCohortInfo  = "target:diskcanary_cohort:info"
	ruleDiskModel   = "disk:diskcanary_disk_model:info"
	ruleDeviceModel = "device:diskcanary_disk_model:info"
	cohortGrouping  = "cohort, probe"
)

// driftOps are the probe ops the drift alerts watch: the write() lands
// in the page cache; fdatasync is the disk.
var driftOps = []string{"fdatasync", "read"}

// cohortTargetRecording is each target's side of the cohort rules, from its
// own node's series: its cohort and how busy its disk was. A per-cluster
// Prometheus records it; cohortRecording, across clusters, reads it.
func cohortTargetRecording(p Params) Group {
	t := p.target()
	c := p.CohortLabel
	g := Group{Name: "diskcanary.cohort.target", Interval: interval(p.Interval15m)}
	// A disk's model: diskstats' diskcanary_disk_info, else SMART's.
	g.Rules = append(g.Rules, Rule{
		Record: ruleDiskModel,
		Expr: fmt.Sprintf(`max by (%[1]s, disk, model) (label_replace(diskcanary_disk_info{model!=""}, "disk", "$1", "device", "(.+)"))
or on (%[1]s, disk)
max by (%[1]s, disk, model) (label_replace(diskcanary_smart_device_info{model!=""}, "disk", "$1", "device", "(.+)"))`, p.instanceLabels()),
	})
	// A probe's device → the physical disk(s) under it → their model. A
	// whole disk is its own parent; a device over disks of several models
	// (dm/md over mixed disks) has no model cohort.
	g.Rules = append(g.Rules, Rule{
		Record: ruleDeviceModel,
		Expr: fmt.Sprintf(`max by (%[1]s, device, model) (
  (
    max by (%[1]s, device, disk) (diskcanary_disk_parent_info)
    or
    max by (%[1]s, device, disk) (label_replace(%[2]s, "device", "$1", "disk", "(.+)"))
  )
  * on (%[1]s, disk) group_left (model)
  %[2]s
)
and on (%[1]s, device)
(count by (%[1]s, device) (max by (%[1]s, device, model) (
  (
    max by (%[1]s, device, disk) (diskcanary_disk_parent_info)
    or
    max by (%[1]s, device, disk) (label_replace(%[2]s, "device", "$1", "disk", "(.+)"))
  )
  * on (%[1]s, disk) group_left (model)
  %[2]s
)) == 1)`, p.instanceLabels(), ruleDiskModel),
	})
	// The cohort of a target: the user's label if the scrape target has
	// one, else "model:<disk model>".
	g.Rules = append(g.Rules, Rule{
		Record: ruleCohortInfo,
		Expr: fmt.Sprintf(`max by (%[1]s, cohort) (label_replace(diskcanary_probe_target_info{%[2]s!=""}, "cohort", "$1", %[3]q, "(.+)"))
or on (%[1]s)
max by (%[1]s, cohort) (
  label_replace(
    diskcanary_probe_target_info{%[2]s=""}
    * on (%[4]s, device) group_left (model)
    %[5]s,
    "cohort", "model:$1", "model", "(.+)"
  )
)`, t, c, c, p.instanceLabels(), ruleDeviceModel),
	})
	// How busy each target's disk was over the cohort window (the
	// cohort's median is cohortRecording's): a busy healthy disk has a higher p99 than its idle
	// peers (Perseus, FAST '23), so fleet drift leaves out a target whose
	// disk is much busier than its cohort's.
	g.Rules = append(g.Rules,
		Rule{
			Record: ruleTargetBusy,
			Expr: fmt.Sprintf(`max by (%[1]s) (
  max by (%[1]s) (diskcanary_probe_target_info)
  * on (%[2]s, device) group_left ()
  %[3]s
)`, t, p.instanceLabels(), p.deviceUtilization("15m")),
		})
	return g
}

// cohortRecording compares targets across the fleet: each cohort's median
// p99 and busy ratio. It reads only recorded series of
// cohortTargetRecording and probeRecording, so a global ruler can run it
// over the per-cluster Prometheus servers' remote-written results.
func cohortRecording(p Params) Group {
	t := p.target()
	g := Group{Name: "diskcanary.cohort.recording", Interval: interval(p.Interval15m)}
	g.Rules = append(g.Rules, Rule{
		Record: ruleCohortBusy,
		Expr:   fmt.Sprintf("quantile by (%s) (0.5, %s * on (%s) group_left (cohort) %s)", cohortGrouping, ruleTargetBusy, t, ruleCohortInfo),
	})
	for _, op := range driftOps {
		g.Rules = append(g.Rules,
			Rule{
				Record: cohortTargetRule(op),
				Expr: fmt.Sprintf(`(%s and %s >= %d)
* on (%s) group_left (cohort)
%s`, quantileRule(op, "p99", "15m"), samplesRule(op, "15m"), p.MinSamples, t, ruleCohortInfo),
			},
			Rule{
				Record: cohortMedianRule(op),
				Expr:   fmt.Sprintf("quantile by (%s) (0.5, %s)", cohortGrouping, cohortTargetRule(op)),
			},
			Rule{
				Record: cohortMembersRule(op),
				Expr:   fmt.Sprintf("count by (%s) (%s)", cohortGrouping, cohortTargetRule(op)),
			})
	}
	return g
}

// deviceUtilization is how busy each device was over window w (iostat's
// %util, 0..1) by (job, instance, device): its own, else the busiest disk
// under it (a partition's or dm device's stats may be off;
// diskcanary_disk_parent_info joins).
func (p Params) deviceUtilization(w string) string {
	return fmt.Sprintf(`(
    rate(diskcanary_disk_io_time_seconds_total[%[1]s])
    or on (%[2]s, device)
    max by (%[2]s, device) (
      max by (%[2]s, device, disk) (diskcanary_disk_parent_info)
      * on (%[2]s, disk) group_left ()
      label_replace(rate(diskcanary_disk_io_time_seconds_total[%[1]s]), "disk", "$1", "device", "(.+)")
    )
  )`, w, p.instanceLabels())
}

func driftAlerts(p Params) Group {
	g := Group{Name: "diskcanary.drift.alerts"}
	t := p.target()
	for _, op := range latencyOps {
		if !slices.Contains(driftOps, op.op) {
			continue
		}
		title := strings.ToUpper(op.op[:1]) + op.op[1:]
		g.Rules = append(g.Rules, p.alert("Diskcanary"+title+"FleetDrift", "warning",
			fmt.Sprintf(`%[1]s
> on (%[2]s) group_left ()
(
  %[3]s * %[4]s
  and on (%[2]s)
  %[5]s >= %[6]d
)
and
%[1]s > %[7]s
unless on (%[8]s)
(
  (
    (%[9]s * on (%[8]s) group_left (cohort) %[13]s)
    > on (%[2]s) group_left ()
    (%[11]s * %[12]s)
  )
  and on (%[8]s)
  %[9]s >= %[10]s
)`, cohortTargetRule(op.op), cohortGrouping, num(p.DriftFactor), cohortMedianRule(op.op), cohortMembersRule(op.op), p.DriftMinCohort, seconds(p.DriftFloor),
				t, ruleTargetBusy, num(p.DriftBusyUtilization), num(p.DriftBusyFactor), ruleCohortBusy, ruleCohortInfo),
			p.DriftFor,
			op.title+" p99 far above its cohort",
			fmt.Sprintf("The 15-minute %s p99 of %s is "+valueDuration+", more than %g× the median of its cohort {{ $labels.cohort }} and above %s, while its disk is not much busier than theirs (a disk busier than %g %% and %g× its cohort's median is left out: load, not a fault, raises a p99).", op.title, onTarget, p.DriftFactor, human(p.DriftFloor), p.DriftBusyUtilization*100, p.DriftBusyFactor)))
	}
	return p.linkDashboard(g, dashboardFleet, "job", "cohort") // the target among its peers
}

// selfDriftAlerts compare a target with itself a week ago: per node, so
// the per-cluster layer's.
func selfDriftAlerts(p Params) Group {
	g := Group{Name: "diskcanary.selfdrift.alerts"}
	t := p.target()
	for _, op := range latencyOps {
		if !slices.Contains(driftOps, op.op) {
			continue
		}
		title := strings.ToUpper(op.op[:1]) + op.op[1:]
		g.Rules = append(g.Rules, p.alert("Diskcanary"+title+"SelfDrift", "warning",
			fmt.Sprintf(`%[1]s > %[2]s * %[3]s
and
%[1]s > %[4]s
and on (%[7]s)
%[5]s >= %[8]d
and on (%[7]s)
%[6]s >= %[8]d`, quantileRule(op.op, "p99", "1h"), num(p.SelfDriftFactor), quantileRule(op.op, "p99", "1h_offset1w"), seconds(p.SelfDriftFloor),
				samplesRule(op.op, "1h"), samplesRule(op.op, "1h_offset1w"), t, p.MinSamples),
			p.SelfDriftFor,
			op.title+" p99 far above the same hour last week",
			fmt.Sprintf("The 1-hour %s p99 of %s is "+valueDuration+", more than %g× the same hour last week and above %s.", op.title, onTarget, p.SelfDriftFactor, human(p.SelfDriftFloor))))
	}
	return p.linkDashboard(g, dashboardNode, "job", "instance", "probe")
}

// driftTarget is one member of a test cohort.
func driftTarget(op string, i int, extra string) string {
	probe := "wal"
	if op == "read" {
		probe = "randread"
	}
	return fmt.Sprintf(`job="diskcanary", instance="n%d:9742", probe="%s", path="/var/lib/etcd-canary", device="sda1"%s`, i, probe, extra)
}

func probeOf(op string) string {
	if op == "read" {
		return "randread"
	}
	return "wal"
}

func driftCases() []alertCase {
	var cases []alertCase
	for _, op := range []string{"fdatasync", "read"} {
		metric := "diskcanary_" + op + "_duration_seconds"
		alert := "Diskcanary" + strings.ToUpper(op[:1]) + op[1:] + "FleetDrift"
		// 200 samples a minute each. Fast: all in (0.5 ms, 1 ms] →
		// p99 0.995 ms. Slow: all in (5 ms, 10 ms] → p99 9.95 ms = 10× the
		// median. Under the floor: 4 in 200 above 1 ms → p99 1.75 ms.
		fast := []bucket{{"0.0005", 0}, {"0.001", 200}, {"0.0025", 200}, {"0.005", 200}, {"0.01", 200}}
		slow := []bucket{{"0.0005", 0}, {"0.001", 0}, {"0.0025", 0}, {"0.005", 0}, {"0.01", 200}}
		fastLow := []bucket{{"0.00025", 0}, {"0.0005", 200}, {"0.001", 200}, {"0.0025", 200}}
		lowSlow := []bucket{{"0.00025", 0}, {"0.0005", 0}, {"0.001", 196}, {"0.0025", 200}}
		sparseSlow := []bucket{{"0.0005", 0}, {"0.001", 0}, {"0.0025", 0}, {"0.005", 0}, {"0.01", 50}}
		info := func(i int, cohort string) []series {
			lbl := driftTarget(op, i, cohort)
			kind := "wal"
			if op == "read" {
				kind = "randread"
			}
			return s(fmt.Sprintf(`diskcanary_probe_target_info{%s, kind="%s", layout="append", fstype="ext4", mountpoint="/var/lib/etcd-canary"}`, lbl, kind), "1x80")
		}
		cohort := func(members int, slowShape, fastShape []bucket, label string) []series {
			var in []series
			for i := 1; i <= members; i++ {
				shape := fastShape
				if i == members {
					shape = slowShape
				}
				in = append(in, hist(metric, driftTarget(op, i, ""), 80, shape...)...)
				in = append(in, info(i, label)...)
			}
			return in
		}
		user := `, cohort="m6i.large-gp3"`
		slowUser := driftTarget(op, 5, "") + `, cohort="m6i.large-gp3"`
		// A model cohort: no user label; sda1 is a partition of sda.
		var model []series
		for i := 1; i <= 5; i++ {
			shape := fast
			if i == 5 {
				shape = slow
			}
			inst := fmt.Sprintf(`job="diskcanary", instance="n%d:9742"`, i)
			model = append(model, hist(metric, driftTarget(op, i, ""), 80, shape...)...)
			model = append(model, info(i, "")...)
			model = append(model, s(`diskcanary_disk_parent_info{`+inst+`, device="sda1", disk="sda"}`, "1x80")...)
			model = append(model, s(`diskcanary_disk_info{`+inst+`, device="sda", model="ACME SSD 960", serial="S`+fmt.Sprint(i)+`", wwn="", rotational="0"}`, "1x80")...)
		}
		slowModel := driftTarget(op, 5, "") + `, cohort="model:ACME SSD 960"`
		// Disk load: diskcanary_disk_io_time_seconds_total rising by
		// 60 × util per minute on each member's sda1.
		loaded := func(slowUtil, fastUtil float64) []series {
			in := cohort(5, slow, fast, user)
			for i := 1; i <= 5; i++ {
				u := fastUtil
				if i == 5 {
					u = slowUtil
				}
				in = append(in, s(fmt.Sprintf(`diskcanary_disk_io_time_seconds_total{job="diskcanary", instance="n%d:9742", device="sda1"}`, i), fmt.Sprintf("0+%gx80", 60*u))...)
			}
			return in
		}
		cases = append(cases,
			alertCase{name: op + ": 10× the median on a disk 80 % busy, its cohort 10 %: load, silent", input: loaded(0.8, 0.1), at: "60m", alert: alert,
				expr: []exprTest{
					near(ruleTargetBusy+`{instance="n5:9742"}`, "60m", driftTarget(op, 5, ""), 0.8),
					near(ruleCohortBusy, "60m", `cohort="m6i.large-gp3", probe="`+probeOf(op)+`"`, 0.1),
				}},
			alertCase{name: op + ": 10× the median on an idle disk (2 %, cohort 10 %)", input: loaded(0.02, 0.1), at: "60m", alert: alert, values: []string{"9.95ms"}, fire: []string{slowUser}},
			alertCase{name: op + ": 10× the median, 70 % busy in a cohort at 60 %: not busier than its peers", input: loaded(0.7, 0.6), at: "60m", alert: alert, values: []string{"9.95ms"}, fire: []string{slowUser}},
			alertCase{name: op + ": 10× the median, 40 % busy against 10 %: under the 50 % floor", input: loaded(0.4, 0.1), at: "60m", alert: alert, values: []string{"9.95ms"}, fire: []string{slowUser}},
			alertCase{name: op + ": one of 5 at 10× the cohort median (user cohort)", input: cohort(5, slow, fast, user), at: "60m", alert: alert, values: []string{"9.95ms"}, fire: []string{slowUser},
				expr: []exprTest{
					near(cohortMedianRule(op), "60m", `cohort="m6i.large-gp3", probe="`+probeOf(op)+`"`, 0.000995),
					{Expr: cohortMembersRule(op), EvalTime: "60m", ExpSamples: []expSample{{cohortMembersRule(op) + `{cohort="m6i.large-gp3", probe="` + probeOf(op) + `"}`, 5}}},
					{Expr: ruleCohortInfo + `{instance="n5:9742"}`, EvalTime: "60m", ExpSamples: []expSample{{ruleCohortInfo + "{" + slowUser + "}", 1}}},
				}},
			alertCase{name: op + ": one of 5 at 10× the cohort median (disk model cohort)", input: model, at: "60m", alert: alert, values: []string{"9.95ms"}, fire: []string{slowModel}},
			alertCase{name: op + ": 10× but only 4 in the cohort: silent", input: cohort(4, slow, fast, user), at: "60m", alert: alert},
			alertCase{name: op + ": 3.5× the median but under the 2 ms floor: silent", input: cohort(5, lowSlow, fastLow, user), at: "60m", alert: alert},
			alertCase{name: op + ": 10× on 750 samples per 15 m: silent", input: cohort(5, sparseSlow, fast, user), at: "60m", alert: alert},
			alertCase{name: op + ": 10× for 20 m only: pending", input: cohort(5, slow, fast, user), at: "25m", alert: alert},
		)
	}
	return cases
}

// selfDriftCases are op's (fdatasync or read) self-drift cases: one
// promtool test, three nodes. promtool evaluates every rule at every step
// from zero to the last eval_time, so a week of history costs the same for
// one node as for three; a test per node tripled it.
func selfDriftCases(op string) []alertCase {
	// 10-minute steps; a week is 1008 steps. Evaluate at 1w 2h50m.
	const week, after = 1008, 18
	metric := "diskcanary_" + op + "_duration_seconds"
	alert := "Diskcanary" + strings.ToUpper(op[:1]) + op[1:] + "SelfDrift"
	// Node i's every le gets "per" samples per step for the week, then
	// "perAfter".
	shape := func(i int, before, after2 []bucket) []series {
		lbl := driftTarget(op, i, "")
		var out []series
		les := map[string][2]int{}
		var order []string
		for _, b := range before {
			les[b.le] = [2]int{b.cum, 0}
			order = append(order, b.le)
		}
		for _, b := range after2 {
			v := les[b.le]
			v[1] = b.cum
			les[b.le] = v
		}
		row := func(name string, v [2]int) series {
			return series{name, fmt.Sprintf("0+%dx%d %d+%dx%d", v[0], week, v[0]*week+v[1], v[1], after)}
		}
		for _, le := range order {
			out = append(out, row(fmt.Sprintf(`%s_bucket{%s, le="%s"}`, metric, lbl, le), les[le]))
		}
		last := les[order[len(order)-1]]
		out = append(out, row(fmt.Sprintf(`%s_bucket{%s, le="+Inf"}`, metric, lbl), last), row(fmt.Sprintf(`%s_count{%s}`, metric, lbl), last))
		return out
	}
	les := []string{"0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01"}
	b := func(counts ...int) []bucket {
		var out []bucket
		for i, c := range counts {
			out = append(out, bucket{les[i], c})
		}
		return out
	}
	var input []series
	// n1: last week p99 0.995 ms; now 9.95 ms: fires.
	input = append(input, shape(1, b(0, 0, 2000, 2000, 2000, 2000), b(0, 0, 0, 0, 0, 2000))...)
	// n2: 3.5× last week but under the 2 ms floor: silent.
	input = append(input, shape(2, b(0, 2000, 2000, 2000, 2000, 2000), b(0, 0, 1960, 2000, 2000, 2000))...)
	// n3: 10× but only 600 samples an hour last week: silent.
	input = append(input, shape(3, b(0, 0, 100, 100, 100, 100), b(0, 0, 0, 0, 0, 2000))...)
	return []alertCase{
		{name: op + ": 10× last week's p99 fires; 3.5× under the 2 ms floor and 10× on 600 samples an hour last week do not",
			interv: "10m", at: "170h50m", alert: alert, values: []string{"9.95ms"}, fire: []string{driftTarget(op, 1, "")},
			// A steady week fires nothing.
			silentAt: []string{"167h"}, input: input},
	}
}
