package rulegen

import (
	"fmt"
	"time"
)

// The probe groups: each probe target's latency quantiles and sample
// counts (the recording rules the other groups and the dashboards read),
// the alerts on a probe's latency and health, and their promtool cases.

// probeFastWindow is the shortest window of the recorded probe figures:
// the incident alerts' (and the etcd verdict's, when its window is the same).
const probeFastWindow = 5 * time.Minute

// latencyOp is one probe histogram.
type latencyOp struct {
	op     string // fdatasync, write, read
	metric string // diskcanary_fdatasync_duration_seconds
	title  string // for people: "fdatasync"
}

var latencyOps = []latencyOp{
	{"fdatasync", "diskcanary_fdatasync_duration_seconds", "fdatasync"},
	{"write", "diskcanary_write_duration_seconds", "write"},
	{"read", "diskcanary_read_duration_seconds", "O_DIRECT random read"},
}

// Recording rule names, one place. Level "target" = one probe target
// (TargetLabels), "device" = one block device of one instance, "cohort" =
// (cohort, probe) across the fleet.
func quantileRule(op string, q string, window string) string {
	return fmt.Sprintf("target:diskcanary_%s_duration_seconds:%s_%s", op, q, window)
}

func samplesRule(op, window string) string {
	return fmt.Sprintf("target:diskcanary_%s_duration_seconds:samples_%s", op, window)
}

// probeRecording: one group per window, so Prometheus evaluates them side
// by side, and only the figures an alert or another rule reads
// (TestEveryRecordingRuleIsRead). At 5 minutes that is the fdatasync p99
// and its sample count (the incident alerts, the etcd verdict): the p50s,
// the read p99 and the write() p99 over 5 minutes are the node
// dashboard's, which computes them from the raw buckets of the one node it
// shows, instead of every node's every evaluation (the fleet-scale bench).
// The 15-minute figures (probe15mRules) lead the attribution group, whose
// verdicts read them. The hour windows run every Interval1h: a quantile
// over raw buckets costs about the same at any window (Prometheus decodes
// each series' chunk from its start), so what they cost is how often.
func probeRecording(p Params) []Group {
	fastWindow := promDuration(probeFastWindow)
	fast := Group{Name: "diskcanary.probe.recording"}
	hour := Group{Name: "diskcanary.probe.recording.1h", Interval: interval(p.Interval1h)}
	week := Group{Name: "diskcanary.probe.recording.1h_offset1w", Interval: interval(p.Interval1h)}
	for _, op := range latencyOps {
		if op.op == "write" {
			continue
		}
		if op.op == "fdatasync" {
			fast.Rules = append(fast.Rules,
				Rule{Record: quantileRule(op.op, "p99", fastWindow), Expr: p.probeQuantile("0.99", op.metric, fastWindow)},
				Rule{Record: samplesRule(op.op, fastWindow), Expr: p.probeSamples(op.metric, fastWindow)})
		}
		hour.Rules = append(hour.Rules,
			Rule{Record: quantileRule(op.op, "p99", "1h"), Expr: p.probeQuantile("0.99", op.metric, "1h")},
			Rule{Record: samplesRule(op.op, "1h"), Expr: p.probeSamples(op.metric, "1h")})
		// The own baseline: the same hour last week, computed from the raw
		// buckets so it works the moment the rules are loaded.
		t := p.target()
		week.Rules = append(week.Rules,
			Rule{Record: quantileRule(op.op, "p99", "1h_offset1w"), Expr: fmt.Sprintf("histogram_quantile(0.99, sum by (%s, le) (rate(%s_bucket[1h] offset 1w)))", t, op.metric)},
			Rule{Record: samplesRule(op.op, "1h_offset1w"), Expr: fmt.Sprintf("sum by (%s) (increase(%s_count[1h] offset 1w))", t, op.metric)})
	}
	return []Group{fast, hour, week}
}

// probe15mRules are the probe targets' 15-minute p99s and sample counts:
// the warnings', the cohorts' and the attribution verdicts' input.
func probe15mRules(p Params) []Rule {
	var rules []Rule
	for _, op := range latencyOps {
		if op.op == "write" {
			continue
		}
		rules = append(rules,
			Rule{Record: quantileRule(op.op, "p99", "15m"), Expr: p.probeQuantile("0.99", op.metric, "15m")},
			Rule{Record: samplesRule(op.op, "15m"), Expr: p.probeSamples(op.metric, "15m")})
	}
	return rules
}

// probeQuantile is a probe target's quantile over window w, from its
// buckets' rates summed by target; probeSamples its sample count.
func (p Params) probeQuantile(q, metric, w string) string {
	return fmt.Sprintf("histogram_quantile(%s, sum by (%s, le) (rate(%s_bucket[%s])))", q, p.target(), metric, w)
}

func (p Params) probeSamples(metric, w string) string {
	return fmt.Sprintf("sum by (%s) (increase(%s_count[%s]))", p.target(), metric, w)
}

func probeAlerts(p Params) Group {
	g := Group{Name: "diskcanary.probe.alerts"}
	g.Rules = append(g.Rules,
		p.alert("DiskcanaryFdatasyncSlow", "warning",
			fmt.Sprintf("%s > %s\nand\n%s >= %d", quantileRule("fdatasync", "p99", "15m"), seconds(p.FdatasyncSlow), samplesRule("fdatasync", "15m"), p.MinSamples),
			p.FdatasyncSlowFor,
			"fdatasync p99 above the etcd guidance of "+human(p.FdatasyncSlow),
			"The 15-minute fdatasync p99 of "+onTarget+" is "+valueDuration+", above the "+human(p.FdatasyncSlow)+" etcd asks of its WAL disk."+attributionText+p.errorsText()),
		p.alert("DiskcanaryFdatasyncVerySlow", "warning",
			fmt.Sprintf("%s > %s\nand\n%s >= %d", quantileRule("fdatasync", "p99", "5m"), seconds(p.FdatasyncIncidentWarning), samplesRule("fdatasync", "5m"), p.MinIncidentSamples),
			p.FdatasyncIncidentFor,
			"fdatasync p99 at etcd incident level ("+human(p.FdatasyncIncidentWarning)+")",
			"The 5-minute fdatasync p99 of "+onTarget+" is "+valueDuration+", above "+human(p.FdatasyncIncidentWarning)+": etcd on this disk would be missing heartbeats."+attributionText+p.errorsText()),
		p.alert("DiskcanaryFdatasyncCritical", "critical",
			fmt.Sprintf("%s > %s\nand\n%s >= %d", quantileRule("fdatasync", "p99", "5m"), seconds(p.FdatasyncIncidentCritical), samplesRule("fdatasync", "5m"), p.MinIncidentSamples),
			p.FdatasyncIncidentFor,
			"fdatasync p99 above "+human(p.FdatasyncIncidentCritical),
			"The 5-minute fdatasync p99 of "+onTarget+" is "+valueDuration+", above "+human(p.FdatasyncIncidentCritical)+": etcd on this disk would lose leader elections."+attributionText+p.errorsText()),
		p.alert("DiskcanaryReadSlow", "warning",
			fmt.Sprintf("%s > %s\nand\n%s >= %d", quantileRule("read", "p99", "15m"), seconds(p.ReadSlow), samplesRule("read", "15m"), p.MinSamples),
			p.ReadSlowFor,
			"O_DIRECT random-read p99 above "+human(p.ReadSlow),
			"The 15-minute 4 KiB random-read p99 of "+onTarget+" is "+valueDuration+", above "+human(p.ReadSlow)+"."+attributionText+p.errorsText()),
		p.alert("DiskcanaryProbeStalled", "critical",
			"diskcanary_probe_stalled == 1", p.StallFor,
			"a disk I/O has been stuck past the stall threshold",
			"Probe {{ $labels.probe }} on {{ $labels.instance }} has an I/O in flight past its stall threshold: the disk (or the filesystem above it) is hung."+p.errorsText()),
		p.alert("DiskcanaryProbeFailing", "warning",
			"diskcanary_probe_success == 0", p.ProbeFailingFor,
			"a probe cannot measure its target",
			"Every cycle of probe {{ $labels.probe }} on {{ $labels.instance }} has failed for "+promDuration(p.ProbeFailingFor)+"; diskcanary_probe_failures_total says why."),
		p.alert("DiskcanaryProbeDataMissing", "warning",
			fmt.Sprintf("time() - diskcanary_probe_last_run_timestamp_seconds > %s", seconds(p.ProbeStaleAfter)), 5*time.Minute,
			"a probe has not completed a cycle",
			"Probe {{ $labels.probe }} on {{ $labels.instance }} has not completed a cycle for "+valueDuration+" (alerting after "+promDuration(p.ProbeStaleAfter)+")."),
		p.alert("DiskcanaryProbeTargetUntrusted", "info",
			"diskcanary_probe_target_warning == 1", 0,
			"a probe measures a filesystem that does not reach a disk",
			"Probe {{ $labels.probe }} on {{ $labels.instance }} measures a target flagged {{ $labels.warning }}: its latency does not describe a disk."),
	)
	return p.linkDashboard(g, dashboardNode, "job", "instance", "probe")
}

func latencyCases() []alertCase {
	const n = 60
	// 100 samples a minute: 1.500 per 15 m. 3 % above 10 ms → p99 = 20 ms.
	slow := hist(fdsMetric, walLabels, n, bucket{"0.005", 95}, bucket{"0.01", 97}, bucket{"0.025", 100})
	// 200 a minute, 0.5 % above 10 ms: p99 = 9.44 ms, just under.
	edge := hist(fdsMetric, walLabels, n, bucket{"0.005", 190}, bucket{"0.01", 199}, bucket{"0.025", 200})
	// Same shape as slow, 50 a minute: 750 per 15 m, under the 900 floor.
	sparse := hist(fdsMetric, walLabels, n, bucket{"0.005", 47}, bucket{"0.01", 48}, bucket{"0.025", 50})
	// 10 a minute, half in (0.5 s, 1 s]: p99 = 0.99 s.
	incident := hist(fdsMetric, walLabels, n, bucket{"0.25", 0}, bucket{"0.5", 5}, bucket{"1", 10})
	// Half in (0.25 s, 0.5 s]: p99 = 0.495 s.
	underIncident := hist(fdsMetric, walLabels, n, bucket{"0.1", 0}, bucket{"0.25", 5}, bucket{"0.5", 10})
	// 2 a minute: 10 per 5 m, under the incident floor of 20.
	sparseIncident := hist(fdsMetric, walLabels, n, bucket{"0.25", 0}, bucket{"0.5", 1}, bucket{"1", 2})
	// Half in (1 s, 2.5 s]: p99 = 2.47 s.
	critical := hist(fdsMetric, walLabels, n, bucket{"0.5", 0}, bucket{"1", 5}, bucket{"2.5", 10})
	readSlow := hist(readMetric, readLabels, n, bucket{"0.01", 190}, bucket{"0.025", 196}, bucket{"0.05", 200})
	readEdge := hist(readMetric, readLabels, n, bucket{"0.01", 190}, bucket{"0.025", 199}, bucket{"0.05", 200})
	readSparse := hist(readMetric, readLabels, n, bucket{"0.01", 47}, bucket{"0.025", 48}, bucket{"0.05", 50})
	return []alertCase{
		{name: "fdatasync p99 20 ms with 1,500 samples: warns", input: slow, at: "40m", alert: "DiskcanaryFdatasyncSlow", fire: []string{walLabels},
			values: []string{"20ms"},
			expr: []exprTest{
				near(quantileRule("fdatasync", "p99", "15m"), "40m", walLabels, 0.02),
				{Expr: samplesRule("fdatasync", "15m"), EvalTime: "40m", ExpSamples: []expSample{{samplesRule("fdatasync", "15m") + "{" + walLabels + "}", 1500}}},
			}},
		{name: "fdatasync p99 20 ms, not yet for 15 m: pending only", input: slow, at: "20m", alert: "DiskcanaryFdatasyncSlow"},
		{name: "fdatasync p99 9.44 ms, just under 10 ms: silent", input: edge, at: "40m", alert: "DiskcanaryFdatasyncSlow",
			expr: []exprTest{near(quantileRule("fdatasync", "p99", "15m"), "40m", walLabels, 0.005+0.005*8/9)}},
		{name: "fdatasync p99 20 ms on 750 samples: too few, silent", input: sparse, at: "40m", alert: "DiskcanaryFdatasyncSlow"},
		{name: "fdatasync p99 0.99 s: incident warning", input: incident, at: "30m", alert: "DiskcanaryFdatasyncVerySlow", fire: []string{walLabels}, values: []string{"990ms"}},
		{name: "fdatasync p99 0.495 s: no incident", input: underIncident, at: "30m", alert: "DiskcanaryFdatasyncVerySlow"},
		{name: "fdatasync p99 0.99 s on 10 samples per 5 m: silent", input: sparseIncident, at: "30m", alert: "DiskcanaryFdatasyncVerySlow"},
		{name: "fdatasync p99 2.47 s: critical", input: critical, at: "30m", alert: "DiskcanaryFdatasyncCritical", fire: []string{walLabels}, values: []string{"2.47s"}},
		{name: "fdatasync p99 0.99 s: not critical", input: incident, at: "30m", alert: "DiskcanaryFdatasyncCritical"},
		{name: "fdatasync p99 2.47 s on 10 samples per 5 m: not critical", input: hist(fdsMetric, walLabels, n, bucket{"0.5", 0}, bucket{"1", 1}, bucket{"2.5", 2}), at: "30m", alert: "DiskcanaryFdatasyncCritical"},
		{name: "read p99 37.5 ms: warns", input: readSlow, at: "40m", alert: "DiskcanaryReadSlow", fire: []string{readLabels}, values: []string{"37.5ms"}},
		{name: "read p99 23.3 ms, just under 25 ms: silent", input: readEdge, at: "40m", alert: "DiskcanaryReadSlow"},
		{name: "read p99 37.5 ms on 750 samples: silent", input: readSparse, at: "40m", alert: "DiskcanaryReadSlow"},
	}
}

func probeCases() []alertCase {
	const wal = `job="diskcanary", instance="n1:9742", probe="wal"`
	return []alertCase{
		{name: "stalled for minutes: page", input: s("diskcanary_probe_stalled{"+wal+"}", "0 0 1x10"), at: "8m", alert: "DiskcanaryProbeStalled", fire: []string{wal}},
		{name: "stalled for one scrape: silent", input: s("diskcanary_probe_stalled{"+wal+"}", "0 0 1 0x10"), at: "8m", alert: "DiskcanaryProbeStalled"},
		{name: "probe failing 20 m: warns", input: s("diskcanary_probe_success{"+wal+"}", "1 0x30"), at: "25m", alert: "DiskcanaryProbeFailing", fire: []string{wal}},
		{name: "probe failing 8 m after a success: silent", input: s("diskcanary_probe_success{"+wal+"}", "0x10 1 0x10"), at: "20m", alert: "DiskcanaryProbeFailing"},
		{name: "no cycle since t=0: data missing", input: s("diskcanary_probe_last_run_timestamp_seconds{"+wal+"}", "0x30"), at: "20m", alert: "DiskcanaryProbeDataMissing", fire: []string{wal}, values: []string{"20m 0s"}},
		{name: "a cycle every minute: silent", input: s("diskcanary_probe_last_run_timestamp_seconds{"+wal+"}", "0+60x30"), at: "20m", alert: "DiskcanaryProbeDataMissing"},
		{name: "cycles stopped 9 m ago: not yet", input: s("diskcanary_probe_last_run_timestamp_seconds{"+wal+"}", "0+60x11 660x30"), at: "20m", alert: "DiskcanaryProbeDataMissing"},
		{name: "tmpfs target: flagged", input: s(`diskcanary_probe_target_warning{`+wal+`, warning="tmpfs"}`, "1x5"), at: "3m", alert: "DiskcanaryProbeTargetUntrusted", fire: []string{wal + `, warning="tmpfs"`}},
		{name: "warning cleared: silent", input: s(`diskcanary_probe_target_warning{`+wal+`, warning="tmpfs"}`, "0x5"), at: "3m", alert: "DiskcanaryProbeTargetUntrusted"},
	}
}
