package rulegen

import (
	"fmt"
	"slices"
	"time"
)

// Who slowed the disk: each device's I/O by workload (the contention
// collector's per-cgroup counters) as rates over the windows the latency
// verdicts read, the share of the device each workload has, and each
// device's busiest workloads, the daemon's own I/O and "other" (a sum of
// many cgroups) never among them.

// latencyWindow is the window of the probe and request p99s the latency
// alerts and the attribution read.
const latencyWindow = 15 * time.Minute

// contentionTop is how many workloads per device the ranking rule keeps.
const contentionTop = 3

// contentionWindows are the rate windows: the latency alerts' and the etcd
// verdict's, so a slow p99 and the I/O beside it cover the same time.
func (p Params) contentionWindows() []time.Duration {
	ws := []time.Duration{latencyWindow}
	if p.EtcdWindow != latencyWindow {
		ws = append(ws, p.EtcdWindow)
	}
	slices.Sort(ws)
	return ws
}

func ruleWorkloadBytes(w time.Duration) string {
	return "device_workload:diskcanary_cgroup_io_bytes:rate" + promDuration(w)
}

func ruleWorkloadOps(w time.Duration) string {
	return "device_workload:diskcanary_cgroup_io_ops:rate" + promDuration(w)
}

func ruleWorkloadShare(w time.Duration) string {
	return "device_workload:diskcanary_cgroup_io_bytes:share_rate" + promDuration(w)
}

func ruleWorkloadTop(w time.Duration) string {
	return fmt.Sprintf("device_workload:diskcanary_cgroup_io_bytes:top%d_rate%s", contentionTop, promDuration(w))
}

func ruleWorkloadSuspects(w time.Duration) string {
	return fmt.Sprintf("device_workload:diskcanary_cgroup_io_bytes:suspects_top%d_rate%s", contentionTop, promDuration(w))
}

// notCulprit are the workloads the ranking leaves out: the daemon's own
// probes (the load it is there to add) and the sum of the cgroups past
// the exporter's top N, which is no one workload.
const notCulprit = `workload!~"diskcanary|other"`

func contentionRecording(p Params) Group {
	g := Group{Name: "diskcanary.contention.recording"}
	dev := p.deviceLabels()
	for _, w := range p.contentionWindows() {
		win := promDuration(w)
		g.Rules = append(g.Rules,
			Rule{Record: ruleWorkloadBytes(w), Expr: fmt.Sprintf("sum by (%s, workload, cgroup) (rate(diskcanary_cgroup_io_bytes_total[%s]))", dev, win)},
			Rule{Record: ruleWorkloadOps(w), Expr: fmt.Sprintf("sum by (%s, workload, cgroup) (rate(diskcanary_cgroup_io_ops_total[%s]))", dev, win)},
			// A device no cgroup moved a byte on has no share (not NaN).
			Rule{Record: ruleWorkloadShare(w), Expr: fmt.Sprintf("%[1]s\n/ on (%[2]s) group_left ()\n(sum by (%[2]s) (%[1]s) > 0)", ruleWorkloadBytes(w), dev)},
			Rule{Record: ruleWorkloadTop(w), Expr: fmt.Sprintf("topk by (%s) (%d, %s{%s} > 0)", dev, contentionTop, ruleWorkloadBytes(w), notCulprit)},
		)
	}
	g.Rules = append(g.Rules, Rule{Record: ruleWorkloadSuspects(latencyWindow), Expr: p.suspectsExpr()})
	return g
}

// suspectsExpr is the ranking on the disks under a slow probe target only:
// a target whose 15-minute fdatasync or read p99 is over its alert
// threshold (with the alert's sample gate) marks the physical disks under
// its device (diskcanary_disk_parent_info), and each such disk's busiest
// three workloads over the same 15 minutes are the suspects.
func (p Params) suspectsExpr() string {
	inst, dev := p.instanceLabels(), p.deviceLabels()
	w := promDuration(latencyWindow)
	slow := func(op string, threshold time.Duration) string {
		return fmt.Sprintf("(%s > %s and %s >= %d)", quantileRule(op, "p99", w), seconds(threshold), samplesRule(op, w), p.MinSamples)
	}
	return fmt.Sprintf(`topk by (%[1]s) (%[3]d,
  %[4]s{%[5]s} > 0
  and on (%[1]s)
  label_replace(
    max by (%[2]s, disk) (
      diskcanary_disk_parent_info
      * on (%[1]s) group_left ()
      max by (%[1]s) (%[6]s or %[7]s)
    ),
    "device", "$1", "disk", "(.+)"
  )
)`, dev, inst, contentionTop, ruleWorkloadBytes(latencyWindow), notCulprit, slow("fdatasync", p.FdatasyncSlow), slow("read", p.ReadSlow))
}

// contentionAlerts say when "who did the I/O" cannot be answered whole:
// no hierarchy accounts block I/O, or passes stop before the end of the
// tree, so the cgroups past the limit are missing from every ranking.
func contentionAlerts(p Params) Group {
	g := Group{Name: "diskcanary.contention.alerts"}
	g.Rules = append(g.Rules,
		p.alert("DiskcanaryContentionBlind", "info",
			"diskcanary_contention_available == 0\nor\ndiskcanary_contention_truncated == 1", p.CollectorFailingFor,
			"who does I/O on this node's disks is not (all) known",
			"diskcanary on {{ $labels.instance }} finds no cgroup hierarchy that accounts block I/O, or its passes over the cgroup tree stop before the end (diskcanary_contention_truncated: too many cgroups for --collector.contention.max-cgroups, or slower than --collector.contention.budget): the per-workload I/O beside a slow disk is missing or partial."),
	)
	return p.linkDashboard(g, dashboardNode, "job", "instance")
}

// contentionCases pin the rates, the shares and the ranking on one device
// with five named workloads, the daemon's own and other, and an idle
// device. Inputs are per minute; evaluated at 20m over full windows.
func contentionCases() []alertCase {
	const sda = `job="diskcanary", instance="n1:9742", device="sda"`
	const sdb = `job="diskcanary", instance="n1:9742", device="sdb"`
	type wl struct {
		workload, cgroup string
		read, write      int // bytes per minute
		ops              int // per minute, read and write each
	}
	// Bytes per second: pod 10 MiB, etcd 1 MiB, backup 512 KiB, cron
	// 64 KiB, a unit that stopped at 10m 0, diskcanary 2 MiB, other
	// 256 KiB; 13.8125 MiB a second on sda in all.
	wls := []wl{
		{"pod/0f2c6a7e-1b2d-4c3e-9f40-5a6b7c8d9e0f/3f4e5d6c7b8a", "/kubepods/burstable/pod0f2c6a7e-1b2d-4c3e-9f40-5a6b7c8d9e0f/3f4e5d6c7b8a99887766554433221100ffeeddccbbaa99887766554433221100", 0, 629145600, 6000},
		{"etcd.service", "/system.slice/etcd.service", 0, 62914560, 1200},
		{"backup.service", "/system.slice/backup.service", 31457280, 0, 60},
		{"cron.service", "/system.slice/cron.service", 3932160, 0, 60},
		{"diskcanary", "/system.slice/diskcanary.service", 62914560, 62914560, 3000},
		{"other", "", 15728640, 0, 600},
	}
	var in []series
	for _, x := range wls {
		l := fmt.Sprintf(`%s, workload="%s", cgroup="%s"`, sda, x.workload, x.cgroup)
		in = append(in,
			series{fmt.Sprintf(`diskcanary_cgroup_io_bytes_total{%s, op="read"}`, l), fmt.Sprintf("0+%dx20", x.read)},
			series{fmt.Sprintf(`diskcanary_cgroup_io_bytes_total{%s, op="write"}`, l), fmt.Sprintf("0+%dx20", x.write)},
			series{fmt.Sprintf(`diskcanary_cgroup_io_ops_total{%s, op="read"}`, l), fmt.Sprintf("0+%dx20", x.ops)},
			series{fmt.Sprintf(`diskcanary_cgroup_io_ops_total{%s, op="write"}`, l), fmt.Sprintf("0+%dx20", x.ops)})
	}
	// A unit that wrote 100 MiB a minute until 4m, then went away with its
	// cgroup: by 20m it is out of every window.
	gone := fmt.Sprintf(`%s, workload="batch.service", cgroup="/system.slice/batch.service"`, sda)
	in = append(in, series{fmt.Sprintf(`diskcanary_cgroup_io_bytes_total{%s, op="write"}`, gone), "0+104857600x4"})
	// sdb: the root cgroup read nothing.
	in = append(in, series{fmt.Sprintf(`diskcanary_cgroup_io_bytes_total{%s, workload="/", cgroup="/", op="read"}`, sdb), "0x20"})

	w := latencyWindow
	lbl := func(dev, workload, cgroup string) string {
		return fmt.Sprintf(`{%s, workload="%s", cgroup="%s"}`, dev, workload, cgroup)
	}
	pod, etcd, backup := wls[0], wls[1], wls[2]
	bytes := ruleWorkloadBytes(w)
	exp := func(name string, vals ...expSample) exprTest {
		return exprTest{Expr: name, EvalTime: "20m", ExpSamples: vals}
	}
	rate := func(x wl) float64 { return float64(x.read+x.write) / 60 }
	const inst = `job="diskcanary", instance="n1:9742"`
	blind := []alertCase{
		{name: "no cgroup I/O accounting for 20 m", alert: "DiskcanaryContentionBlind", at: "20m",
			input: s(`diskcanary_contention_available{`+inst+`}`, "0x30"), fire: []string{inst}},
		{name: "passes truncated for 20 m", alert: "DiskcanaryContentionBlind", at: "20m",
			input: concat(s(`diskcanary_contention_available{`+inst+`}`, "1x30"), s(`diskcanary_contention_truncated{`+inst+`}`, "1x30")), fire: []string{inst}},
		{name: "one truncated pass in 20 m: silent", alert: "DiskcanaryContentionBlind", at: "20m",
			input: concat(s(`diskcanary_contention_available{`+inst+`}`, "1x30"), s(`diskcanary_contention_truncated{`+inst+`}`, "0x10 1 0x19"))},
		{name: "every pass whole: silent", alert: "DiskcanaryContentionBlind", at: "20m",
			input: concat(s(`diskcanary_contention_available{`+inst+`}`, "1x30"), s(`diskcanary_contention_truncated{`+inst+`}`, "0x30"))},
	}
	// sda1's WAL probe is slow (25 ms over 1500 samples), sdb's read probe
	// is not: the suspects are sda's busiest three, none on sdb.
	const sda1 = `job="diskcanary", instance="n1:9742", node="n1", probe="wal", path="/var/lib/etcd-canary", device="sda1"`
	const sdbT = `job="diskcanary", instance="n1:9742", node="n1", probe="randread", path="/data/canary", device="sdb"`
	suspects := ruleWorkloadSuspects(w)
	slowIn := concat(in,
		s(quantileRule("fdatasync", "p99", "15m")+"{"+sda1+"}", "0.025x20"),
		s(samplesRule("fdatasync", "15m")+"{"+sda1+"}", "1500x20"),
		s(quantileRule("read", "p99", "15m")+"{"+sdbT+"}", "0.001x20"),
		s(samplesRule("read", "15m")+"{"+sdbT+"}", "1500x20"),
		s(`diskcanary_disk_parent_info{job="diskcanary", instance="n1:9742", device="sda1", disk="sda"}`, "1x20"),
		s(`diskcanary_disk_parent_info{job="diskcanary", instance="n1:9742", device="sda", disk="sda"}`, "1x20"),
		s(`diskcanary_disk_parent_info{job="diskcanary", instance="n1:9742", device="sdb", disk="sdb"}`, "1x20"),
		s(fmt.Sprintf(`diskcanary_cgroup_io_bytes_total{%s, workload="backup.service", cgroup="/system.slice/backup.service", op="read"}`, sdb), "0+62914560x20"),
	)
	blind = append(blind,
		alertCase{name: "suspects: the busiest three on the disk under a slow probe, none on a disk whose probe is fine", input: slowIn,
			expr: []exprTest{exp(suspects,
				expSample{suspects + lbl(sda, pod.workload, pod.cgroup), 10485760},
				expSample{suspects + lbl(sda, etcd.workload, etcd.cgroup), 1048576},
				expSample{suspects + lbl(sda, backup.workload, backup.cgroup), 524288})}},
		alertCase{name: "suspects: none while every probe is under its threshold", input: in,
			expr: []exprTest{exp(suspects)}},
		alertCase{name: "suspects: none from a slow p99 over too few samples",
			input: concat(in,
				s(quantileRule("fdatasync", "p99", "15m")+"{"+sda1+"}", "0.025x20"),
				s(samplesRule("fdatasync", "15m")+"{"+sda1+"}", "899x20"), // one under the 900 the alert wants
				s(`diskcanary_disk_parent_info{job="diskcanary", instance="n1:9742", device="sda1", disk="sda"}`, "1x20")),
			expr: []exprTest{exp(suspects)}},
	)
	return append(blind, alertCase{
		name:  "workloads ranked by I/O on a device: rates, shares, the busiest three without diskcanary and other",
		input: in,
		expr: []exprTest{
			exp(bytes,
				expSample{bytes + lbl(sda, pod.workload, pod.cgroup), 10485760},
				expSample{bytes + lbl(sda, etcd.workload, etcd.cgroup), 1048576},
				expSample{bytes + lbl(sda, backup.workload, backup.cgroup), 524288},
				expSample{bytes + lbl(sda, "cron.service", "/system.slice/cron.service"), 65536},
				expSample{bytes + lbl(sda, "diskcanary", "/system.slice/diskcanary.service"), 2097152},
				expSample{bytes + lbl(sda, "other", ""), 262144},
				expSample{bytes + lbl(sdb, "/", "/"), 0},
			),
			exp(ruleWorkloadOps(w)+`{workload="etcd.service"}`,
				expSample{ruleWorkloadOps(w) + lbl(sda, etcd.workload, etcd.cgroup), 40}),
			// pod: 10 MiB/s of 14483456 B/s on sda.
			exp(ruleWorkloadShare(w)+`{workload=~"pod/.*|diskcanary"}`,
				expSample{ruleWorkloadShare(w) + lbl(sda, pod.workload, pod.cgroup), rate(pod) / 14483456},
				expSample{ruleWorkloadShare(w) + lbl(sda, "diskcanary", "/system.slice/diskcanary.service"), 2097152.0 / 14483456}),
			// sdb moved nothing: no share, no ranking.
			exp(ruleWorkloadShare(w) + `{device="sdb"}`),
			exp(ruleWorkloadTop(w),
				expSample{ruleWorkloadTop(w) + lbl(sda, pod.workload, pod.cgroup), 10485760},
				expSample{ruleWorkloadTop(w) + lbl(sda, etcd.workload, etcd.cgroup), 1048576},
				expSample{ruleWorkloadTop(w) + lbl(sda, backup.workload, backup.cgroup), 524288}),
		},
	})
}
