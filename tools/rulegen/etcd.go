package rulegen

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// The etcd verdict: "is it the disk?" answered per etcd member from etcd's
// own metrics and the canary on the same node. etcd's series and
// diskcanary's meet on the node identity (Params.EtcdJoinLabels, "node":
// what deploy/kubernetes and docs/alerts.md's scrape configs relabel the pod's
// node name into); every rule here is keyed by those labels alone. Each
// cause that holds is its own series (and alert): a slow disk does not hide
// a slow network or a short CPU beside it.

// etcd rule names, one place.
const (
	ruleEtcdWALFsyncP99       = "node:etcd_disk_wal_fsync_duration_seconds:p99"
	ruleEtcdCommitP99         = "node:etcd_disk_backend_commit_duration_seconds:p99"
	ruleEtcdPeerRTTP99        = "node:etcd_network_peer_round_trip_time_seconds:p99_max"
	ruleEtcdPeerRTTBaseline   = "node:etcd_network_peer_round_trip_time_seconds:p99_max_median"
	ruleEtcdPeerFailures      = "node:etcd_network_peer_failures:increase"
	ruleEtcdSlowApplies       = "node:etcd_server_slow_apply:rate"
	ruleEtcdLeaderChanges     = "node:etcd_server_leader_changes_seen:increase"
	ruleEtcdHeartbeatFailures = "node:etcd_server_heartbeat_send_failures:increase"
	ruleEtcdCPU               = "node:etcd_process_cpu_seconds:rate"
	ruleEtcdCanaryTarget      = "node:diskcanary_etcd_canary:info"
	ruleEtcdCanaryP99         = "node:diskcanary_fdatasync_duration_seconds:p99_max"
	ruleEtcdCanaryStalled     = "node:diskcanary_etcd_canary_stalled:max"
	ruleEtcdCanaryBusy        = "node:diskcanary_wal_device_utilization:max"
	ruleEtcdNeighbourShare    = "node_workload:diskcanary_cgroup_io_bytes:etcd_disk_share"
	ruleEtcdCPUPressure       = "node:diskcanary_pressure_cpu_waiting:ratio"
	ruleEtcdVerdict           = "node:diskcanary_etcd_verdict:info"
)

// etcd verdict causes.
const (
	causeDisk       = "disk"            // the canary on etcd's disk slow or stalled (etcd's fsync not fine), the disk not busy
	causeContention = "contention"      // the same while the disk is busy (etcd or another writer)
	causeNeighbour  = "noisy_neighbour" // contention where one workload, not etcd nor the daemon, moved most of the disk's bytes (label workload)
	causeNetwork    = "network"         // a peer round trip slow and either new or failing
	causeCPU        = "cpu"             // etcd slow or in trouble while the node is short of CPU
	causeEtcd       = "etcd"            // etcd's own fsync slow with the canary fine, or trouble with nothing else to blame
	causeHealthy    = "healthy"
)

func (p Params) etcdJoin() string { return p.withCluster(p.EtcdJoinLabels...) }

// etcdSel is EtcdSelector as a series selector.
func (p Params) etcdSel() string { return "{" + p.EtcdSelector + "}" }

// gatedP99 is a histogram's p99 per `by`, present only when enough samples
// stand behind what it reads: `fine` in the window to read fine,
// EtcdSlowSamples to read over `slow`. A disk too slow to complete many
// fsyncs still reads slow; a handful of fast ones never read fine, and
// none (a hung disk: a zero rate, a NaN quantile) reads nothing.
// only, when set, keeps the series it matches (`and on (...) ...`) before
// any quantile is computed.
func (p Params) gatedP99(metric, sel, by string, slow time.Duration, fine int, only string) string {
	w := promDuration(p.EtcdWindow)
	q := fmt.Sprintf("histogram_quantile(0.99, sum by (%s, le) (rate(%s_bucket%s[%s])%s))", by, metric, sel, w, only)
	n := fmt.Sprintf("sum by (%s) (increase(%s_count%s[%s])%s)", by, metric, sel, w, only)
	return p.gated(q, n, by, slow, fine)
}

// gated is gatedP99 on a p99 and a sample count already computed per by.
func (p Params) gated(q, n, by string, slow time.Duration, fine int) string {
	return fmt.Sprintf("(\n    %[1]s\n    and on (%[3]s)\n    %[2]s >= %[4]d\n  )\n  or\n  (\n    %[1]s > %[5]s\n    and on (%[3]s)\n    %[2]s >= %[6]d\n  )",
		q, n, by, fine, seconds(slow), p.EtcdSlowSamples)
}

// canaryP99 is the etcd canaries' gated fdatasync p99 per target. Over the
// probes' own 5 minutes it reads their recorded p99 and sample count
// (probeRecording) rather than rate every WAL probe's buckets a second
// time; over any other window, the canaries' buckets.
func (p Params) canaryP99() string {
	only := fmt.Sprintf("on (%s, probe) %s", p.instanceLabels(), ruleEtcdCanaryTarget)
	if p.EtcdWindow == probeFastWindow {
		w := promDuration(probeFastWindow)
		return fmt.Sprintf("(\n  %s\n)\nand %s", p.gated(quantileRule("fdatasync", "p99", w), samplesRule("fdatasync", w), p.target(), p.FdatasyncSlow, p.MinIncidentSamples), only)
	}
	return p.gatedP99(fdsMetric, "", p.target(), p.FdatasyncSlow, p.MinIncidentSamples, " and "+only)
}

func etcdRecording(p Params) Group {
	g := Group{Name: "diskcanary.etcd.recording"}
	j, sel, w := p.etcdJoin(), p.etcdSel(), promDuration(p.EtcdWindow)
	joins := strings.Join(p.EtcdJoinLabels, ", ")
	inst := p.instanceLabels()
	member := p.withCluster(append([]string{"job", "instance"}, p.EtcdJoinLabels...)...)
	canaryKey := p.withCluster(append(slices.Clone(p.EtcdJoinLabels), "job", "instance", "probe", "device")...)
	// Several etcd series on one node (scraped twice, or two clusters'
	// members) take the worst.
	etcdP99 := func(metric string, slow time.Duration) string {
		return fmt.Sprintf("max by (%s) (\n  %s\n)", j, p.gatedP99(metric, sel, member, slow, p.MinIncidentSamples, ""))
	}
	// etcd observes a peer's smoothed round trip on a timer (each 30 s per
	// round tripper while the peer is healthy, each 5 s while not): the
	// count follows the clock, not the link, and each sample already
	// smooths many probes, so EtcdSlowSamples reads it either way.
	rtt := p.gatedP99("etcd_network_peer_round_trip_time_seconds", sel, member+", To", p.EtcdPeerRTTSlow, p.EtcdSlowSamples, "")
	serverID := p.withCluster("server_id")
	g.Rules = append(g.Rules,
		// The canary is the WAL probe on etcd's device, on an etcd member's
		// node: the one on the device a probe's etcd_data_dir resolves to,
		// else the node's only WAL probe. Two or more with none declared, or
		// a declared device no WAL probe measures: no canary
		// (DiskcanaryEtcdWithoutCanary).
		Rule{Record: ruleEtcdCanaryTarget, Expr: fmt.Sprintf(`(
  group by (%[1]s) (
    diskcanary_probe_target_info{kind="wal", device!=""}
    and on (%[2]s)
    diskcanary_probe_etcd_data_dir_info{device!=""}
  )
  or
  (
    group by (%[1]s) (diskcanary_probe_target_info{kind="wal"})
    and on (%[3]s)
    count by (%[3]s) (diskcanary_probe_target_info{kind="wal"}) == 1
    unless on (%[3]s)
    diskcanary_probe_etcd_data_dir_info{device!=""}
  )
)
and on (%[3]s)
etcd_disk_wal_fsync_duration_seconds_count%[4]s`, canaryKey, p.deviceLabels(), j, sel)},
		Rule{Record: ruleEtcdWALFsyncP99, Expr: etcdP99("etcd_disk_wal_fsync_duration_seconds", p.FdatasyncSlow)},
		Rule{Record: ruleEtcdCommitP99, Expr: etcdP99("etcd_disk_backend_commit_duration_seconds", p.EtcdCommitSlow)},
		// The worst round trip touching the member: its own to each peer,
		// and each peer's to it (To is a member ID, etcd_server_id names
		// the member's node), so the member behind a slow link reads it
		// too, though its own probes of its peers are fast.
		Rule{Record: ruleEtcdPeerRTTP99, Expr: fmt.Sprintf(`max by (%[1]s) (
  label_replace(max by (%[1]s) (
  %[2]s
  ), "view", "own", "", "")
  or
  label_replace(max by (%[1]s) (
    max by (%[3]s) (label_replace(
  %[2]s
    , "server_id", "$1", "To", "(.+)"))
    * on (%[3]s) group_left (%[4]s)
    max by (%[3]s, %[4]s) (etcd_server_id%[5]s)
  ), "view", "peers", "", "")
)`, j, rtt, serverID, joins, sel)},
		// Its usual value: the median over a day, which a slowdown of
		// less than half a day does not move.
		Rule{Record: ruleEtcdPeerRTTBaseline, Expr: fmt.Sprintf("quantile_over_time(0.5, %s[%s])", ruleEtcdPeerRTTP99, promDuration(p.EtcdPeerRTTBaselineWindow))},
		Rule{Record: ruleEtcdPeerFailures, Expr: fmt.Sprintf("sum by (%[1]s) (\n  increase(etcd_network_peer_sent_failures_total%[2]s[%[3]s])\n  or\n  increase(etcd_network_peer_received_failures_total%[2]s[%[3]s])\n)", j, sel, w)},
		Rule{Record: ruleEtcdSlowApplies, Expr: fmt.Sprintf("sum by (%s) (rate(etcd_server_slow_apply_total%s[%s]))", j, sel, w)},
		Rule{Record: ruleEtcdLeaderChanges, Expr: fmt.Sprintf("max by (%s) (increase(etcd_server_leader_changes_seen_total%s[%s]))", j, sel, promDuration(p.EtcdLeaderChangesWindow))},
		Rule{Record: ruleEtcdHeartbeatFailures, Expr: fmt.Sprintf("sum by (%s) (increase(etcd_server_heartbeat_send_failures_total%s[%s]))", j, sel, w)},
		Rule{Record: ruleEtcdCPU, Expr: fmt.Sprintf("sum by (%s) (rate(process_cpu_seconds_total%s[%s]))", j, sel, w)},
		// Only the canaries' histograms, not every WAL probe's in the fleet.
		Rule{Record: ruleEtcdCanaryP99, Expr: fmt.Sprintf("max by (%s) (\n  %s\n)", j, p.canaryP99())},
		Rule{Record: ruleEtcdCanaryStalled, Expr: fmt.Sprintf("max by (%s) (\n  diskcanary_probe_stalled\n  and on (%s, probe)\n  %s\n)", j, inst, ruleEtcdCanaryTarget)},
		// How busy the canary's device was (iostat's %util): its own,
		// else the busiest disk under it (a partition's or dm device's
		// stats are off by default; diskcanary_disk_parent_info joins).
		Rule{Record: ruleEtcdCanaryBusy, Expr: fmt.Sprintf(`max by (%[1]s) (
  %[2]s
  * on (%[3]s, device) group_left (%[4]s)
  max by (%[3]s, device, %[4]s) (%[5]s)
)`, j, p.deviceUtilization(w), inst, joins, ruleEtcdCanaryTarget)},
		// Each workload's share of the bytes moved on the disks under the
		// canary (so under etcd's data) over the window, never the daemon's
		// probes, "other" (many cgroups), the root cgroup (kernel threads:
		// the journal and writeback, for every cgroup) or etcd itself
		// (EtcdWorkload): the contention rules are per device, the verdict
		// per node.
		Rule{Record: ruleEtcdNeighbourShare, Expr: fmt.Sprintf(`max by (%[1]s, workload) (
  %[2]s{%[3]s, workload!="/", workload!~%[4]q}
  * on (%[5]s) group_left (%[6]s)
  label_replace(
    max by (%[7]s, disk, %[6]s) (
      diskcanary_disk_parent_info
      * on (%[7]s, device) group_left (%[6]s)
      max by (%[7]s, device, %[6]s) (%[8]s)
    ),
    "device", "$1", "disk", "(.+)"
  )
)`, j, ruleWorkloadShare(p.EtcdWindow), notCulprit, p.EtcdWorkload, p.deviceLabels(), joins, inst, ruleEtcdCanaryTarget)},
		Rule{Record: ruleEtcdCPUPressure, Expr: fmt.Sprintf("max by (%s) (rate(diskcanary_pressure_cpu_waiting_seconds_total[%s]))", j, w)},
	)

	on := "on (" + j + ")"
	set := func(expr string) string { return fmt.Sprintf("group by (%s) (%s)", j, expr) }
	etcdSlow := set(fmt.Sprintf("%s > %s or %s > %s", ruleEtcdWALFsyncP99, seconds(p.FdatasyncSlow), ruleEtcdCommitP99, seconds(p.EtcdCommitSlow)))
	etcdFine := set(fmt.Sprintf("%s <= %s unless %s %s > %s", ruleEtcdWALFsyncP99, seconds(p.FdatasyncSlow), on, ruleEtcdCommitP99, seconds(p.EtcdCommitSlow)))
	stalled := set(ruleEtcdCanaryStalled + " == 1")
	canarySlow := set(fmt.Sprintf("%s > %s", ruleEtcdCanaryP99, seconds(p.FdatasyncSlow)))
	canaryFine := set(fmt.Sprintf("%s <= %s", ruleEtcdCanaryP99, seconds(p.FdatasyncSlow)))
	busy := set(fmt.Sprintf("%s >= %s", ruleEtcdCanaryBusy, num(p.EtcdBusyUtilization)))
	// A round trip over EtcdPeerRTTSlow is a cause only when it is new
	// (over EtcdPeerRTTFactor × its day's median) or hurts (peer messages
	// fail): a cross-zone cluster's steady round trip is neither.
	netSlow := set(fmt.Sprintf("%[1]s > %[2]s\nand %[5]s\n(%[1]s > %[3]s * %[4]s or %[5]s %[6]s > 0)",
		ruleEtcdPeerRTTP99, seconds(p.EtcdPeerRTTSlow), num(p.EtcdPeerRTTFactor), ruleEtcdPeerRTTBaseline, on, ruleEtcdPeerFailures))
	// Trouble is a rate and a count that mean it: routine slow applies
	// (a large LIST) and a planned leader change are not.
	trouble := set(fmt.Sprintf("%s >= %s or %s >= %d or %s > 0",
		ruleEtcdSlowApplies, num(p.EtcdSlowApplyRate), ruleEtcdLeaderChanges, p.EtcdLeaderChanges, ruleEtcdHeartbeatFailures))
	cpuShort := set(fmt.Sprintf("%s >= %s", ruleEtcdCPUPressure, num(p.EtcdCPUPressure)))
	members := set(fmt.Sprintf("etcd_disk_wal_fsync_duration_seconds_count%s", sel))
	// The disk under etcd is slow: its canary slow (etcd's own fsync not
	// reading fine against it), or stalled. A stalled canary is the disk
	// whatever the utilisation: requests stuck in flight count as busy.
	diskSlow := fmt.Sprintf("(\n%s\nunless %s\n%s\n)", canarySlow, on, etcdFine)
	// A busy disk is a noisy neighbour's when one workload moved more
	// than EtcdNeighbourShare of its bytes; the verdict names it.
	contended := fmt.Sprintf("(\n%s\nand %s\n%s\nunless %s\n%s\n)", diskSlow, on, busy, on, stalled)
	neighbour := fmt.Sprintf("group by (%s, workload) (%s > %s)", j, ruleEtcdNeighbourShare, num(p.EtcdNeighbourShare))
	causes := []struct{ cause, expr string }{
		{causeDisk, fmt.Sprintf("%s\nunless %s\n%s\nor\n%s", diskSlow, on, busy, stalled)},
		{causeNeighbour, fmt.Sprintf("%s\nand %s\n%s", neighbour, on, contended)},
		{causeContention, fmt.Sprintf("%s\nunless %s\n%s", contended, on, neighbour)},
		{causeNetwork, netSlow},
		{causeCPU, fmt.Sprintf("(\n%s\nor\n%s\n)\nand %s\n%s", trouble, etcdSlow, on, cpuShort)},
		// Slow fsyncs the canary beside it does not see: etcd's own load
		// (expensive requests, defrag, compaction); or trouble with disk,
		// network and CPU fine.
		{causeEtcd, fmt.Sprintf("(\n(\n%[1]s\nand %[2]s\n%[3]s\n)\nor\n(\n%[4]s\nunless %[2]s\n%[5]s\nunless %[2]s\n%[6]s\nunless %[2]s\n%[7]s\n)\n)\nunless %[2]s\n%[8]s",
			etcdSlow, on, canaryFine, trouble, diskSlow, stalled, netSlow, cpuShort)},
	}
	for _, c := range causes {
		g.Rules = append(g.Rules, Rule{Record: ruleEtcdVerdict, Labels: map[string]string{"cause": c.cause},
			Expr: fmt.Sprintf("(\n%s\n)\nand %s\n%s", c.expr, on, members)})
	}
	// Healthy needs evidence: etcd's fsync or the canary reading fine, and
	// nothing slow. A hung disk (no fsync completes) reads nothing, never healthy.
	g.Rules = append(g.Rules, Rule{Record: ruleEtcdVerdict, Labels: map[string]string{"cause": causeHealthy},
		Expr: fmt.Sprintf("(\n%[2]s\nor\n(%[3]s and %[1]s %[4]s)\n)\nunless %[1]s\n%[5]s\nunless %[1]s\n%[6]s\nunless %[1]s\n%[7]s\nunless %[1]s\n%[8]s\nunless %[1]s\n%[9]s",
			on, etcdFine, canaryFine, members, etcdSlow, diskSlow, stalled, netSlow, trouble)})
	return g
}

// etcdEvidence renders the figures behind a verdict into an alert text:
// the recorded values for the alert's node, each only when present.
func (p Params) etcdEvidence() string {
	with := func(rule, body string) string {
		return fmt.Sprintf(`{{ with printf "%s{%s}" %s | query }}{{ with first . }}%s{{ end }}{{ end }}`,
			rule, p.etcdLabelsFormat(), p.etcdLabelsArgs(), body)
	}
	q := func(rule, what, format string) string {
		return with(rule, fmt.Sprintf(" %s {{ .Value | %s }};", what, format))
	}
	count := `printf "%.0f"`
	return " Evidence (" + promDuration(p.EtcdWindow) + "):" +
		q(ruleEtcdWALFsyncP99, "etcd WAL fsync p99", "humanizeDuration") +
		q(ruleEtcdCanaryP99, "canary fdatasync p99", "humanizeDuration") +
		with(ruleEtcdCanaryStalled, `{{ if eq .Value 1.0 }} the canary's I/O stalled;{{ end }}`) +
		q(ruleEtcdCommitP99, "etcd backend commit p99", "humanizeDuration") +
		q(ruleEtcdPeerRTTP99, "worst peer round-trip p99", "humanizeDuration") +
		q(ruleEtcdPeerRTTBaseline, "its median over "+promDuration(p.EtcdPeerRTTBaselineWindow), "humanizeDuration") +
		q(ruleEtcdPeerFailures, "failed peer messages", count) +
		q(ruleEtcdSlowApplies, "slow applies a second", `printf "%.2g"`) +
		q(ruleEtcdLeaderChanges, "leader changes in "+promDuration(p.EtcdLeaderChangesWindow), count) +
		q(ruleEtcdHeartbeatFailures, "heartbeats sent late", count) +
		q(ruleEtcdCanaryBusy, "canary disk busy", "humanizePercentage") +
		q(ruleEtcdCPUPressure, "CPU pressure", "humanizePercentage")
}

// etcdLabelsFormat and etcdLabelsArgs select an alert's node in a query
// an alert text makes: the join labels as printf's format and arguments.
func (p Params) etcdLabelsFormat() string {
	var sel []string
	for _, l := range strings.Split(p.etcdJoin(), ", ") {
		sel = append(sel, l+"=%q")
	}
	return strings.Join(sel, ",")
}

func (p Params) etcdLabelsArgs() string {
	var args []string
	for _, l := range strings.Split(p.etcdJoin(), ", ") {
		args = append(args, "$labels."+l)
	}
	return strings.Join(args, " ")
}

// etcdTroubleText names what counts as trouble.
func (p Params) etcdTroubleText() string {
	return fmt.Sprintf("%s or more slow applies a second, %d or more leader changes in %s, or heartbeats sent late",
		num(p.EtcdSlowApplyRate), p.EtcdLeaderChanges, promDuration(p.EtcdLeaderChangesWindow))
}

// etcdCauseText is the verdict in words, by cause.
func (p Params) etcdCauseText() string {
	return `{{ if eq $labels.cause "disk" }}the disk: the canary on etcd's disk is slow or its I/O stalled, etcd's own fsync does not read fine against it, and the disk is not busy — the storage itself (device, its controller, or the stack above it: see the canary's own alerts for which).` +
		`{{ else if eq $labels.cause "contention" }}contention on the disk: the canary on etcd's disk is slow, etcd's own fsync does not read fine against it, and the disk is busy (` + fmt.Sprintf("%g", p.EtcdBusyUtilization*100) + ` %+ utilised) — etcd's own writes or another workload on the same disk.` +
		`{{ else if eq $labels.cause "noisy_neighbour" }}a noisy neighbour: the canary on etcd's disk is slow, etcd's own fsync does not read fine against it, the disk is busy (` + fmt.Sprintf("%g", p.EtcdBusyUtilization*100) + ` %+ utilised), and one workload, {{ $labels.workload }}, moved more than ` + fmt.Sprintf("%g", p.EtcdNeighbourShare*100) + ` % of the bytes on it` +
		`{{ with printf "` + ruleEtcdNeighbourShare + `{` + p.etcdLabelsFormat() + `,workload=%q}" ` + p.etcdLabelsArgs() + ` $labels.workload | query }}{{ with first . }} ({{ .Value | humanizePercentage }}){{ end }}{{ end }}.` +
		`{{ else if eq $labels.cause "network" }}the network: a round trip between this member and a peer has a p99 over ` + human(p.EtcdPeerRTTSlow) + `, and it is over ` + num(p.EtcdPeerRTTFactor) + `× its median of the last ` + promDuration(p.EtcdPeerRTTBaselineWindow) + ` or peer messages fail.` +
		`{{ else if eq $labels.cause "cpu" }}CPU: etcd's fsync is slow or it is in trouble (` + p.etcdTroubleText() + `), and tasks on the node wait for a CPU ` + fmt.Sprintf("%g", p.EtcdCPUPressure*100) + ` %+ of the time.` +
		`{{ else }}etcd itself: its own fsync is slow while the canary on its disk is fine, or it is in trouble (` + p.etcdTroubleText() + `) with disk, network and CPU fine — etcd's own load (large requests, defragmentation, compaction).{{ end }}`
}

func etcdAlerts(p Params) Group {
	g := Group{Name: "diskcanary.etcd.alerts"}
	node := "{{ $labels." + p.EtcdJoinLabels[len(p.EtcdJoinLabels)-1] + " }}"
	g.Rules = append(g.Rules,
		// One alert per cause that holds.
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
		// etcd on a node without a canary on its disk: the verdict cannot
		// tell disk from etcd there.
		p.alert("DiskcanaryEtcdWithoutCanary", "info",
			fmt.Sprintf("group by (%[1]s) (etcd_disk_wal_fsync_duration_seconds_count%[2]s)\nunless on (%[1]s)\n%[3]s", p.etcdJoin(), p.etcdSel(), ruleEtcdCanaryTarget), p.EtcdDegradedFor,
			"etcd member on "+node+" has no diskcanary WAL probe on its disk",
			"An etcd member runs on "+node+" but no diskcanary WAL probe there is known to be on its disk: none shares its node label ("+p.etcdJoin()+"), or there are several and none is told etcd's data directory (etcd_data_dir), or the one told measures another device (DiskcanaryEtcdCanaryMisplaced). The etcd verdict cannot tell its disk from etcd. Run diskcanary on the node with a WAL probe on etcd's filesystem, etcd_data_dir set, and give both scrape jobs the same "+p.etcdJoin()+" label."),
	)
	return p.linkDashboard(g, dashboardEtcd, "node="+p.EtcdJoinLabels[len(p.EtcdJoinLabels)-1])
}

// etcdMember is one node of the etcd verdict's cases: an etcd member and
// the diskcanary beside it, each signal fast or slow.
type etcdMember struct {
	node string
	// etcd's WAL fsyncs and the canary's fdatasyncs: slow from the start,
	// so many a minute (0: 100).
	etcdSlow, canarySlow bool
	etcdRate, canaryRate int
	// From minute hungAt no fsync of etcd's or the canary's completes,
	// and from the next the canary reports a stall (0: never).
	hungAt                int
	noWAL, busy, cpuShort bool
	// The round trip to the peer is slow from minute rttSlowFrom (0:
	// never, 1: always); peer messages fail every minute.
	rttSlowFrom  int
	peerFailures bool
	// Round-trip samples a minute (0: 100); etcd observes 4 (every 30 s
	// per round tripper) from a healthy peer.
	rttRate int
	// Slow applies a minute; the minutes in which etcd sees a new leader.
	slowApplies     int
	leaderChangesAt []int
	// A second WAL probe, elsewhere, on another (slow, busy) disk; and
	// both probes told etcd's data directory is on sda1.
	otherWAL, declared bool
	// The member's etcd_server_id and its peer's (To), default "id-"+node
	// and "peer".
	id, peer string
	// Bytes a minute each workload writes on sda, the disk under the
	// canary (a unit's cgroup is /system.slice/<workload>; "/" the root).
	io map[string]int
}

// perMinute is a counter's values from minute 0 to n, growing by add(i)
// in minute i.
func perMinute(n int, add func(i int) int) string {
	v, out := 0, []string{"0"}
	for i := 1; i <= n; i++ {
		v += add(i)
		out = append(out, fmt.Sprint(v))
	}
	return strings.Join(out, " ")
}

// twoSpeed is a classic histogram whose samples in minute i are fast, in
// (fast[0], fast[1]], or slow, in (slow[0], slow[1]]: its p99 is the lower
// edge plus 0.99 of the width when all are one or the other.
func twoSpeed(metric, labels string, n int, fast, slow [2]string, count func(i int) (f, s int)) []series {
	f := func(i int) int { a, _ := count(i); return a }
	all := func(i int) int { a, b := count(i); return a + b }
	b := func(le, values string) series {
		return series{fmt.Sprintf(`%s_bucket{%s, le="%s"}`, metric, labels, le), values}
	}
	return []series{
		b(fast[0], perMinute(n, func(int) int { return 0 })),
		b(fast[1], perMinute(n, f)), b(slow[0], perMinute(n, f)), b(slow[1], perMinute(n, all)), b("+Inf", perMinute(n, all)),
		{fmt.Sprintf(`%s_count{%s}`, metric, labels), perMinute(n, all)},
	}
}

func (m etcdMember) series(n int) []series {
	etcd := fmt.Sprintf(`job="etcd", instance="%s:2379", node="%s"`, m.node, m.node)
	dc := fmt.Sprintf(`job="diskcanary", instance="%s:9742", node="%s"`, m.node, m.node)
	wal := dc + `, probe="wal", path="/var/lib/etcd-canary", device="sda1"`
	id, peer := m.id, m.peer
	if id == "" {
		id = "id-" + m.node
	}
	if peer == "" {
		peer = "peer"
	}
	samples := func(slow bool, rate int) func(i int) (int, int) {
		if rate == 0 {
			rate = 100
		}
		return func(i int) (int, int) {
			switch {
			case m.hungAt > 0 && i > m.hungAt:
				return 0, 0
			case slow:
				return 0, rate
			}
			return rate, 0
		}
	}
	every := func(k int) func(int) int { return func(int) int { return k } }
	leader := func(i int) int {
		if slices.Contains(m.leaderChangesAt, i) {
			return 1
		}
		return 0
	}
	util, pressure := 6, 3 // 0.1 s per second: 10 %, 5 %
	if m.busy {
		util = 48 // 80 %
	}
	if m.cpuShort {
		pressure = 30 // 50 %
	}
	out := concat(
		// fast p99 1.99 ms, slow 31.84 ms
		twoSpeed("etcd_disk_wal_fsync_duration_seconds", etcd, n, [2]string{"0.001", "0.002"}, [2]string{"0.016", "0.032"}, samples(m.etcdSlow, m.etcdRate)),
		// 3.98 ms
		twoSpeed("etcd_disk_backend_commit_duration_seconds", etcd, n, [2]string{"0.002", "0.004"}, [2]string{"0.016", "0.032"}, samples(false, 0)),
		// fast 1.592 ms, slow 203.776 ms
		twoSpeed("etcd_network_peer_round_trip_time_seconds", etcd+`, To="`+peer+`"`, n, [2]string{"0.0008", "0.0016"}, [2]string{"0.1024", "0.2048"},
			func(i int) (int, int) {
				r := m.rttRate
				if r == 0 {
					r = 100
				}
				if m.rttSlowFrom > 0 && i >= m.rttSlowFrom {
					return 0, r
				}
				return r, 0
			}),
		s(`etcd_server_id{`+etcd+`, server_id="`+id+`"}`, fmt.Sprintf("1x%d", n)),
		s("etcd_server_slow_apply_total{"+etcd+"}", perMinute(n, every(m.slowApplies))),
		s("etcd_server_leader_changes_seen_total{"+etcd+"}", perMinute(n, leader)),
		s("etcd_server_heartbeat_send_failures_total{"+etcd+"}", perMinute(n, every(0))),
		s("diskcanary_pressure_cpu_waiting_seconds_total{"+dc+"}", fmt.Sprintf("0+%dx%d", pressure, n)),
	)
	if m.peerFailures {
		out = append(out, s(`etcd_network_peer_sent_failures_total{`+etcd+`, To="`+peer+`"}`, perMinute(n, every(1)))...)
	}
	if m.noWAL {
		return out
	}
	stalled := perMinute(n, func(i int) int {
		if m.hungAt > 0 && i == m.hungAt+1 {
			return 1
		}
		return 0
	})
	out = concat(out,
		// fast p99 0.995 ms, slow 49.75 ms
		twoSpeed(fdsMetric, wal, n, [2]string{"0.0005", "0.001"}, [2]string{"0.025", "0.05"}, samples(m.canarySlow, m.canaryRate)),
		s(`diskcanary_probe_stalled{`+dc+`, probe="wal"}`, stalled),
		s(`diskcanary_probe_target_info{`+dc+`, probe="wal", kind="wal", path="/var/lib/etcd-canary", device="sda1"}`, fmt.Sprintf("1x%d", n)),
		s(`diskcanary_disk_parent_info{`+dc+`, device="sda1", disk="sda"}`, fmt.Sprintf("1x%d", n)),
		s(`diskcanary_disk_io_time_seconds_total{`+dc+`, device="sda"}`, fmt.Sprintf("0+%dx%d", util, n)),
	)
	for _, w := range slices.Sorted(maps.Keys(m.io)) {
		cgroup := "/system.slice/" + w
		if w == "/" {
			cgroup = w
		}
		out = append(out, s(fmt.Sprintf(`diskcanary_cgroup_io_bytes_total{%s, device="sda", workload="%s", cgroup="%s", op="write"}`, dc, w, cgroup), fmt.Sprintf("0+%dx%d", m.io[w], n))...)
	}
	if m.otherWAL {
		out = concat(out,
			twoSpeed(fdsMetric, dc+`, probe="elsewhere", path="/srv/canary", device="sdb"`, n, [2]string{"0.0005", "0.001"}, [2]string{"0.025", "0.05"}, samples(true, 0)),
			s(`diskcanary_probe_stalled{`+dc+`, probe="elsewhere"}`, fmt.Sprintf("0x%d", n)),
			s(`diskcanary_probe_target_info{`+dc+`, probe="elsewhere", kind="wal", path="/srv/canary", device="sdb"}`, fmt.Sprintf("1x%d", n)),
			s(`diskcanary_disk_io_time_seconds_total{`+dc+`, device="sdb"}`, fmt.Sprintf("0+54x%d", n)))
	}
	if m.declared {
		for _, probe := range []string{"wal", "elsewhere"} {
			out = append(out, s(`diskcanary_probe_etcd_data_dir_info{`+dc+`, probe="`+probe+`", etcd_data_dir="/var/lib/etcd", device="sda1"}`, fmt.Sprintf("1x%d", n))...)
		}
	}
	return out
}

func etcdCases() []alertCase {
	const n = 40
	var always []int
	for i := 1; i <= n; i++ {
		always = append(always, i)
	}
	members := []etcdMember{
		{node: "n1", etcdSlow: true, canarySlow: true},
		{node: "n2", etcdSlow: true, canarySlow: true, busy: true},
		{node: "n3", rttSlowFrom: 14, leaderChangesAt: always},
		{node: "n4", slowApplies: 10, cpuShort: true},
		{node: "n5", etcdSlow: true},
		{node: "n6", slowApplies: 10},
		{node: "n7"},
		{node: "n8", etcdSlow: true, noWAL: true},
	}
	var all []series
	for _, m := range members {
		all = append(all, m.series(n)...)
	}
	verdict := func(node string, causes ...string) []expSample {
		var out []expSample
		for _, c := range causes {
			out = append(out, expSample{Labels: fmt.Sprintf(`%s{cause="%s", node="%s"}`, ruleEtcdVerdict, c, node), Value: 1})
		}
		return out
	}
	// verdictOf: at 20m, the member's verdicts are exactly causes.
	verdictOf := func(m etcdMember, causes ...string) exprTest {
		return exprTest{Expr: fmt.Sprintf(`%s{node="%s"}`, ruleEtcdVerdict, m.node), EvalTime: "20m", ExpSamples: verdict(m.node, causes...)}
	}
	one := func(m etcdMember) []series { return m.series(n) }
	// A case of one member alone and its verdicts.
	alone := func(name string, m etcdMember, causes ...string) alertCase {
		return alertCase{name: name, input: one(m), expr: []exprTest{verdictOf(m, causes...)}}
	}
	hung := etcdMember{node: "n1", hungAt: 12}
	tooSlow := etcdMember{node: "n1", etcdSlow: true, etcdRate: 2, canarySlow: true, canaryRate: 2}
	unrelated := etcdMember{node: "n1", etcdSlow: true, otherWAL: true, declared: true}
	// Bytes a minute on the disk under the canary, by workload.
	dominating := map[string]int{"backup.service": 48 << 20, "etcd.service": 6 << 20, "diskcanary": 6 << 20} // 80, 10, 10 %
	small := map[string]int{"backup.service": 12 << 20, "etcd.service": 42 << 20, "diskcanary": 6 << 20}     // 20, 70, 10 %
	self := map[string]int{"diskcanary": 54 << 20, "backup.service": 6 << 20}                                // 90, 10 %
	root := map[string]int{"/": 54 << 20, "backup.service": 6 << 20}                                         // 90, 10 %
	etcdOwn := map[string]int{"etcd.service": 54 << 20, "backup.service": 6 << 20}                           // 90, 10 %
	// etcd and its canary slow, the disk busy or not, these workloads on it.
	neighbourOf := func(busy bool, io map[string]int) etcdMember {
		return etcdMember{node: "n1", etcdSlow: true, canarySlow: true, busy: busy, io: io}
	}
	var want []expSample
	for _, v := range [][]string{{"n1", causeDisk}, {"n2", causeContention}, {"n3", causeNetwork}, {"n4", causeCPU}, {"n5", causeEtcd}, {"n6", causeEtcd}, {"n7", causeHealthy}} {
		want = append(want, verdict(v[0], v[1])...)
	}
	return []alertCase{
		{name: "one verdict per member: disk, contention, network, cpu, etcd twice, healthy; none without a canary", input: all,
			expr: []exprTest{
				{Expr: ruleEtcdVerdict, EvalTime: "20m", ExpSamples: want},
				near(ruleEtcdWALFsyncP99+`{node="n1"}`, "20m", `node="n1"`, 0.03184),
				near(ruleEtcdCanaryP99+`{node="n1"}`, "20m", `node="n1"`, 0.04975),
				near(ruleEtcdPeerRTTP99+`{node="n3"}`, "20m", `node="n3"`, 0.203776),
				// Recorded fast for minutes 5 to 13 and slow from 14: a median of 1.592 ms.
				near(ruleEtcdPeerRTTBaseline+`{node="n3"}`, "20m", `node="n3"`, 0.001592),
				near(ruleEtcdCanaryBusy+`{node="n2"}`, "20m", `node="n2"`, 0.8),
				near(ruleEtcdCPUPressure+`{node="n4"}`, "20m", `node="n4"`, 0.5),
				near(ruleEtcdSlowApplies+`{node="n6"}`, "20m", `node="n6"`, 10.0/60),
				near(ruleEtcdLeaderChanges+`{node="n3"}`, "20m", `node="n3"`, 15),
			}},
		// A hung disk: from minute 12 neither etcd's fsyncs nor the
		// canary's complete (zero rates, NaN quantiles), the canary stalls
		// at 13. Still healthy on the old samples until the window passes
		// them; then the disk, never healthy.
		{name: "the disk under a follower hangs: disk once the canary stalls, never healthy", input: one(hung),
			expr: []exprTest{
				{Expr: fmt.Sprintf(`%s{node="n1"}`, ruleEtcdVerdict), EvalTime: "12m", ExpSamples: verdict("n1", causeHealthy)},
				{Expr: fmt.Sprintf(`%s{node="n1"}`, ruleEtcdVerdict), EvalTime: "13m", ExpSamples: verdict("n1", causeDisk)},
				verdictOf(hung, causeDisk),
				{Expr: fmt.Sprintf(`count(%s{node="n1"}) or vector(0)`, ruleEtcdWALFsyncP99), EvalTime: "20m", ExpSamples: []expSample{{"{}", 0}}},
			}},
		{name: "the disk hangs and the canary is not yet stalled: no verdict, not healthy",
			input: concat(
				twoSpeed("etcd_disk_wal_fsync_duration_seconds", `job="etcd", instance="n1:2379", node="n1"`, n, [2]string{"0.001", "0.002"}, [2]string{"0.016", "0.032"},
					func(i int) (int, int) { return 0, 0 }),
				twoSpeed(fdsMetric, `job="diskcanary", instance="n1:9742", node="n1", probe="wal", path="/var/lib/etcd-canary", device="sda1"`, n, [2]string{"0.0005", "0.001"}, [2]string{"0.025", "0.05"},
					func(i int) (int, int) { return 0, 0 }),
				s(`diskcanary_probe_stalled{job="diskcanary", instance="n1:9742", node="n1", probe="wal"}`, fmt.Sprintf("0x%d", n)),
				s(`diskcanary_probe_target_info{job="diskcanary", instance="n1:9742", node="n1", probe="wal", kind="wal", path="/var/lib/etcd-canary", device="sda1"}`, fmt.Sprintf("1x%d", n))),
			expr: []exprTest{{Expr: fmt.Sprintf(`%s{node="n1"}`, ruleEtcdVerdict), EvalTime: "20m"}}},
		alone("a canary too slow for the sample gate (2 fdatasyncs a minute), etcd's fsyncs as few and slow: disk", tooSlow, causeDisk),
		alone("etcd's fsync slow, the canary on its disk fine, another WAL probe on a slow busy disk: etcd", unrelated, causeEtcd),
		alone("one slow apply a minute: healthy", etcdMember{node: "n1", slowApplies: 1}, causeHealthy),
		alone("a planned leader change: healthy", etcdMember{node: "n1", leaderChangesAt: []int{12}}, causeHealthy),
		alone("a peer round trip slow from the start (a cross-zone cluster), nothing failing: healthy", etcdMember{node: "n1", rttSlowFrom: 1}, causeHealthy),
		{name: "a peer round trip observed as etcd does (4 a minute), fast: read, healthy", input: one(etcdMember{node: "n1", rttRate: 4}),
			expr: []exprTest{verdictOf(etcdMember{node: "n1"}, causeHealthy), near(ruleEtcdPeerRTTP99+`{node="n1"}`, "20m", `node="n1"`, 0.001592)}},
		alone("a peer round trip observed as etcd does (4 a minute), slow from minute 14: network", etcdMember{node: "n1", rttRate: 4, rttSlowFrom: 14}, causeNetwork),
		alone("a peer round trip slow from the start with peer messages failing: network", etcdMember{node: "n1", rttSlowFrom: 1, peerFailures: true}, causeNetwork),
		alone("etcd's fsyncs few (2 a minute) and fast, the canary fine: healthy", etcdMember{node: "n1", etcdRate: 2}, causeHealthy),
		alone("etcd's fsyncs few (2 a minute) and slow, the canary fine: etcd", etcdMember{node: "n1", etcdRate: 2, etcdSlow: true}, causeEtcd),
		alone("two causes: the disk and the network", etcdMember{node: "n1", etcdSlow: true, canarySlow: true, rttSlowFrom: 14}, causeDisk, causeNetwork),
		alone("two causes: the disk and CPU", etcdMember{node: "n1", etcdSlow: true, canarySlow: true, cpuShort: true}, causeCPU, causeDisk),
		alone("two causes: contention and the network", etcdMember{node: "n1", etcdSlow: true, canarySlow: true, busy: true, rttSlowFrom: 14}, causeContention, causeNetwork),
		{name: "a busy disk, one workload moving 80 % of its bytes: noisy_neighbour naming it", input: one(neighbourOf(true, dominating)),
			expr: []exprTest{
				{Expr: fmt.Sprintf(`%s{node="n1"}`, ruleEtcdVerdict), EvalTime: "20m", ExpSamples: []expSample{
					{fmt.Sprintf(`%s{cause="%s", node="n1", workload="backup.service"}`, ruleEtcdVerdict, causeNeighbour), 1}}},
				near(ruleEtcdNeighbourShare+`{workload="backup.service"}`, "20m", `node="n1", workload="backup.service"`, 0.8),
				// The daemon's probes and etcd itself have no share to blame.
				{Expr: ruleEtcdNeighbourShare + `{workload=~"diskcanary|etcd.service"}`, EvalTime: "20m"},
			}},
		alone("a busy disk, the busiest other workload at 20 % (etcd 70 %): contention", neighbourOf(true, small), causeContention),
		alone("a disk not busy, a workload at 20 % of its bytes: disk", neighbourOf(false, small), causeDisk),
		alone("a disk not busy, one workload at 80 % of its few bytes: disk, not the neighbour", neighbourOf(false, dominating), causeDisk),
		alone("a busy disk, the daemon's own probes at 90 % of its bytes: contention, the daemon never blamed", neighbourOf(true, self), causeContention),
		alone("a busy disk, etcd itself at 90 % of its bytes: contention, etcd not its own neighbour", neighbourOf(true, etcdOwn), causeContention),
		alone("a busy disk, the root cgroup (the journal, writeback) at 90 % of its bytes: contention", neighbourOf(true, root), causeContention),
		alone("a busy disk, one workload at 80 %, the canary and etcd fine: healthy", etcdMember{node: "n1", busy: true, io: dominating}, causeHealthy),
		{name: "two causes: a noisy neighbour and the network", input: one(etcdMember{node: "n1", etcdSlow: true, canarySlow: true, busy: true, io: dominating, rttSlowFrom: 14}),
			expr: []exprTest{{Expr: fmt.Sprintf(`%s{node="n1"}`, ruleEtcdVerdict), EvalTime: "20m", ExpSamples: append(verdict("n1", causeNetwork),
				expSample{fmt.Sprintf(`%s{cause="%s", node="n1", workload="backup.service"}`, ruleEtcdVerdict, causeNeighbour), 1})}}},
		// The member behind a slow link: its own round trips are fast, its
		// peer's to it slow; both read network.
		{name: "the member behind a slow link reads network from its peer's round trips",
			input: concat(one(etcdMember{node: "a", id: "id-a", peer: "id-b", rttSlowFrom: 14}), one(etcdMember{node: "b", id: "id-b", peer: "id-a"})),
			expr: []exprTest{
				{Expr: ruleEtcdVerdict, EvalTime: "20m", ExpSamples: append(verdict("a", causeNetwork), verdict("b", causeNetwork)...)},
				near(ruleEtcdPeerRTTP99+`{node="b"}`, "20m", `node="b"`, 0.203776),
			}},
		{name: "etcd and its canary slow, the disk idle: degraded, cause disk", alert: "DiskcanaryEtcdDegraded", at: "20m",
			input: one(etcdMember{node: "n1", etcdSlow: true, canarySlow: true}),
			fire:  []string{`node="n1", cause="disk"`},
			description: "The etcd member on n1 is degraded. Cause: " + etcdCauseDiskText +
				" Evidence (5m): etcd WAL fsync p99 31.84ms; canary fdatasync p99 49.75ms; etcd backend commit p99 3.98ms; worst peer round-trip p99 1.592ms; its median over 24h 1.592ms; slow applies a second 0; leader changes in 15m 0; heartbeats sent late 0; canary disk busy 10%; CPU pressure 5%;"},
		{name: "a busy disk, one workload moving 80 % of its bytes: degraded, cause noisy_neighbour naming it", alert: "DiskcanaryEtcdDegraded", at: "20m",
			input: one(neighbourOf(true, dominating)),
			fire:  []string{`node="n1", cause="noisy_neighbour", workload="backup.service"`},
			description: "The etcd member on n1 is degraded. Cause: a noisy neighbour: the canary on etcd's disk is slow, etcd's own fsync does not read fine against it, the disk is busy (50 %+ utilised), and one workload, backup.service, moved more than 50 % of the bytes on it (80%)." +
				" Evidence (5m): etcd WAL fsync p99 31.84ms; canary fdatasync p99 49.75ms; etcd backend commit p99 3.98ms; worst peer round-trip p99 1.592ms; its median over 24h 1.592ms; slow applies a second 0; leader changes in 15m 0; heartbeats sent late 0; canary disk busy 80%; CPU pressure 5%;"},
		{name: "the disk hangs: degraded, cause disk", alert: "DiskcanaryEtcdDegraded", at: "20m",
			input: one(hung),
			fire:  []string{`node="n1", cause="disk"`},
			description: "The etcd member on n1 is degraded. Cause: " + etcdCauseDiskText +
				" Evidence (5m): the canary's I/O stalled; worst peer round-trip p99 1.592ms; its median over 24h 1.592ms; slow applies a second 0; leader changes in 15m 0; heartbeats sent late 0; canary disk busy 10%; CPU pressure 5%;"},
		{name: "the peer link newly slow: degraded, cause network", alert: "DiskcanaryEtcdDegraded", at: "20m",
			input: one(etcdMember{node: "n3", rttSlowFrom: 14, leaderChangesAt: always}),
			fire:  []string{`node="n3", cause="network"`},
			description: "The etcd member on n3 is degraded. Cause: the network: a round trip between this member and a peer has a p99 over 50 ms, and it is over 2× its median of the last 24h or peer messages fail." +
				" Evidence (5m): etcd WAL fsync p99 1.99ms; canary fdatasync p99 995us; etcd backend commit p99 3.98ms; worst peer round-trip p99 203.8ms; its median over 24h 1.592ms; slow applies a second 0; leader changes in 15m 15; heartbeats sent late 0; canary disk busy 10%; CPU pressure 5%;"},
		{name: "all fine: silent", alert: "DiskcanaryEtcdDegraded", at: "20m", input: one(etcdMember{node: "n7"})},
		{name: "one slow apply a minute: silent", alert: "DiskcanaryEtcdDegraded", at: "20m", input: one(etcdMember{node: "n1", slowApplies: 1})},
		{name: "a planned leader change: silent", alert: "DiskcanaryEtcdDegraded", at: "20m", input: one(etcdMember{node: "n1", leaderChangesAt: []int{12}})},
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
		{name: "etcd with no canary on its node; two WAL probes and none told etcd's data directory", alert: "DiskcanaryEtcdWithoutCanary", at: "20m",
			input: concat(one(etcdMember{node: "n8", noWAL: true}), one(etcdMember{node: "n7"}), one(etcdMember{node: "n9", otherWAL: true})),
			fire:  []string{`node="n8"`, `node="n9"`}},
		{name: "etcd with a canary beside it, or one of two told etcd's data directory: silent", alert: "DiskcanaryEtcdWithoutCanary", at: "20m",
			input: concat(one(etcdMember{node: "n7"}), one(etcdMember{node: "n9", otherWAL: true, declared: true}))},
	}
}

// etcdCauseDiskText is what the disk cause renders to.
const etcdCauseDiskText = "the disk: the canary on etcd's disk is slow or its I/O stalled, etcd's own fsync does not read fine against it, and the disk is not busy — the storage itself (device, its controller, or the stack above it: see the canary's own alerts for which)."
