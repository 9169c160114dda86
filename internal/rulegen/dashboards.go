package rulegen

import (
	"fmt"
	"strings"
)

// A small Grafana dashboard model: only what these dashboards use, in the
// JSON shape Grafana 10/11 imports (schemaVersion 39). Maps are used for
// free-form option blocks; encoding/json sorts their keys, so output is
// stable.

// Dashboard is one Grafana dashboard.
type Dashboard struct {
	UID           string         `json:"uid"`
	Title         string         `json:"title"`
	Description   string         `json:"description"`
	Tags          []string       `json:"tags"`
	Editable      bool           `json:"editable"`
	GraphTooltip  int            `json:"graphTooltip"`
	Refresh       string         `json:"refresh"`
	SchemaVersion int            `json:"schemaVersion"`
	Time          map[string]any `json:"time"`
	Timezone      string         `json:"timezone"`
	Version       int            `json:"version"`
	Annotations   map[string]any `json:"annotations"`
	Templating    struct {
		List []Variable `json:"list"`
	} `json:"templating"`
	Panels []Panel `json:"panels"`
}

// Variable is a template variable.
type Variable struct {
	Name       string         `json:"name"`
	Label      string         `json:"label"`
	Type       string         `json:"type"`
	Datasource *DatasourceRef `json:"datasource,omitempty"`
	Query      any            `json:"query"`
	Definition string         `json:"definition,omitempty"`
	Refresh    int            `json:"refresh"`
	IncludeAll bool           `json:"includeAll"`
	AllValue   string         `json:"allValue,omitempty"`
	Multi      bool           `json:"multi"`
	Sort       int            `json:"sort"`
	Hide       int            `json:"hide"`
	Regex      string         `json:"regex"`
	Current    map[string]any `json:"current"`
	Options    []any          `json:"options"`
}

// DatasourceRef points at the templated Prometheus data source.
type DatasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

var promDS = &DatasourceRef{Type: "prometheus", UID: "${datasource}"}

// Panel is one panel.
type Panel struct {
	ID              int              `json:"id"`
	Type            string           `json:"type"`
	Title           string           `json:"title"`
	Description     string           `json:"description,omitempty"`
	GridPos         GridPos          `json:"gridPos"`
	Datasource      *DatasourceRef   `json:"datasource,omitempty"`
	Targets         []Target         `json:"targets,omitempty"`
	FieldConfig     map[string]any   `json:"fieldConfig,omitempty"`
	Options         map[string]any   `json:"options,omitempty"`
	Transformations []map[string]any `json:"transformations,omitempty"`
}

// GridPos places a panel on the 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Target is one PromQL query of a panel.
type Target struct {
	RefID        string         `json:"refId"`
	Datasource   *DatasourceRef `json:"datasource"`
	Expr         string         `json:"expr"`
	LegendFormat string         `json:"legendFormat,omitempty"`
	Format       string         `json:"format,omitempty"`
	Instant      bool           `json:"instant,omitempty"`
	Range        bool           `json:"range"`
}

// q is a panel query under construction.
type q struct {
	expr, legend string
}

func targets(instant bool, format string, qs ...q) []Target {
	var out []Target
	for i, x := range qs {
		out = append(out, Target{RefID: string(rune('A' + i)), Datasource: promDS, Expr: x.expr,
			LegendFormat: x.legend, Format: format, Instant: instant, Range: !instant})
	}
	return out
}

// layout hands out grid positions left to right, top to bottom.
type layout struct{ x, y, rowH, id int }

func (l *layout) next(w, h int) (GridPos, int) {
	if l.x+w > 24 {
		l.x, l.y, l.rowH = 0, l.y+l.rowH, 0
	}
	g := GridPos{H: h, W: w, X: l.x, Y: l.y}
	l.x += w
	if h > l.rowH {
		l.rowH = h
	}
	l.id++
	return g, l.id
}

func (l *layout) add(d *Dashboard, p Panel, w, h int) {
	p.GridPos, p.ID = l.next(w, h)
	if p.Type != "row" && p.Type != "text" {
		p.Datasource = promDS
	}
	d.Panels = append(d.Panels, p)
}

func (l *layout) row(d *Dashboard, title string) {
	if l.x > 0 {
		l.x, l.y, l.rowH = 0, l.y+l.rowH, 0
	}
	p := Panel{Type: "row", Title: title, Options: nil}
	p.GridPos, p.ID = l.next(24, 1)
	d.Panels = append(d.Panels, p)
	l.x, l.y, l.rowH = 0, l.y+1, 0
}

func timeseries(title, unit string, qs ...q) Panel {
	return Panel{Type: "timeseries", Title: title, Targets: targets(false, "", qs...),
		FieldConfig: map[string]any{"defaults": map[string]any{"unit": unit}, "overrides": []any{}},
		Options:     map[string]any{"legend": map[string]any{"displayMode": "table", "placement": "bottom", "calcs": []string{"lastNotNull", "max"}}, "tooltip": map[string]any{"mode": "multi", "sort": "desc"}}}
}

// withLine draws a dashed threshold line (the etcd 10 ms bar) on a time series.
func withLine(p Panel, at float64, color string) Panel {
	p.FieldConfig["defaults"].(map[string]any)["thresholds"] = map[string]any{"mode": "absolute", "steps": []any{
		map[string]any{"color": "green", "value": nil}, map[string]any{"color": color, "value": at}}}
	p.FieldConfig["defaults"].(map[string]any)["custom"] = map[string]any{"thresholdsStyle": map[string]any{"mode": "dashed"}}
	return p
}

func stat(title, unit string, qs ...q) Panel {
	return Panel{Type: "stat", Title: title, Targets: targets(true, "", qs...),
		FieldConfig: map[string]any{"defaults": map[string]any{"unit": unit}, "overrides": []any{}},
		Options:     map[string]any{"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}}, "colorMode": "value", "graphMode": "none"}}
}

func table(title string, qs ...q) Panel {
	return Panel{Type: "table", Title: title, Targets: targets(true, "table", qs...),
		Transformations: []map[string]any{{"id": "merge", "options": map[string]any{}},
			{"id": "organize", "options": map[string]any{"excludeByName": map[string]any{"Time": true, "__name__": true}}}},
		FieldConfig: map[string]any{"defaults": map[string]any{}, "overrides": []any{}}}
}

func withUnit(p Panel, unit string) Panel {
	p.FieldConfig["defaults"].(map[string]any)["unit"] = unit
	return p
}

func heatmap(title, expr string) Panel {
	t := targets(false, "heatmap", q{expr, "{{le}}"})
	return Panel{Type: "heatmap", Title: title, Targets: t,
		Options: map[string]any{"calculate": false, "yAxis": map[string]any{"unit": "s"},
			"cellGap": 1, "color": map[string]any{"mode": "scheme", "scheme": "Oranges"}}}
}

func newDashboard(uid, title, description string) *Dashboard {
	d := &Dashboard{UID: uid, Title: title, Description: description,
		Tags: []string{"diskcanary"}, Editable: true, GraphTooltip: 1, Refresh: "1m",
		SchemaVersion: 39, Time: map[string]any{"from": "now-6h", "to": "now"}, Timezone: "browser", Version: 1,
		Annotations: map[string]any{"list": []any{}}}
	d.Templating.List = append(d.Templating.List, Variable{
		Name: "datasource", Label: "Data source", Type: "datasource", Query: "prometheus", Refresh: 1,
		Current: map[string]any{}, Options: []any{}})
	return d
}

func (d *Dashboard) queryVar(name, label, query string, multi bool) {
	v := Variable{Name: name, Label: label, Type: "query", Datasource: promDS,
		Query:      map[string]any{"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 1},
		Definition: query, Refresh: 2, Multi: multi, IncludeAll: multi, Sort: 1, Current: map[string]any{}, Options: []any{}}
	if multi {
		v.AllValue = ".*"
	}
	d.Templating.List = append(d.Templating.List, v)
}

// Dashboards returns the dashboards keyed by file name.
func Dashboards(p Params) map[string]*Dashboard {
	return map[string]*Dashboard{
		"diskcanary-fleet.json": fleetDashboard(p),
		"diskcanary-node.json":  nodeDashboard(p),
		"diskcanary-etcd.json":  etcdDashboard(p),
	}
}

func fleetDashboard(p Params) *Dashboard {
	d := newDashboard("diskcanary-fleet", "diskcanary / Fleet",
		"Which disks drifted from their cohort (same model or a user cohort label), fleet SMART health and wear, stalled targets.")
	d.queryVar("job", "Job", "label_values(diskcanary_build_info, job)", true)
	d.queryVar("cohort", "Cohort", "label_values("+ruleCohortInfo+"{job=~\"$job\"}, cohort)", true)
	l := &layout{}
	sel := `{job=~"$job"}`
	// Targets of the chosen cohorts, and the cohort-level series (which have
	// no job or instance: they aggregate across them).
	tsel := `{job=~"$job", cohort=~"$cohort"}`
	csel := `{cohort=~"$cohort"}`
	l.row(d, "Now")
	l.add(d, stat("Stalled targets", "none", q{fmt.Sprintf(`count(diskcanary_probe_stalled%s == 1) or vector(0)`, sel), ""}), 4, 4)
	l.add(d, stat("Targets over the etcd bar (fdatasync p99 15m)", "none", q{fmt.Sprintf(`count(%s%s > %s) or vector(0)`, quantileRule("fdatasync", "p99", "15m"), sel, seconds(p.FdatasyncSlow)), ""}), 5, 4)
	l.add(d, stat("Fleet-drift outliers", "none", q{fmt.Sprintf("count(\n  %s\n  and\n  %s%s > %s\n) or vector(0)", driftRatio(p, "fdatasync", tsel, csel, "> "+num(p.DriftFactor)), cohortTargetRule("fdatasync"), tsel, seconds(p.DriftFloor)), ""}), 5, 4)
	l.add(d, stat("SMART healthy / failing", "none",
		q{fmt.Sprintf(`count(diskcanary_smart_healthy%s == 1) or vector(0)`, sel), "healthy"},
		q{fmt.Sprintf(`count(diskcanary_smart_healthy%s == 0) or vector(0)`, sel), "failing"}), 5, 4)
	l.add(d, stat("Exporters up", "none", q{fmt.Sprintf(`count(diskcanary_build_info%s)`, sel), ""}), 5, 4)

	l.row(d, "Latency and drift")
	l.add(d, withUnit(table("Worst targets by fdatasync p99 (15m)",
		q{fmt.Sprintf(`topk(15, %s%s)`, quantileRule("fdatasync", "p99", "15m"), sel), ""}), "s"), 12, 9)
	l.add(d, table("Drift: p99 ÷ cohort median (fdatasync, 15m)",
		q{fmt.Sprintf(`topk(15, %s)`, driftRatio(p, "fdatasync", tsel, csel, "")), ""}), 12, 9)
	l.add(d, withUnit(table("Worst targets by random-read p99 (15m)",
		q{fmt.Sprintf(`topk(15, %s%s)`, quantileRule("read", "p99", "15m"), sel), ""}), "s"), 12, 9)
	l.add(d, table("Drift: p99 ÷ cohort median (read, 15m)",
		q{fmt.Sprintf(`topk(15, %s)`, driftRatio(p, "read", tsel, csel, "")), ""}), 12, 9)
	band := func(op string) Panel {
		return withLine(timeseries(fmt.Sprintf("%s p99 against its cohort band (p10 / p50 / p90 of peers)", op), "s",
			q{fmt.Sprintf(`quantile by (cohort, probe) (0.1, %s%s)`, cohortTargetRule(op), tsel), "p10 {{cohort}} {{probe}}"},
			q{fmt.Sprintf(`quantile by (cohort, probe) (0.5, %s%s)`, cohortTargetRule(op), tsel), "p50 {{cohort}} {{probe}}"},
			q{fmt.Sprintf(`quantile by (cohort, probe) (0.9, %s%s)`, cohortTargetRule(op), tsel), "p90 {{cohort}} {{probe}}"},
			q{fmt.Sprintf("%s%s\n> on (cohort, probe) group_left ()\n(%s * %s%s)", cohortTargetRule(op), tsel, num(p.DriftFactor), cohortMedianRule(op), csel), "outlier {{instance}} {{path}}"}),
			p.FdatasyncSlow.Seconds(), "red")
	}
	l.add(d, band("fdatasync"), 12, 9)
	l.add(d, band("read"), 12, 9)

	l.row(d, "SMART")
	l.add(d, Panel{Type: "histogram", Title: "Wear used (distribution)", Targets: targets(true, "", q{fmt.Sprintf(`diskcanary_smart_wear_used_ratio%s`, sel), "{{instance}} {{device}}"}),
		FieldConfig: map[string]any{"defaults": map[string]any{"unit": "percentunit", "min": 0, "max": 1}, "overrides": []any{}},
		Options:     map[string]any{"bucketSize": 0.05, "legend": map[string]any{"showLegend": false}}}, 8, 8)
	l.add(d, withUnit(table("Most worn disks", q{fmt.Sprintf(`topk(15, diskcanary_smart_wear_used_ratio%s)`, sel), ""}), "percentunit"), 8, 8)
	l.add(d, table("Disks with SMART problems",
		q{fmt.Sprintf(`diskcanary_smart_healthy%s == 0`, sel), ""},
		q{fmt.Sprintf(`diskcanary_smart_critical_warning%s > 0`, sel), ""},
		q{fmt.Sprintf(`increase(diskcanary_smart_media_errors_total%s[1d]) > 0`, sel), ""}), 8, 8)
	l.row(d, "Stalls")
	l.add(d, table("Stalled targets", q{fmt.Sprintf(`diskcanary_probe_stalled%s == 1`, sel), ""}), 12, 6)
	l.add(d, timeseries("Stalled targets over time", "none", q{fmt.Sprintf(`sum by (job) (diskcanary_probe_stalled%s)`, sel), "{{job}}"}), 12, 6)
	return d
}

// driftRatio is a target's p99 over its cohort median, for cohorts large
// enough to alert on; cmp optionally filters it.
func driftRatio(p Params, op, tsel, csel, cmp string) string {
	e := fmt.Sprintf("%s%s\n/ on (cohort, probe) group_left ()\n(%s%s and on (cohort, probe) %s >= %d)", cohortTargetRule(op), tsel, cohortMedianRule(op), csel, cohortMembersRule(op), p.DriftMinCohort)
	if cmp != "" {
		e = "(" + e + ") " + cmp
	}
	return e
}

func nodeDashboard(p Params) *Dashboard {
	d := newDashboard("diskcanary-node", "diskcanary / Node and disk (on-call)",
		"One instance and one physical disk: probe latency, iostat and SMART side by side. Open it from a diskcanary alert.")
	d.queryVar("job", "Job", "label_values(diskcanary_build_info, job)", false)
	d.queryVar("instance", "Instance", `label_values(diskcanary_build_info{job="$job"}, instance)`, false)
	d.queryVar("probe", "Probe", `label_values(diskcanary_probe_target_info{job="$job", instance="$instance"}, probe)`, true)
	d.queryVar("disk", "Physical disk", `label_values(diskcanary_disk_reads_completed_total{job="$job", instance="$instance"}, device)`, false)
	l := &layout{}
	ti := `{job="$job", instance="$instance", probe=~"$probe"}`
	ii := `{job="$job", instance="$instance"}`
	dd := `{job="$job", instance="$instance", device="$disk"}`
	// Probe targets on the chosen physical disk: the probe's device →
	// diskcanary_disk_parent_info → disk.
	onDisk := func(expr string) string {
		return fmt.Sprintf("%s\n* on (job, instance, device) group_left ()\nmax by (job, instance, device) (diskcanary_disk_parent_info{job=\"$job\", instance=\"$instance\", disk=\"$disk\"} or label_replace(diskcanary_disk_info%s, \"disk\", \"$1\", \"device\", \"(.+)\"))", expr, dd)
	}
	l.row(d, "State")
	l.add(d, stat("Stalled", "none", q{fmt.Sprintf(`diskcanary_probe_stalled%s`, ti), "{{probe}}"}), 6, 4)
	l.add(d, stat("Last cycle succeeded", "none", q{fmt.Sprintf(`diskcanary_probe_success%s`, ti), "{{probe}}"}), 6, 4)
	l.add(d, stat("Seconds since last cycle", "s", q{fmt.Sprintf(`time() - diskcanary_probe_last_run_timestamp_seconds%s`, ti), "{{probe}}"}), 6, 4)
	l.add(d, stat("SMART healthy", "none", q{fmt.Sprintf(`diskcanary_smart_healthy%s`, dd), "{{device}}"}), 6, 4)

	l.row(d, "Probe latency")
	l.add(d, heatmap("fdatasync latency (heatmap)", fmt.Sprintf(`sum by (le) (rate(diskcanary_fdatasync_duration_seconds_bucket%s[$__rate_interval]))`, ti)), 12, 8)
	l.add(d, withLine(timeseries("fdatasync p50 / p99 (5m) with the etcd 10 ms bar", "s",
		q{fmt.Sprintf(`%s%s`, quantileRule("fdatasync", "p99", "5m"), ti), "p99 {{probe}} {{path}}"},
		q{fmt.Sprintf(`%s%s`, quantileRule("fdatasync", "p50", "5m"), ti), "p50 {{probe}} {{path}}"}), p.FdatasyncSlow.Seconds(), "red"), 12, 8)
	l.add(d, heatmap("random read latency (heatmap)", fmt.Sprintf(`sum by (le) (rate(diskcanary_read_duration_seconds_bucket%s[$__rate_interval]))`, ti)), 12, 8)
	l.add(d, timeseries("random read and write() p50 / p99 (5m)", "s",
		q{fmt.Sprintf(`%s%s`, quantileRule("read", "p99", "5m"), ti), "read p99 {{probe}}"},
		q{fmt.Sprintf(`%s%s`, quantileRule("read", "p50", "5m"), ti), "read p50 {{probe}}"},
		q{fmt.Sprintf(`%s%s`, quantileRule("write", "p99", "5m"), ti), "write() p99 {{probe}}"}), 12, 8)
	l.add(d, timeseries("Probe targets on this disk: fdatasync p99 (15m)", "s",
		q{onDisk(fmt.Sprintf(`%s%s`, quantileRule("fdatasync", "p99", "15m"), ii)), "{{probe}} {{path}} ({{device}})"}), 12, 7)
	l.add(d, timeseries("Probe failures by reason", "none",
		q{fmt.Sprintf(`sum by (probe, reason) (increase(diskcanary_probe_failures_total%s[$__rate_interval]))`, ti), "{{probe}} {{reason}}"}), 12, 7)
	l.add(d, timeseries("Probe write cost (bytes per day, page-granular)", "bytes",
		q{fmt.Sprintf(`rate(diskcanary_probe_written_bytes_total%s[$__rate_interval]) * 86400`, ti), "{{probe}}"}), 12, 7)
	l.add(d, timeseries("Probe cycles per minute (runs, failures)", "none",
		q{fmt.Sprintf(`rate(diskcanary_probe_runs_total%s[$__rate_interval]) * 60`, ti), "runs {{probe}}"},
		q{fmt.Sprintf(`sum by (probe) (rate(diskcanary_probe_failures_total%s[$__rate_interval])) * 60`, ti), "failures {{probe}}"}), 12, 7)

	l.row(d, "Whose fault: the probe beside its device (15m)")
	for _, a := range attributedOps {
		l.add(d, withLine(timeseries(fmt.Sprintf("%s p99 beside its device's %s latency", a.op, strings.ReplaceAll(a.requests, "|", "/")), "s",
			q{fmt.Sprintf(`%s%s`, quantileRule(a.op, "p99", "15m"), ti), "probe p99 {{probe}} {{path}}"},
			q{fmt.Sprintf(`%s{job="$job", instance="$instance", probe=~"$probe", op="%s"}`, ruleTargetDeviceLat, a.op), "device {{device}} ({{source}})"}), a.slow(p).Seconds(), "red"), 12, 7)
	}
	l.add(d, table("Verdict per probe target: device (its requests are slow), stack (they are not), none (not slow)",
		q{fmt.Sprintf(`%s%s`, ruleAttribution, ti), ""}), 24, 4)

	// Devices on the chosen disk: the disk itself, its partitions and the
	// dm/md devices over it (diskcanary_disk_parent_info maps a whole disk
	// to itself), so its filesystems' errors show beside its own.
	onDiskDevices := `on (job, instance, device) diskcanary_disk_parent_info{job="$job", instance="$instance", disk="$disk"}`
	l.row(d, "Kernel errors on this disk and its filesystems")
	l.add(d, timeseries("Disk errors the kernel logged, by kind", "none",
		q{fmt.Sprintf(`sum by (kind) (increase(diskcanary_disk_errors_total%s[$__rate_interval]))`, dd), "{{kind}}"}), 8, 7)
	l.add(d, timeseries("Filesystem errors the kernel logged, by device and kind", "none",
		q{fmt.Sprintf("sum by (device, fstype, kind) (increase(diskcanary_filesystem_errors_total%s[$__rate_interval]) and %s)", ii, onDiskDevices), "{{device}} {{fstype}} {{kind}}"}), 8, 7)
	l.add(d, stat("Filesystems the kernel made read-only", "none",
		q{fmt.Sprintf("sum(diskcanary_filesystem_readonly%s and %s) or vector(0)", ii, onDiskDevices), ""}), 8, 7)
	l.add(d, table("Exact counters: SCSI commands failed and timed out (SCSI/SATA disks), errors the filesystems recorded on disk",
		q{fmt.Sprintf(`diskcanary_disk_scsi_io_errors_total%s`, dd), ""},
		q{fmt.Sprintf(`diskcanary_disk_scsi_io_timeouts_total%s`, dd), ""},
		q{fmt.Sprintf("diskcanary_filesystem_recorded_errors%s and %s", ii, onDiskDevices), ""}), 24, 5)

	w := p.IostatWindow
	r := func(name string) string { return iostatRuleName(name, w) + dd }
	l.row(d, "iostat -dx (recording rules, "+promDuration(w)+" windows)")
	l.add(d, timeseries("r/s, w/s", "iops", q{r("reads_completed:rate"), "r/s"}, q{r("writes_completed:rate"), "w/s"}), 8, 7)
	l.add(d, timeseries("r_await, w_await", "s", q{r("read_await_seconds:rate"), "r_await"}, q{r("write_await_seconds:rate"), "w_await"}), 8, 7)
	l.add(d, timeseries("%util", "percentunit", q{r("utilization:ratio_rate"), "%util"}), 8, 7)
	l.add(d, timeseries("aqu-sz", "short", q{r("queue_size:rate"), "aqu-sz"}), 8, 7)
	l.add(d, timeseries("rareq-sz, wareq-sz", "bytes", q{r("read_request_size_bytes:rate"), "rareq-sz"}, q{r("write_request_size_bytes:rate"), "wareq-sz"}), 8, 7)
	l.add(d, timeseries("rkB/s, wkB/s", "Bps", q{r("read_bytes:rate"), "read"}, q{r("written_bytes:rate"), "written"}), 8, 7)

	l.row(d, "SMART of this disk")
	l.add(d, table("SMART",
		q{fmt.Sprintf(`diskcanary_smart_device_info%s`, dd), ""},
		q{fmt.Sprintf(`diskcanary_smart_healthy%s`, dd), ""},
		q{fmt.Sprintf(`diskcanary_smart_temperature_celsius%s`, dd), ""},
		q{fmt.Sprintf(`diskcanary_smart_wear_used_ratio%s`, dd), ""},
		q{fmt.Sprintf(`diskcanary_smart_media_errors_total%s`, dd), ""},
		q{fmt.Sprintf(`diskcanary_smart_reallocated_sectors%s`, dd), ""},
		q{fmt.Sprintf(`diskcanary_smart_pending_sectors%s`, dd), ""},
		q{fmt.Sprintf(`diskcanary_smart_available_spare_ratio%s`, dd), ""},
		q{fmt.Sprintf(`time() - diskcanary_smart_last_success_timestamp_seconds%s`, dd), ""}), 16, 6)
	l.add(d, timeseries("Temperature", "celsius", q{fmt.Sprintf(`diskcanary_smart_temperature_celsius%s`, dd), "{{device}}"}), 8, 6)
	l.add(d, table("Disk", q{fmt.Sprintf(`diskcanary_disk_info%s`, dd), ""}), 24, 4)
	return d
}

func etcdDashboard(p Params) *Dashboard {
	d := newDashboard("diskcanary-etcd", "diskcanary / etcd",
		"Is it the disk? One verdict per etcd member (disk, contention, network, cpu, etcd, healthy) from etcd's own metrics and the diskcanary canary on the same node, the evidence under it, and whether the disk meets etcd's bar.")
	d.queryVar("job", "diskcanary job", "label_values(diskcanary_build_info, job)", false)
	d.queryVar("instance", "Instance", `label_values(diskcanary_probe_target_info{job="$job", kind="wal"}, instance)`, true)
	node := p.EtcdJoinLabels[len(p.EtcdJoinLabels)-1]
	d.queryVar("node", "etcd member's node", fmt.Sprintf("label_values(%s, %s)", ruleEtcdVerdict, node), true)
	l := &layout{}
	ti := `{job="$job", instance=~"$instance"}`
	ni := fmt.Sprintf(`{%s=~"$node"}`, node)
	leg := "{{" + node + "}}"
	l.row(d, "Verdict: is it the disk?")
	l.add(d, table("Verdict per etcd member (DiskcanaryEtcdDegraded after "+promDuration(p.EtcdDegradedFor)+")",
		q{fmt.Sprintf("%s%s", ruleEtcdVerdict, ni), ""}), 8, 8)
	l.add(d, table("Evidence per member ("+promDuration(p.EtcdWindow)+")",
		q{fmt.Sprintf("%s%s", ruleEtcdWALFsyncP99, ni), ""},
		q{fmt.Sprintf("%s%s", ruleEtcdCanaryP99, ni), ""},
		q{fmt.Sprintf("%s%s", ruleEtcdCommitP99, ni), ""},
		q{fmt.Sprintf("%s%s", ruleEtcdPeerRTTP99, ni), ""},
		q{fmt.Sprintf("%s%s", ruleEtcdSymptoms, ni), ""},
		q{fmt.Sprintf("%s%s", ruleEtcdCanaryBusy, ni), ""},
		q{fmt.Sprintf("%s%s", ruleEtcdCPUPressure, ni), ""}), 16, 8)
	l.row(d, "The evidence")
	l.add(d, withLine(timeseries("etcd WAL fsync p99 and the canary's fdatasync p99 ("+promDuration(p.EtcdWindow)+")", "s",
		q{fmt.Sprintf("%s%s", ruleEtcdWALFsyncP99, ni), "etcd " + leg},
		q{fmt.Sprintf("%s%s", ruleEtcdCanaryP99, ni), "canary " + leg}), p.FdatasyncSlow.Seconds(), "red"), 12, 8)
	l.add(d, withLine(timeseries("etcd backend commit p99", "s",
		q{fmt.Sprintf("%s%s", ruleEtcdCommitP99, ni), leg}), p.EtcdCommitSlow.Seconds(), "red"), 12, 8)
	l.add(d, withLine(timeseries("Worst peer round-trip p99", "s",
		q{fmt.Sprintf("%s%s", ruleEtcdPeerRTTP99, ni), leg}), p.EtcdPeerRTTSlow.Seconds(), "red"), 12, 8)
	l.add(d, timeseries("Leader changes, slow applies, heartbeat send failures (increase)", "none",
		q{fmt.Sprintf(`sum by (%s) (increase(etcd_server_leader_changes_seen_total{%s, %s=~"$node"}[%s]))`, node, p.EtcdSelector, node, promDuration(p.EtcdWindow)), "leader changes " + leg},
		q{fmt.Sprintf(`sum by (%s) (increase(etcd_server_slow_apply_total{%s, %s=~"$node"}[%s]))`, node, p.EtcdSelector, node, promDuration(p.EtcdWindow)), "slow applies " + leg},
		q{fmt.Sprintf(`sum by (%s) (increase(etcd_server_heartbeat_send_failures_total{%s, %s=~"$node"}[%s]))`, node, p.EtcdSelector, node, promDuration(p.EtcdWindow)), "heartbeat failures " + leg}), 12, 8)
	l.add(d, withLine(timeseries("Canary's disk utilisation", "percentunit",
		q{fmt.Sprintf("%s%s", ruleEtcdCanaryBusy, ni), leg}), p.EtcdBusyUtilization, "orange"), 8, 8)
	l.add(d, withLine(timeseries("CPU pressure (some task waiting)", "percentunit",
		q{fmt.Sprintf("%s%s", ruleEtcdCPUPressure, ni), leg}), p.EtcdCPUPressure, "orange"), 8, 8)
	l.add(d, timeseries("etcd process CPU (cores)", "none",
		q{fmt.Sprintf("%s%s", ruleEtcdCPU, ni), leg}), 8, 8)
	l.row(d, "The etcd bar: WAL fdatasync p99 < "+human(p.FdatasyncSlow))
	l.add(d, stat("WAL targets meeting the bar (15m p99)", "percentunit",
		q{fmt.Sprintf("(count(%[1]s%[2]s <= %[3]s) or vector(0))\n/\ncount(%[1]s%[2]s)", quantileRule("fdatasync", "p99", "15m"), ti, seconds(p.FdatasyncSlow)), ""}), 6, 5)
	l.add(d, stat("Worst fdatasync p99 (15m)", "s", q{fmt.Sprintf(`max(%s%s)`, quantileRule("fdatasync", "p99", "15m"), ti), ""}), 6, 5)
	l.add(d, stat("Samples behind the p99 (15m, fewest)", "none", q{fmt.Sprintf(`min(%s%s)`, samplesRule("fdatasync", "15m"), ti), ""}), 6, 5)
	l.add(d, stat("Stalled WAL targets", "none", q{fmt.Sprintf(`count(diskcanary_probe_stalled%s == 1) or vector(0)`, ti), ""}), 6, 5)
	l.add(d, withLine(timeseries("diskcanary fdatasync p99 (15m) and the incident levels", "s",
		q{fmt.Sprintf(`%s%s`, quantileRule("fdatasync", "p99", "15m"), ti), "{{instance}} {{path}}"}), p.FdatasyncIncidentWarning.Seconds(), "orange"), 24, 8)
	return d
}
