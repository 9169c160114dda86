package rulegen

import (
	"fmt"
	"strings"
)

// The etcd verdict: "is it the disk?" answered per etcd member from etcd's
// own metrics and the canary on the same node. etcd's series and
// diskcanary's meet on the node identity (Params.EtcdJoinLabels, "node":
// what deploy/kubernetes and the README's scrape configs relabel the pod's
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
