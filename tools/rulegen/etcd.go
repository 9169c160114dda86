package rulegen

import (
	"fmt"
	"strings"
)

// The etcd verdict: "is it the disk?" answered per etcd member from etcd's
// own metrics and the canary on the same node. etcd's series and
// diskcanary's meet on the node identity (Params.EtcdJoinLabels, "node":
// what deploy/kubernetes and docs/alerts.md's scrape configs relabel the pod's
// node name into); every rule here is keyed by those labels alone.

// etcd rule names, one place.
const (
	ruleEtcdWALFsyncP99 = "node:etcd_disk_wal_fsync_duration_seconds:p99"
	ruleEtcdCommitP99   = "node:etcd_disk_backend_commit_duration_seconds:p99"
	ruleEtcdPeerRTTP99  = "node:etcd_network_peer_round_trip_time_seconds:p99_max"
	ruleEtcdSymptoms    = "node:etcd_server_trouble:increase"
	ruleEtcdCPU         = "node:etcd_process_cpu_seconds:rate"
	ruleEtcdCanaryP99   = "node:diskcanary_fdatasync_duration_seconds:p99_max"
	ruleEtcdCanaryBusy  = "node:diskcanary_wal_device_utilization:max"
	ruleEtcdCPUPressure = "node:diskcanary_pressure_cpu_waiting:ratio"
	ruleEtcdVerdict     = "node:diskcanary_etcd_verdict:info"
)

// etcd verdict causes.
const (
	causeDisk       = "disk"       // etcd's fsync and the canary's both slow, the disk not busy
	causeContention = "contention" // both slow while the disk is busy (etcd or another writer)
	causeNetwork    = "network"    // peer round trip slow, disk fine
	causeCPU        = "cpu"        // etcd in trouble, disk and network fine, the node short of CPU
	causeEtcd       = "etcd"       // etcd's own fsync slow with the canary fine, or trouble with nothing else to blame
	causeHealthy    = "healthy"
)

// etcdTrouble are etcd's counters of a member in trouble that is not (only)
// a slow fsync: applies over 100 ms, heartbeats it could not send in time,
// leader elections it saw.
var etcdTrouble = []string{"etcd_server_slow_apply_total", "etcd_server_heartbeat_send_failures_total", "etcd_server_leader_changes_seen_total"}

// etcdTroubleExpr sums the trouble counters' increases per node. Each is
// tagged with its name first: increase() drops the name, and `or` would
// keep only the first of series with equal labels.
func (p Params) etcdTroubleExpr() string {
	var parts []string
	for _, c := range etcdTrouble {
		parts = append(parts, fmt.Sprintf(`label_replace(increase(%s{%s}[%s]), "counter", %q, "", "")`, c, p.EtcdSelector, promDuration(p.EtcdWindow), c))
	}
	return fmt.Sprintf("sum by (%s) (\n  %s\n)", p.etcdJoin(), strings.Join(parts, "\n  or\n  "))
}

func (p Params) etcdJoin() string { return p.withCluster(p.EtcdJoinLabels...) }

func etcdRecording(p Params) Group {
	g := Group{Name: "diskcanary.etcd.recording"}
	j, sel, w := p.etcdJoin(), p.EtcdSelector, promDuration(p.EtcdWindow)
	// Several etcd series on one node (scraped twice, or two clusters'
	// members) take the worst.
	quantile := func(metric string) string {
		return fmt.Sprintf("max by (%[1]s) (histogram_quantile(0.99, sum by (job, instance, %[1]s, le) (rate(%[2]s_bucket{%[3]s}[%[4]s]))))", j, metric, sel, w)
	}
	g.Rules = append(g.Rules,
		Rule{Record: ruleEtcdWALFsyncP99, Expr: quantile("etcd_disk_wal_fsync_duration_seconds")},
		Rule{Record: ruleEtcdCommitP99, Expr: quantile("etcd_disk_backend_commit_duration_seconds")},
		// One slow peer is enough: the worst peer's round-trip p99.
		Rule{Record: ruleEtcdPeerRTTP99, Expr: fmt.Sprintf("max by (%[1]s) (histogram_quantile(0.99, sum by (job, instance, %[1]s, To, le) (rate(etcd_network_peer_round_trip_time_seconds_bucket{%[2]s}[%[3]s]))))", j, sel, w)},
		Rule{Record: ruleEtcdSymptoms, Expr: p.etcdTroubleExpr()},
		Rule{Record: ruleEtcdCPU, Expr: fmt.Sprintf("sum by (%s) (rate(process_cpu_seconds_total{%s}[%s]))", j, sel, w)},
		// The canary: the worst WAL target on the node over the same
		// window, behind the incident sample floor.
		Rule{Record: ruleEtcdCanaryP99, Expr: fmt.Sprintf("max by (%[1]s) (\n  histogram_quantile(0.99, sum by (%[2]s, le) (rate(diskcanary_fdatasync_duration_seconds_bucket[%[3]s])))\n  and on (%[2]s)\n  sum by (%[2]s) (increase(diskcanary_fdatasync_duration_seconds_count[%[3]s])) >= %[4]d\n)", j, p.target(), w, p.MinIncidentSamples)},
		// How busy the WAL canary's device was (iostat's %util): its own,
		// else the busiest disk under it (a partition's or dm device's
		// stats are off by default; diskcanary_disk_parent_info joins).
		Rule{Record: ruleEtcdCanaryBusy, Expr: fmt.Sprintf(`max by (%[1]s) (
  %[2]s
  * on (%[3]s, device) group_left (%[4]s)
  max by (%[3]s, device, %[4]s) (diskcanary_probe_target_info{kind="wal"})
)`, j, p.deviceUtilization(w), p.instanceLabels(), strings.Join(p.EtcdJoinLabels, ", "))},
		Rule{Record: ruleEtcdCPUPressure, Expr: fmt.Sprintf("max by (%s) (rate(diskcanary_pressure_cpu_waiting_seconds_total[%s]))", j, w)},
	)

	on := "on (" + j + ")"
	set := func(expr string) string { return fmt.Sprintf("group by (%s) (%s)", j, expr) }
	etcdSlow := set(fmt.Sprintf("%s > %s or %s > %s", ruleEtcdWALFsyncP99, seconds(p.FdatasyncSlow), ruleEtcdCommitP99, seconds(p.EtcdCommitSlow)))
	canary := set(ruleEtcdCanaryP99 + " >= 0")
	canarySlow := set(fmt.Sprintf("%s > %s", ruleEtcdCanaryP99, seconds(p.FdatasyncSlow)))
	busy := set(fmt.Sprintf("%s >= %s", ruleEtcdCanaryBusy, num(p.EtcdBusyUtilization)))
	netSlow := set(fmt.Sprintf("%s > %s", ruleEtcdPeerRTTP99, seconds(p.EtcdPeerRTTSlow)))
	trouble := set(ruleEtcdSymptoms + " > 0")
	cpuShort := set(fmt.Sprintf("%s >= %s", ruleEtcdCPUPressure, num(p.EtcdCPUPressure)))
	members := set(fmt.Sprintf("etcd_disk_wal_fsync_duration_seconds_count{%s}", sel))
	verdicts := []struct{ cause, expr string }{
		{causeDisk, fmt.Sprintf("%s\nand %s\n%s\nunless %s\n%s", etcdSlow, on, canarySlow, on, busy)},
		{causeContention, fmt.Sprintf("%s\nand %s\n%s\nand %s\n%s", etcdSlow, on, canarySlow, on, busy)},
		// Slow fsyncs the canary beside it does not see, or trouble with
		// disk, network and CPU fine: etcd's own load (expensive
		// requests, defrag, compaction), or etcd on another disk.
		{causeEtcd, fmt.Sprintf("(\n%s\nand %s\n%s\nunless %s\n%s\n)\nor\n(\n%s\nunless %s\n%s\nunless %s\n%s\nunless %s\n%s\n)",
			etcdSlow, on, canary, on, canarySlow, trouble, on, etcdSlow, on, netSlow, on, cpuShort)},
		{causeNetwork, fmt.Sprintf("%s\nunless %s\n%s", netSlow, on, etcdSlow)},
		{causeCPU, fmt.Sprintf("%s\nand %s\n%s\nunless %s\n%s\nunless %s\n%s", trouble, on, cpuShort, on, etcdSlow, on, netSlow)},
		{causeHealthy, fmt.Sprintf("%s\nunless %s\n%s\nunless %s\n%s\nunless %s\n%s", members, on, etcdSlow, on, netSlow, on, trouble)},
	}
	for _, v := range verdicts {
		g.Rules = append(g.Rules, Rule{Record: ruleEtcdVerdict, Labels: map[string]string{"cause": v.cause}, Expr: v.expr})
	}
	return g
}

// etcdEvidence renders the figures behind a verdict into an alert text:
// the recorded values for the alert's node, each only when present.
func (p Params) etcdEvidence() string {
	var sel, args []string
	for _, l := range strings.Split(p.etcdJoin(), ", ") {
		sel = append(sel, l+"=%q")
		args = append(args, "$labels."+l)
	}
	q := func(rule, what, format string) string {
		return fmt.Sprintf(`{{ with printf "%s{%s}" %s | query }}{{ with first . }} %s {{ .Value | %s }};{{ end }}{{ end }}`,
			rule, strings.Join(sel, ","), strings.Join(args, " "), what, format)
	}
	return " Evidence (" + promDuration(p.EtcdWindow) + "):" +
		q(ruleEtcdWALFsyncP99, "etcd WAL fsync p99", "humanizeDuration") +
		q(ruleEtcdCanaryP99, "canary fdatasync p99", "humanizeDuration") +
		q(ruleEtcdCommitP99, "etcd backend commit p99", "humanizeDuration") +
		q(ruleEtcdPeerRTTP99, "worst peer round-trip p99", "humanizeDuration") +
		q(ruleEtcdSymptoms, "slow applies, heartbeat failures and leader changes", `printf "%.0f"`) +
		q(ruleEtcdCanaryBusy, "canary disk busy", "humanizePercentage") +
		q(ruleEtcdCPUPressure, "CPU pressure", "humanizePercentage")
}

// etcdCauseText is the verdict in words, by cause.
func (p Params) etcdCauseText() string {
	return `{{ if eq $labels.cause "disk" }}the disk: etcd's WAL fsync (or backend commit) and diskcanary's canary on the same node are both slow, and the disk is not busy — the storage itself (device, its controller, or the stack above it: see the canary's own alerts for which).` +
		`{{ else if eq $labels.cause "contention" }}contention on the disk: etcd's fsync and the canary are both slow while the canary's disk is busy (` + fmt.Sprintf("%g", p.EtcdBusyUtilization*100) + ` %+ utilised) — etcd's own writes or another workload on the same disk.` +
		`{{ else if eq $labels.cause "network" }}the network: the round trip to a peer is slow (p99 over ` + human(p.EtcdPeerRTTSlow) + `) while etcd's disk is fine.` +
		`{{ else if eq $labels.cause "cpu" }}CPU: etcd reports slow applies, missed heartbeats or leader changes with disk and network fine, and tasks on the node wait for a CPU ` + fmt.Sprintf("%g", p.EtcdCPUPressure*100) + ` %+ of the time.` +
		`{{ else }}etcd itself: its own fsync is slow while the canary on this node is fine, or it reports trouble with disk, network and CPU fine — etcd's own load (large requests, defragmentation, compaction), or etcd's data on a different disk than the canary's.{{ end }}`
}

func etcdAlerts(p Params) Group {
	g := Group{Name: "diskcanary.etcd.alerts"}
	node := "{{ $labels." + p.EtcdJoinLabels[len(p.EtcdJoinLabels)-1] + " }}"
	g.Rules = append(g.Rules,
		p.alert("DiskcanaryEtcdDegraded", "warning",
			fmt.Sprintf(`%s{cause!="%s"}`, ruleEtcdVerdict, causeHealthy), p.EtcdDegradedFor,
			"etcd member on "+node+" degraded: {{ $labels.cause }}",
			"The etcd member on "+node+" is degraded. Cause: "+p.etcdCauseText()+p.etcdEvidence()),
		// A canary told which etcd data directory it stands in for
		// (etcd_data_dir) that measures another device.
		p.alert("DiskcanaryEtcdCanaryMisplaced", "warning",
			"diskcanary_probe_etcd_data_dir_info\nunless on ("+p.withCluster("job", "instance", "probe", "device")+")\ndiskcanary_probe_target_info", p.EtcdDegradedFor,
			"the etcd canary measures another disk than etcd's",
			"Probe {{ $labels.probe }} on {{ $labels.instance }} stands in for etcd's data directory {{ $labels.etcd_data_dir }}, which is on {{ with $labels.device }}{{ . }}{{ else }}a device diskcanary cannot resolve{{ end }}, but it measures another device: its latency and the etcd verdict say nothing about etcd's disk. Move the probe's dir to a sibling of etcd's data directory."),
		// etcd on a node whose canary measures nothing: the verdict
		// cannot tell disk from etcd there.
		p.alert("DiskcanaryEtcdWithoutCanary", "info",
			fmt.Sprintf("group by (%[1]s) (etcd_disk_wal_fsync_duration_seconds_count{%[2]s})\nunless on (%[1]s)\ngroup by (%[1]s) (diskcanary_probe_target_info{kind=\"wal\"})", p.etcdJoin(), p.EtcdSelector), p.EtcdDegradedFor,
			"etcd member on "+node+" has no diskcanary WAL probe beside it",
			"An etcd member runs on "+node+" but no diskcanary WAL probe there shares its node label ("+p.etcdJoin()+"): the etcd verdict cannot tell its disk from etcd. Run diskcanary on the node with a WAL probe on etcd's filesystem and give both scrape jobs the same "+p.etcdJoin()+" label."),
	)
	return p.linkDashboard(g, dashboardEtcd, "node="+p.EtcdJoinLabels[len(p.EtcdJoinLabels)-1])
}

// etcdMember is one node of the etcd verdict's cases: an etcd member and
// the diskcanary beside it, each signal fast or slow.
type etcdMember struct {
	node                         string
	etcdSlow, canarySlow, noWAL  bool
	busy, rttSlow, cpuShort      bool
	slowApplies, leaderElections bool
}

// Every histogram below grows by 100 samples a minute, all in one bucket,
// so each p99 is that bucket's lower edge plus 0.99 of its width.
func (m etcdMember) series(n int) []series {
	etcd := fmt.Sprintf(`job="etcd", instance="%s:2379", node="%s"`, m.node, m.node)
	dc := fmt.Sprintf(`job="diskcanary", instance="%s:9742", node="%s"`, m.node, m.node)
	wal := dc + `, probe="wal", path="/var/lib/etcd-canary", device="sda1"`
	pick := func(slow bool, fast, slowB []bucket) []bucket {
		if slow {
			return slowB
		}
		return fast
	}
	counter := func(on bool) string {
		if on {
			return fmt.Sprintf("0+1x%d", n) // 5 per 5 minutes
		}
		return fmt.Sprintf("0x%d", n)
	}
	util, pressure := "0+6x", "0+3x" // 0.1 s per second: 10 %, 5 %
	if m.busy {
		util = "0+48x" // 80 %
	}
	if m.cpuShort {
		pressure = "0+30x" // 50 %
	}
	out := concat(
		// fast p99 1.99 ms, slow 31.84 ms
		hist("etcd_disk_wal_fsync_duration_seconds", etcd, n, pick(m.etcdSlow, []bucket{{"0.001", 0}, {"0.002", 100}}, []bucket{{"0.016", 0}, {"0.032", 100}})...),
		// 3.98 ms
		hist("etcd_disk_backend_commit_duration_seconds", etcd, n, bucket{"0.002", 0}, bucket{"0.004", 100}),
		// fast 1.592 ms, slow 203.776 ms
		hist("etcd_network_peer_round_trip_time_seconds", etcd+`, To="peer"`, n, pick(m.rttSlow, []bucket{{"0.0008", 0}, {"0.0016", 100}}, []bucket{{"0.1024", 0}, {"0.2048", 100}})...),
		s("etcd_server_slow_apply_total{"+etcd+"}", counter(m.slowApplies)),
		s("etcd_server_leader_changes_seen_total{"+etcd+"}", counter(m.leaderElections)),
		s("etcd_server_heartbeat_send_failures_total{"+etcd+"}", counter(false)),
		s("diskcanary_pressure_cpu_waiting_seconds_total{"+dc+"}", fmt.Sprintf("%s%d", pressure, n)),
	)
	if m.noWAL {
		return out
	}
	return concat(out,
		// fast p99 0.995 ms, slow 49.75 ms
		hist(fdsMetric, wal, n, pick(m.canarySlow, []bucket{{"0.0005", 0}, {"0.001", 100}}, []bucket{{"0.025", 0}, {"0.05", 100}})...),
		s(`diskcanary_probe_target_info{`+dc+`, probe="wal", kind="wal", path="/var/lib/etcd-canary", device="sda1"}`, fmt.Sprintf("1x%d", n)),
		s(`diskcanary_disk_parent_info{`+dc+`, device="sda1", disk="sda"}`, fmt.Sprintf("1x%d", n)),
		s(`diskcanary_disk_io_time_seconds_total{`+dc+`, device="sda"}`, fmt.Sprintf("%s%d", util, n)),
	)
}

func etcdCases() []alertCase {
	const n = 40
	members := []etcdMember{
		{node: "n1", etcdSlow: true, canarySlow: true},
		{node: "n2", etcdSlow: true, canarySlow: true, busy: true},
		{node: "n3", rttSlow: true, leaderElections: true},
		{node: "n4", slowApplies: true, cpuShort: true},
		{node: "n5", etcdSlow: true},
		{node: "n6", slowApplies: true},
		{node: "n7"},
		{node: "n8", etcdSlow: true, noWAL: true},
	}
	var all []series
	for _, m := range members {
		all = append(all, m.series(n)...)
	}
	verdict := func(node, cause string) expSample {
		return expSample{Labels: fmt.Sprintf(`%s{cause="%s", node="%s"}`, ruleEtcdVerdict, cause, node), Value: 1}
	}
	one := func(m etcdMember) []series { return m.series(n) }
	return []alertCase{
		{name: "one verdict per member: disk, contention, network, cpu, etcd twice, healthy; none without a canary", input: all,
			expr: []exprTest{
				{Expr: ruleEtcdVerdict, EvalTime: "20m", ExpSamples: []expSample{
					verdict("n1", causeDisk), verdict("n2", causeContention), verdict("n3", causeNetwork), verdict("n4", causeCPU),
					verdict("n5", causeEtcd), verdict("n6", causeEtcd), verdict("n7", causeHealthy)}},
				near(ruleEtcdWALFsyncP99+`{node="n1"}`, "20m", `node="n1"`, 0.03184),
				near(ruleEtcdCanaryP99+`{node="n1"}`, "20m", `node="n1"`, 0.04975),
				near(ruleEtcdPeerRTTP99+`{node="n3"}`, "20m", `node="n3"`, 0.203776),
				near(ruleEtcdCanaryBusy+`{node="n2"}`, "20m", `node="n2"`, 0.8),
				near(ruleEtcdCPUPressure+`{node="n4"}`, "20m", `node="n4"`, 0.5),
				near(ruleEtcdSymptoms+`{node="n6"}`, "20m", `node="n6"`, 5),
			}},
		{name: "etcd and its canary slow, the disk idle: degraded, cause disk", alert: "DiskcanaryEtcdDegraded", at: "20m",
			input: one(etcdMember{node: "n1", etcdSlow: true, canarySlow: true}),
			fire:  []string{`node="n1", cause="disk"`},
			description: "The etcd member on n1 is degraded. Cause: the disk: etcd's WAL fsync (or backend commit) and diskcanary's canary on the same node are both slow, and the disk is not busy — the storage itself (device, its controller, or the stack above it: see the canary's own alerts for which)." +
				" Evidence (5m): etcd WAL fsync p99 31.84ms; canary fdatasync p99 49.75ms; etcd backend commit p99 3.98ms; worst peer round-trip p99 1.592ms; slow applies, heartbeat failures and leader changes 0; canary disk busy 10%; CPU pressure 5%;"},
		{name: "the peer link slow: degraded, cause network", alert: "DiskcanaryEtcdDegraded", at: "20m",
			input: one(etcdMember{node: "n3", rttSlow: true, leaderElections: true}),
			fire:  []string{`node="n3", cause="network"`},
			description: "The etcd member on n3 is degraded. Cause: the network: the round trip to a peer is slow (p99 over 50 ms) while etcd's disk is fine." +
				" Evidence (5m): etcd WAL fsync p99 1.99ms; canary fdatasync p99 995us; etcd backend commit p99 3.98ms; worst peer round-trip p99 203.8ms; slow applies, heartbeat failures and leader changes 5; canary disk busy 10%; CPU pressure 5%;"},
		{name: "all fine: silent", alert: "DiskcanaryEtcdDegraded", at: "20m", input: one(etcdMember{node: "n7"})},
		{name: "slow for 4 minutes only: not yet", alert: "DiskcanaryEtcdDegraded", at: "5m",
			input: one(etcdMember{node: "n1", etcdSlow: true, canarySlow: true})},
		{name: "the canary on sdb, etcd's data on sda1", alert: "DiskcanaryEtcdCanaryMisplaced", at: "20m",
			input: concat(
				s(`diskcanary_probe_target_info{job="diskcanary", instance="n1:9742", probe="wal", kind="wal", path="/srv/canary", device="sdb"}`, "1x30"),
				s(`diskcanary_probe_etcd_data_dir_info{job="diskcanary", instance="n1:9742", probe="wal", etcd_data_dir="/var/lib/etcd", device="sda1"}`, "1x30")),
			fire:        []string{`job="diskcanary", instance="n1:9742", probe="wal", etcd_data_dir="/var/lib/etcd", device="sda1"`},
			description: "Probe wal on n1:9742 stands in for etcd's data directory /var/lib/etcd, which is on sda1, but it measures another device: its latency and the etcd verdict say nothing about etcd's disk. Move the probe's dir to a sibling of etcd's data directory."},
		{name: "the canary beside etcd on sda1: silent", alert: "DiskcanaryEtcdCanaryMisplaced", at: "20m",
			input: concat(
				s(`diskcanary_probe_target_info{job="diskcanary", instance="n1:9742", probe="wal", kind="wal", path="/var/lib/etcd-canary", device="sda1"}`, "1x30"),
				s(`diskcanary_probe_etcd_data_dir_info{job="diskcanary", instance="n1:9742", probe="wal", etcd_data_dir="/var/lib/etcd", device="sda1"}`, "1x30"))},
		{name: "etcd with no canary on its node", alert: "DiskcanaryEtcdWithoutCanary", at: "20m",
			input: concat(one(etcdMember{node: "n8", noWAL: true}), one(etcdMember{node: "n7"})),
			fire:  []string{`node="n8"`}},
		{name: "etcd with a canary beside it: silent", alert: "DiskcanaryEtcdWithoutCanary", at: "20m", input: one(etcdMember{node: "n7"})},
	}
}
