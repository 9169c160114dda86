package rulegen

import "fmt"

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
