package rulegen

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// RuleFile is a Prometheus rule file.
type RuleFile struct {
	Groups []Group `yaml:"groups"`
}

// Group is one rule group; rules in a group are evaluated in order, so a
// rule may use the recording rules above it.
type Group struct {
	Name  string `yaml:"name"`
	Rules []Rule `yaml:"rules"`
}

// Rule is a recording or an alerting rule.
type Rule struct {
	Record      string            `yaml:"record,omitempty"`
	Alert       string            `yaml:"alert,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

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

// withCluster joins labels for a by/on clause, the cluster label first.
func (p Params) withCluster(labels ...string) string {
	var out []string
	if p.ClusterLabel != "" && !slices.Contains(labels, p.ClusterLabel) {
		out = append(out, p.ClusterLabel)
	}
	return strings.Join(append(out, labels...), ", ")
}

// instanceLabels identify one diskcanary (and so one node's disks);
// deviceLabels one block device of one instance.
func (p Params) instanceLabels() string { return p.withCluster("job", "instance") }
func (p Params) deviceLabels() string   { return p.withCluster("job", "instance", "device") }

// iostatRule is one iostat column as a recording rule.
type iostatRule struct {
	column string // sysstat's column name
	name   string // recording rule name without the window suffix
	expr   func(w string) string
}

func iostatRuleName(name string, w time.Duration) string {
	return fmt.Sprintf("device:diskcanary_disk_%s%s", name, promDuration(w))
}

// perIO is sysstat's "delta of a time (or size) counter / delta of the I/O
// count", and 0 when there was no I/O (sysstat prints 0.00, not NaN).
func perIO(num, den string) func(string) string {
	return func(w string) string {
		n := fmt.Sprintf("rate(%s[%s])", num, w)
		d := fmt.Sprintf("rate(%s[%s])", den, w)
		return fmt.Sprintf("%s / (%s > 0)\nor\n%s == 0", n, d, d)
	}
}

func rate(metric string) func(string) string {
	return func(w string) string { return fmt.Sprintf("rate(%s[%s])", metric, w) }
}

// iostatRules follow sysstat 12.x (rd_sec/wr_sec are bytes here; times are
// seconds, where iostat prints ms; %util is a 0..1 ratio).
var iostatRules = []iostatRule{
	{"r/s", "reads_completed:rate", rate("diskcanary_disk_reads_completed_total")},
	{"w/s", "writes_completed:rate", rate("diskcanary_disk_writes_completed_total")},
	{"rrqm/s", "reads_merged:rate", rate("diskcanary_disk_reads_merged_total")},
	{"wrqm/s", "writes_merged:rate", rate("diskcanary_disk_writes_merged_total")},
	{"rkB/s", "read_bytes:rate", rate("diskcanary_disk_read_bytes_total")},
	{"wkB/s", "written_bytes:rate", rate("diskcanary_disk_written_bytes_total")},
	{"r_await", "read_await_seconds:rate", perIO("diskcanary_disk_read_time_seconds_total", "diskcanary_disk_reads_completed_total")},
	{"w_await", "write_await_seconds:rate", perIO("diskcanary_disk_write_time_seconds_total", "diskcanary_disk_writes_completed_total")},
	{"rareq-sz", "read_request_size_bytes:rate", perIO("diskcanary_disk_read_bytes_total", "diskcanary_disk_reads_completed_total")},
	{"wareq-sz", "write_request_size_bytes:rate", perIO("diskcanary_disk_written_bytes_total", "diskcanary_disk_writes_completed_total")},
	{"aqu-sz", "queue_size:rate", rate("diskcanary_disk_io_time_weighted_seconds_total")},
	{"%util", "utilization:ratio_rate", rate("diskcanary_disk_io_time_seconds_total")},
}

// Rules builds the whole rule file.
func Rules(p Params) RuleFile {
	return RuleFile{Groups: []Group{
		probeRecording(p),
		cohortRecording(p),
		iostatRecording(p),
		attributionRecording(p),
		etcdRecording(p),
		smartRecording(p),
		probeAlerts(p),
		smartAlerts(p),
		errorsAlerts(p),
		collectionAlerts(p),
		driftAlerts(p),
		etcdAlerts(p),
	}}
}

func (p Params) target() string { return p.withCluster(p.TargetLabels...) }

func probeRecording(p Params) Group {
	g := Group{Name: "diskcanary.probe.recording"}
	t := p.target()
	for _, op := range latencyOps {
		for _, w := range []string{"5m", "15m", "1h"} {
			for _, q := range []struct{ name, q string }{{"p50", "0.5"}, {"p99", "0.99"}} {
				if w == "1h" && q.name == "p50" {
					continue
				}
				g.Rules = append(g.Rules, Rule{
					Record: quantileRule(op.op, q.name, w),
					Expr:   fmt.Sprintf("histogram_quantile(%s, sum by (%s, le) (rate(%s_bucket[%s])))", q.q, t, op.metric, w),
				})
			}
			g.Rules = append(g.Rules, Rule{
				Record: samplesRule(op.op, w),
				Expr:   fmt.Sprintf("sum by (%s) (increase(%s_count[%s]))", t, op.metric, w),
			})
		}
		// The own baseline: the same hour last week, computed from the raw
		// buckets so it works the moment the rules are loaded.
		g.Rules = append(g.Rules,
			Rule{
				Record: quantileRule(op.op, "p99", "1h_offset1w"),
				Expr:   fmt.Sprintf("histogram_quantile(0.99, sum by (%s, le) (rate(%s_bucket[1h] offset 1w)))", t, op.metric),
			},
			Rule{
				Record: samplesRule(op.op, "1h_offset1w"),
				Expr:   fmt.Sprintf("sum by (%s) (increase(%s_count[1h] offset 1w))", t, op.metric),
			})
	}
	return g
}

func cohortRecording(p Params) Group {
	t := p.target()
	c := p.CohortLabel
	g := Group{Name: "diskcanary.cohort.recording"}
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
	// How busy each target's disk was over the cohort window, and the
	// cohort's median: a busy healthy disk has a higher p99 than its idle
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
		},
		Rule{
			Record: ruleCohortBusy,
			Expr:   fmt.Sprintf("quantile by (%s) (0.5, %s * on (%s) group_left (cohort) %s)", cohortGrouping, ruleTargetBusy, t, ruleCohortInfo),
		})
	for _, op := range latencyOps {
		g.Rules = append(g.Rules,
			Rule{
				Record: cohortTargetRule(op.op),
				Expr: fmt.Sprintf(`(%s and %s >= %d)
* on (%s) group_left (cohort)
%s`, quantileRule(op.op, "p99", "15m"), samplesRule(op.op, "15m"), p.MinSamples, t, ruleCohortInfo),
			},
			Rule{
				Record: cohortMedianRule(op.op),
				Expr:   fmt.Sprintf("quantile by (%s) (0.5, %s)", cohortGrouping, cohortTargetRule(op.op)),
			},
			Rule{
				Record: cohortMembersRule(op.op),
				Expr:   fmt.Sprintf("count by (%s) (%s)", cohortGrouping, cohortTargetRule(op.op)),
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

func iostatRecording(p Params) Group {
	g := Group{Name: "diskcanary.iostat.recording"}
	w := promDuration(p.IostatWindow)
	for _, r := range iostatRules {
		g.Rules = append(g.Rules, Rule{Record: iostatRuleName(r.name, p.IostatWindow), Expr: r.expr(w)})
	}
	return g
}

// Attribution rule names.
const (
	ruleDiskRequestP99   = "disk:diskcanary_disk_request_duration_seconds:p99_15m"
	ruleDeviceRequestP99 = "device:diskcanary_disk_request_duration_seconds:p99_15m"
	ruleTargetDeviceLat  = "target:diskcanary_device_latency_seconds:15m"
	ruleAttribution      = "target:diskcanary_probe_attribution:info"
)

// Verdicts of the attribution rules.
const (
	verdictDevice = "device" // the device's own requests are slow
	verdictStack  = "stack"  // the probe is slow, its device's requests are not
	verdictNone   = "none"   // the probe is not slow
)

// attributed is a probe latency and the block requests that make it up:
// an fdatasync is data writes and a cache flush, a read one read.
type attributed struct {
	op       string // the probe's op: fdatasync, read
	requests string // the block layer's ops (diskcanary_disk_request_duration_seconds{op})
	// diskstats' counters for the fallback's mean await, per request op.
	awaits [][2]string
	slow   func(Params) time.Duration
}

var attributedOps = []attributed{
	{"fdatasync", "flush|write", [][2]string{
		{"diskcanary_disk_flush_requests_time_seconds_total", "diskcanary_disk_flush_requests_total"},
		{"diskcanary_disk_write_time_seconds_total", "diskcanary_disk_writes_completed_total"},
	}, func(p Params) time.Duration { return p.FdatasyncSlow }},
	{"read", "read", [][2]string{
		{"diskcanary_disk_read_time_seconds_total", "diskcanary_disk_reads_completed_total"},
	}, func(p Params) time.Duration { return p.ReadSlow }},
}

// attributionRecording puts each probe target's p99 beside its device's
// latency for the same requests and says whose fault a slow probe is:
// the device's (its own requests are slow) or the stack's above it
// (filesystem, journal, cgroup I/O throttle, virtualisation, FUSE). The
// device latency is the block layer's request p99 (the blocklatency
// collector, eBPF); without it, diskstats' mean await, a weaker witness
// (a mean hides a tail), labelled source="diskstats".
func attributionRecording(p Params) Group {
	g := Group{Name: "diskcanary.attribution.recording"}
	t := p.target()
	// The kernel times requests per whole disk (a partition's and a
	// device-mapper device's requests reach the disk under them); NaN
	// (no request in the window) is dropped, not compared.
	g.Rules = append(g.Rules, Rule{
		Record: ruleDiskRequestP99,
		Expr:   fmt.Sprintf("histogram_quantile(0.99, sum by (%s, device, op, le) (rate(diskcanary_disk_request_duration_seconds_bucket[15m]))) >= 0", p.instanceLabels()),
	})
	// A probe's device: a disk is its own; a partition or dm/md device
	// takes the slowest disk under it (diskcanary_disk_parent_info). One
	// rule per op keeps the join one-to-many.
	for _, op := range []string{"flush", "write", "read"} {
		g.Rules = append(g.Rules, Rule{
			Record: ruleDeviceRequestP99,
			Labels: map[string]string{"op": op},
			Expr: fmt.Sprintf(`%[2]s{op="%[3]s"}
or
max by (%[1]s, device, op) (
  max by (%[1]s, device, disk) (diskcanary_disk_parent_info)
  * on (%[1]s, disk) group_left (op)
  label_replace(%[2]s{op="%[3]s"}, "disk", "$1", "device", "(.+)")
)`, p.instanceLabels(), ruleDiskRequestP99, op),
		})
	}
	for _, a := range attributedOps {
		probeP99 := quantileRule(a.op, "p99", "15m")
		// 1 for every target with a p99 (NaN: no samples in the window).
		onTargets := fmt.Sprintf("((%s >= 0) * 0 + 1)", probeP99)
		g.Rules = append(g.Rules, Rule{
			Record: ruleTargetDeviceLat,
			Labels: map[string]string{"op": a.op, "source": "blocklatency"},
			Expr: fmt.Sprintf(`max by (%[1]s, device) (%[2]s{op=~"%[3]s"})
* on (%[1]s, device) group_right ()
%[4]s`, p.instanceLabels(), ruleDeviceRequestP99, a.requests, onTargets),
		})
		var awaits []string
		for i, c := range a.awaits {
			awaits = append(awaits, fmt.Sprintf(`label_replace(rate(%s[15m]) / (rate(%s[15m]) > 0), "request", "%d", "", "")`, c[0], c[1], i))
		}
		g.Rules = append(g.Rules, Rule{
			Record: ruleTargetDeviceLat,
			Labels: map[string]string{"op": a.op, "source": "diskstats"},
			Expr: fmt.Sprintf(`(
  max by (%[1]s, device) (
    %[2]s
  )
  * on (%[1]s, device) group_right ()
  %[3]s
)
unless on (%[1]s, device)
%[4]s{op=~"%[5]s"}`, p.instanceLabels(), strings.Join(awaits, "\n    or\n    "), onTargets, ruleDeviceRequestP99, a.requests),
		})
		lat := fmt.Sprintf(`%s{op="%s"}`, ruleTargetDeviceLat, a.op)
		share := fmt.Sprintf("on (%s) group_left () (%s * %s)", t, num(p.AttributionDeviceShare), probeP99)
		for _, v := range []struct{ verdict, expr string }{
			{verdictDevice, fmt.Sprintf("(%s >= %s)\nand on (%s)\n%s > %s", lat, share, t, probeP99, seconds(a.slow(p)))},
			{verdictStack, fmt.Sprintf("(%s < %s)\nand on (%s)\n%s > %s", lat, share, t, probeP99, seconds(a.slow(p)))},
			{verdictNone, fmt.Sprintf("%s\nand on (%s)\n%s <= %s", lat, t, probeP99, seconds(a.slow(p)))},
		} {
			g.Rules = append(g.Rules, Rule{
				Record: ruleAttribution,
				Labels: map[string]string{"op": a.op, "verdict": v.verdict},
				Expr:   fmt.Sprintf("(\n%s\n) * 0 + 1", v.expr),
			})
		}
	}
	return g
}

// attributionText is the sentence a latency alert's description ends with,
// from the target's attribution verdict when there is one (Prometheus
// evaluates the query when it renders the alert).
const attributionText = `{{ with printf "` + ruleAttribution + `{instance=%q,probe=%q,path=%q}" $labels.instance $labels.probe $labels.path | query }}{{ with first . }} Cause: {{ if eq .Labels.verdict "device" }}the device ({{ .Labels.source }}: its own requests are slow too){{ else if eq .Labels.verdict "stack" }}the stack above the device ({{ .Labels.source }}: its requests are not slow; look at the filesystem, its journal, a cgroup I/O limit, the hypervisor){{ else }}none over the last 15 minutes{{ end }}.{{ end }}{{ end }}`

// alert builds an alerting rule with the runbook link every alert carries.
func (p Params) alert(name, severity string, expr string, forDur time.Duration, summary, description string) Rule {
	r := Rule{
		Alert:  name,
		Expr:   expr,
		Labels: map[string]string{"severity": severity},
		Annotations: map[string]string{
			"summary":     summary,
			"description": p.clusterQueries(description),
			"runbook_url": p.RunbookBase + "#" + strings.ToLower(name),
		},
	}
	if forDur > 0 {
		r.For = promDuration(forDur)
	}
	return r
}

// The dashboards' UIDs: alerts link to them (dashboard_url).
const (
	dashboardFleet = "diskcanary-fleet"
	dashboardNode  = "diskcanary-node"
	dashboardEtcd  = "diskcanary-etcd"
)

// dashboardURL is the link to a dashboard (its uid) with its variables
// (name, or name=label where the variable and the label differ) set from
// an alert's labels, and its cluster.
func (p Params) dashboardURL(uid string, vars ...string) string {
	var q []string
	if p.ClusterLabel != "" {
		vars = append([]string{"cluster=" + p.ClusterLabel}, vars...)
	}
	for _, v := range vars {
		name, label, ok := strings.Cut(v, "=")
		if !ok {
			label = name
		}
		q = append(q, "var-"+name+"={{ $labels."+label+" | urlquery }}")
	}
	return strings.TrimSuffix(p.GrafanaURL, "/") + "/d/" + uid + "?" + strings.Join(q, "&")
}

// linkDashboard sets the dashboard_url of every alert in g that has none.
func (p Params) linkDashboard(g Group, uid string, vars ...string) Group {
	url := p.dashboardURL(uid, vars...)
	for i, r := range g.Rules {
		if _, ok := r.Annotations["dashboard_url"]; r.Alert != "" && !ok {
			g.Rules[i].Annotations["dashboard_url"] = url
		}
	}
	return g
}

// templateQuery is a query an alert text runs when it renders:
// printf "FORMAT" ARGS | query.
var templateQuery = regexp.MustCompile(`printf "([^"]*)" ([^|}]*)\| query`)

// clusterQueries makes the queries in an alert text select the alert's
// cluster as well as its instance: in a global ruler, instance names
// repeat across clusters.
func (p Params) clusterQueries(text string) string {
	if p.ClusterLabel == "" {
		return text
	}
	return templateQuery.ReplaceAllStringFunc(text, func(m string) string {
		g := templateQuery.FindStringSubmatch(m)
		format := strings.ReplaceAll(g[1], "{instance=%q", "{"+p.ClusterLabel+"=%q,instance=%q")
		args := strings.ReplaceAll(g[2], "$labels.instance", "$labels."+p.ClusterLabel+" $labels.instance")
		return `printf "` + format + `" ` + args + "| query"
	})
}

// stormKinds are the disk error kinds that mean a command did not
// complete: each stalls I/O for the driver's timeout (30 s by default for
// SCSI and NVMe) and a run of them is what a multi-second stall is made of.
const stormKinds = "timeout|timeout_polled|abort|reset|link_down|offline"

// errorsText is the sentence a latency or stall alert's description ends
// with when the kernel logged storage errors in the window on the probe's
// device: its disks' errors (through diskcanary_disk_parent_info), errors
// the kernel named with the device itself (a partition's buffer errors),
// and its filesystem's errors. Prometheus runs the query when it renders
// the alert; with none, nothing is added.
func (p Params) errorsText() string {
	w := promDuration(p.ErrorWindow)
	q := "sum by (kind) (increase(diskcanary_disk_errors_total{instance=%q}[" + w + "]) and on (device) label_replace(diskcanary_disk_parent_info{instance=%q,device=%q}, `device`, `$1`, `disk`, `(.+)`)" +
		" or increase(diskcanary_disk_errors_total{instance=%q,device=%q}[" + w + "])" +
		" or increase(diskcanary_filesystem_errors_total{instance=%q,device=%q,kind!=`warning`}[" + w + "])) > 0"
	return kindsText(q, "$labels.instance $labels.instance $labels.device $labels.instance $labels.device $labels.instance $labels.device",
		" Kernel storage errors on this device in the last "+w+":")
}

// kindsText is an alert-text template: when the query (a printf format
// over args, label references) returns series by kind, it renders the
// lead followed by each kind and its count, sorted by kind.
func kindsText(query, args, lead string) string {
	return "{{ with printf \"" + query + "\" " + args + " | query | sortByLabel \"kind\" }}" + lead +
		"{{ range . }} {{ .Labels.kind }} ×{{ printf \"%.0f\" .Value }}{{ end }}.{{ end }}"
}

const onTarget = "{{ $labels.instance }} probe {{ $labels.probe }} ({{ $labels.path }} on {{ $labels.device }})"

// valueDuration and valuePercent render the alert's value (the left side
// of its comparison: the latency, the age, the ratio) in an alert text.
const (
	valueDuration = "{{ $value | humanizeDuration }}"
	valuePercent  = "{{ $value | humanizePercentage }}"
)

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

func smartAlerts(p Params) Group {
	g := Group{Name: "diskcanary.smart.alerts"}
	w := promDuration(p.SmartGrowthWindow)
	on := "{{ $labels.device }} on {{ $labels.instance }}"
	grow := func(name, metric, what string) Rule {
		// Growth of a gauge: now above its lowest value in the window
		// (a shrinking count, e.g. pending sectors remapped, never alerts).
		return p.alert(name, "warning",
			fmt.Sprintf("%s > min_over_time(%s[%s])", metric, metric, w), 0,
			what+" growing",
			what+" of "+on+" grew in the last "+w+", to {{ $value | printf \"%.0f\" }}.")
	}
	g.Rules = append(g.Rules,
		p.alert("DiskcanarySmartUnhealthy", "critical",
			"diskcanary_smart_healthy == 0", 0,
			"SMART overall health says the disk is failing",
			"The SMART overall-health self-assessment of "+on+" failed."),
		p.alert("DiskcanarySmartMediaErrors", "warning",
			fmt.Sprintf("increase(diskcanary_smart_media_errors_total[%s]) > 0", w), 0,
			"media errors growing",
			on+" logged {{ $value | printf \"%.0f\" }} new media errors in the last "+w+"."),
		p.alert("DiskcanarySmartSelfTestFailed", "warning",
			`diskcanary_smart_selftest_last_result{result="failed"} == 1`, 0,
			"the disk failed its last self-test",
			"The newest self-test in the log of "+on+" ({{ $labels.type }}) failed: the drive found a fault in its own media or electronics. diskcanary_smart_selftest_failed_lba has the first failing LBA where the drive reports one."),
		grow("DiskcanarySmartReallocatedSectors", "diskcanary_smart_reallocated_sectors", "Reallocated sectors"),
		grow("DiskcanarySmartPendingSectors", "diskcanary_smart_pending_sectors", "Pending (unreadable) sectors"),
		grow("DiskcanarySmartOfflineUncorrectable", "diskcanary_smart_offline_uncorrectable_sectors", "Offline uncorrectable sectors"),
		// Attribute 188, one of Backblaze's failure predictors: commands
		// the drive did not complete in time, counted by the drive itself.
		p.alert("DiskcanarySmartCommandTimeouts", "warning",
			fmt.Sprintf("increase(diskcanary_smart_command_timeouts_total[%s]) > 0", w), 0,
			"the drive counts command timeouts",
			on+" counted {{ $value | printf \"%.0f\" }} command timeouts of its own (attribute 188) in the last "+w+": commands it did not complete in time stall I/O."),
		p.alert("DiskcanarySmartCriticalWarning", "critical",
			"diskcanary_smart_critical_warning > 0", 0,
			"NVMe critical warning {{ $labels.flag }}",
			"The NVMe controller of "+on+" raised critical warning {{ $labels.flag }}."),
		p.alert("DiskcanarySmartSpareLow", "critical",
			"diskcanary_smart_available_spare_ratio < diskcanary_smart_available_spare_threshold_ratio", 0,
			"available spare below the vendor threshold",
			"The available spare of "+on+" is {{ $value | humanizePercentage }}, below the threshold its vendor set{{ with printf \"diskcanary_smart_available_spare_threshold_ratio{instance=%q,device=%q}\" $labels.instance $labels.device | query }} ({{ . | first | value | humanizePercentage }}){{ end }}."),
		p.alert("DiskcanarySmartWearHigh", "warning",
			fmt.Sprintf("diskcanary_smart_wear_used_ratio > %s", num(p.WearWarning)), 0,
			fmt.Sprintf("SSD wear above %g %%", p.WearWarning*100),
			fmt.Sprintf("%s has used %s of its rated endurance, more than %g %%.", on, valuePercent, p.WearWarning*100)),
		p.alert("DiskcanarySmartWearCritical", "critical",
			fmt.Sprintf("diskcanary_smart_wear_used_ratio > %s", num(p.WearCritical)), 0,
			fmt.Sprintf("SSD wear above %g %%", p.WearCritical*100),
			fmt.Sprintf("%s has used %s of its rated endurance, more than %g %%: plan the replacement now.", on, valuePercent, p.WearCritical*100)),
		// The drive's own operating limit where it states one (NVMe
		// WCTEMP, ATA SCT): one fixed number is too lax for many HDDs and
		// too strict for NVMe drives rated to 70-85 °C.
		p.alert("DiskcanarySmartWearOutSoon", "warning",
			p.wearForecast()+fmt.Sprintf(" < %s", num(p.WearForecastDays)), time.Hour,
			"SSD reaches its rated endurance within "+fmt.Sprintf("%g", p.WearForecastDays/7)+" weeks",
			fmt.Sprintf(`At its wear rate of the last %g days, %s reaches its rated endurance (100 %% used) in {{ $value | printf "%%.0f" }} days: order the replacement.`, p.WearForecastWindow.Hours()/24, on)),
		p.alert("DiskcanarySmartTemperatureHigh", "warning",
			fmt.Sprintf("diskcanary_smart_temperature_celsius > on ("+p.deviceLabels()+") diskcanary_smart_temperature_max_operating_celsius\nor\n(diskcanary_smart_temperature_celsius > %s unless on ("+p.deviceLabels()+") diskcanary_smart_temperature_max_operating_celsius)", num(p.SmartTemperatureCelsius)), p.SmartTemperatureFor,
			"disk temperature above its operating limit",
			fmt.Sprintf(`%s is at {{ $value | printf "%%.0f" }} °C and has been above {{ with printf "diskcanary_smart_temperature_max_operating_celsius{instance=%%q,device=%%q}" $labels.instance $labels.device | query }}{{ . | first | value }} °C, its own operating limit,{{ else }}%g °C (it states no limit of its own){{ end }} for %s.`, on, p.SmartTemperatureCelsius, promDuration(p.SmartTemperatureFor))),
	)
	return p.linkDashboard(g, dashboardNode, "job", "instance", "disk=device")
}

// errorsAlerts page on what the kernel says of its disks and filesystems
// (the errors collector), by severity: a storm of timeouts and resets
// (I/O stalls now), medium errors (data the disk cannot read), other I/O
// errors, filesystem errors, and a filesystem the kernel made read-only.
// ruleWearForecast is the wear-out forecast in days, per device.
const ruleWearForecast = "device:diskcanary_smart_wear_used_ratio:days_to_worn_out"

// wearForecast is the days until diskcanary_smart_wear_used_ratio reaches
// 1 at its rate over WearForecastWindow: the remaining share over the
// window's increase, times the window. Only a drive that wore during the
// window has one (wear in whole percent moves in steps; a window of a
// month smooths them).
func (p Params) wearForecast() string {
	w := promDuration(p.WearForecastWindow)
	return fmt.Sprintf("(1 - diskcanary_smart_wear_used_ratio)\n/ ((diskcanary_smart_wear_used_ratio - diskcanary_smart_wear_used_ratio offset %s) > 0)\n* %s",
		w, num(p.WearForecastWindow.Hours()/24))
}

func smartRecording(p Params) Group {
	return Group{Name: "diskcanary.smart.recording", Rules: []Rule{{Record: ruleWearForecast, Expr: p.wearForecast()}}}
}

func errorsAlerts(p Params) Group {
	g := Group{Name: "diskcanary.errors.alerts"}
	w, sw := promDuration(p.ErrorWindow), promDuration(p.ErrorStormWindow)
	on := "{{ $labels.device }} on {{ $labels.instance }}"
	byKind := kindsText("sum by (kind) (increase(diskcanary_disk_errors_total{instance=%q,device=%q}["+w+"])) > 0", "$labels.instance $labels.device", " By kind:")
	g.Rules = append(g.Rules,
		p.alert("DiskcanaryDiskTimeoutStorm", "critical",
			fmt.Sprintf("sum by ("+p.deviceLabels()+") (increase(diskcanary_disk_errors_total{kind=~%q}[%s])) >= %d", stormKinds, sw, p.ErrorStormCount), 0,
			"disk timeouts and resets: I/O is stalling",
			fmt.Sprintf("The kernel logged {{ $value | printf \"%%.0f\" }} command timeouts, aborts, resets or link losses on %s in the last %s (%d or more page): each one stalls I/O for the driver's timeout.", on, sw, p.ErrorStormCount)+byKind),
		p.alert("DiskcanaryDiskMediumErrors", "warning",
			fmt.Sprintf(`sum by (`+p.deviceLabels()+`) (increase(diskcanary_disk_errors_total{kind="medium"}[%s])) > 0`, w), 0,
			"the disk cannot read or write some of its sectors",
			"The kernel logged medium errors on "+on+" in the last "+w+": the disk failed requests for sectors it cannot read or write. Compare SMART's pending and reallocated sectors."),
		p.alert("DiskcanaryDiskIOErrors", "warning",
			fmt.Sprintf(`sum by (`+p.deviceLabels()+`) (increase(diskcanary_disk_errors_total{kind!~"medium|%s"}[%s])) > 0`, stormKinds, w), 0,
			"I/O errors on a disk",
			"The kernel logged I/O errors on "+on+" in the last "+w+"."+byKind),
		p.alert("DiskcanaryFilesystemErrors", "warning",
			fmt.Sprintf(`sum by (`+p.deviceLabels()+`, fstype) (increase(diskcanary_filesystem_errors_total{kind!="warning"}[%[1]s]))
or
sum by (`+p.deviceLabels()+`, fstype) (delta(diskcanary_filesystem_recorded_errors[%[1]s]) > 0)`, w), 0,
			"filesystem errors",
			"The {{ $labels.fstype }} filesystem on "+on+" reported errors in the last "+w+" (diskcanary_filesystem_errors_total by kind: error, io, corruption, journal_abort, shutdown, remount_ro): run its fsck at the next chance; an XFS shutdown or an aborted journal stops all writes now."),
		p.alert("DiskcanaryFilesystemReadOnly", "critical",
			"diskcanary_filesystem_readonly == 1", 0,
			"the kernel made a filesystem read-only",
			"The kernel holds the filesystem on "+on+" at {{ $labels.mountpoint }} read-only after an error, under a read-write mount: every write to it fails (etcd on it stops). Fix the cause, fsck, remount."),
	)
	return p.linkDashboard(g, dashboardNode, "job", "instance", "disk=device")
}

func collectionAlerts(p Params) Group {
	g := Group{Name: "diskcanary.collection.alerts"}
	on := "{{ $labels.device }} on {{ $labels.instance }}"
	g.Rules = append(g.Rules,
		p.alert("DiskcanarySmartCollectionFailing", "warning",
			"diskcanary_smart_collect_success == 0", p.SmartFailingFor,
			"SMART cannot be read",
			"Reading SMART from "+on+" has failed for "+promDuration(p.SmartFailingFor)+" (smartctl exit status in diskcanary_smartctl_exit_status)."),
		p.alert("DiskcanarySmartStale", "warning",
			fmt.Sprintf("time() - diskcanary_smart_last_success_timestamp_seconds > %s\nunless on ("+p.deviceLabels()+")\ndiskcanary_smart_standby == 1", seconds(p.SmartStaleAfter)), 5*time.Minute,
			"SMART data is stale",
			"The last successful SMART read of "+on+" is "+valueDuration+" old (alerting after "+promDuration(p.SmartStaleAfter)+")."),
		p.alert("DiskcanarySmartctlTimeouts", "warning",
			fmt.Sprintf("increase(diskcanary_smartctl_timeouts_total[%s]) > 0", promDuration(p.SmartGrowthWindow)), 0,
			"smartctl is timing out",
			"smartctl timed out on "+on+" in the last "+promDuration(p.SmartGrowthWindow)+"; a device that hangs smartctl often hangs I/O too."),
		p.alert("DiskcanarySmartQuarantined", "warning",
			"diskcanary_smart_quarantined == 1", 0,
			"a device is quarantined from SMART reads",
			on+" is quarantined after repeated smartctl timeouts: its SMART data is not refreshed."),
		p.alert("DiskcanaryCollectorFailing", "warning",
			"diskcanary_collector_success == 0", p.CollectorFailingFor,
			"a diskcanary collector is failing",
			"The {{ $labels.collector }} collector of {{ $labels.instance }} has failed every scrape for "+promDuration(p.CollectorFailingFor)+"."),
		p.alert("DiskcanaryKernelLogUnread", "info",
			fmt.Sprintf("diskcanary_kernel_log_available == 0\nor\nincrease(diskcanary_kernel_log_lost_records_total[%s]) > 0", promDuration(p.ErrorWindow)), p.CollectorFailingFor,
			"kernel storage errors are not all counted",
			"diskcanary on {{ $labels.instance }} does not read the kernel log (diskcanary_kernel_log_unavailable_info says why: CAP_SYSLOG, /dev/kmsg) or lost records to a wrapping ring buffer: disk and filesystem error alerts may stay silent."),
		p.alert("DiskcanaryExporterDown", "warning",
			fmt.Sprintf("up{%s} == 0", p.JobSelector), p.ExporterDownFor,
			"diskcanary is down",
			"Prometheus cannot scrape diskcanary on {{ $labels.instance }}: nothing on this node's disks is measured."),
	)
	return p.linkDashboard(g, dashboardNode, "job", "instance", "disk=device")
}

func driftAlerts(p Params) Group {
	g := Group{Name: "diskcanary.drift.alerts"}
	t := p.target()
	for _, op := range latencyOps {
		if op.op == "write" {
			continue // the write() lands in the page cache; fdatasync is the disk
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
	g = p.linkDashboard(g, dashboardFleet, "job", "cohort") // the target among its peers
	for _, op := range latencyOps {
		if op.op == "write" {
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
