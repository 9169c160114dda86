package rulegen

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// TestFleetDriftEndToEnd: six `diskcanary serve` on six loop-device ext4
// filesystems, one of them slowed by the cgroup-v1 blkio write-IOPS
// throttle, scraped every second by a real Prometheus that loads the rules
// (generated with shortened for: durations and sample floors, and a 10 ms
// drift floor against CI noise). Through the
// Prometheus HTTP API: the fleet-drift alert fires for exactly the slowed
// instance, the etcd 10 ms warning fires for it, and every dashboard query
// returns data unless fleetEmptyHere says why it cannot here.
func TestFleetDriftEndToEnd(t *testing.T) {
	// Mostly waiting on Prometheus: run beside the other such tests
	// (the etcd verdict, which judges latency, runs alone before them).
	t.Parallel()
	testkit.E2E(t)
	testkit.RequireRoot(t)
	testkit.SkipUnderRace(t)
	testkit.PrometheusBin(t) // skip before building anything
	start := time.Now()
	bin := testkit.Binary(t)

	const members, slow = 6, 5 // instance index 5 is throttled
	const cohort = "e2e-loop-ext4"
	type instance struct {
		dev, name, mnt, addr string
		d                    *daemon
	}
	inst := make([]*instance, members)
	for i := range inst {
		// ext4 images on tmpfs, so the unthrottled instances are fast and
		// alike.
		mnt, dev := testkit.LoopFSIn(t, "/dev/shm", 160<<20, "ext4")
		inst[i] = &instance{dev: dev, name: filepath.Base(dev), mnt: mnt}
	}

	// The throttle: 15 write IOPS on the slowed instance's loop device. Each
	// fdatasync of the WAL pattern writes a data page from the caller's
	// context, so it waits ~1/15 s; reads are not throttled. The cgroup is
	// removed after the daemons stopped (cleanups are LIFO).
	const writeIOPS = 15
	cg := testkit.NewThrottle(t, inst[slow].dev, writeIOPS)
	throttle := fmt.Sprintf("%s %d", testkit.DevNumbers(t, inst[slow].dev), writeIOPS)

	for i, in := range inst {
		cfg := filepath.Join(t.TempDir(), "diskcanary.yml")
		writeFile(t, cfg, fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %[1]s/canary, interval: 1s, ops: 50, min_free: 1MiB, daily_write_budget: 1000GB, stall_threshold: 30s}
    - {name: randread, kind: randread, dir: %[1]s/canary, interval: 2s, ops: 20, working_set: 8MiB, min_free: 1MiB}
smart:
  enabled: false
`, in.mnt))
		if err := os.Mkdir(filepath.Join(in.mnt, "canary"), 0o755); err != nil {
			t.Fatal(err)
		}
		in.d = startServe(t, bin, "--config.file", cfg)
		in.addr = in.d.addr
		if i == slow {
			cg.Add(t, in.d.cmd.Process.Pid)
		}
	}
	t.Logf("6 instances on %v; %s throttled to %q (pid %d)", names(inst, func(in *instance) string { return in.name + "@" + in.addr }),
		inst[slow].name, throttle, inst[slow].d.cmd.Process.Pid)

	// The rules, with for: and sample floors shortened for a 2-minute run.
	p := Defaults()
	everyGroupAtGlobal(&p)
	p.FdatasyncSlowFor = 15 * time.Second
	p.DriftFor = 15 * time.Second
	p.MinSamples = 200
	// The floor is the noise guard: on a CI machine busy with other tests a
	// tmpfs-backed loop device's p99 can reach a few ms from CPU wakeup
	// delays alone. The throttled one sits near 250 ms, far above either.
	p.DriftFloor = 10 * time.Millisecond
	rulesFile := writeRules(t, p)
	var targets []string
	for _, in := range inst {
		targets = append(targets, strconv.Quote(in.addr))
	}
	prom := testkit.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: diskcanary
    static_configs:
      - targets: [%s]
    relabel_configs:
      # The cohort: what a fleet would set from an instance type or volume type.
      - target_label: cohort
        replacement: %s
`, rulesFile, strings.Join(targets, ", "), cohort), "--log.level=warn")

	slowAddr := inst[slow].addr
	firing := func(alert string) []string {
		var out []string
		for _, a := range prom.Alerts(t) {
			if a.Labels["alertname"] == alert && a.State == "firing" {
				out = append(out, a.Labels["instance"])
			}
		}
		sort.Strings(out)
		return out
	}
	deadline := time.Now().Add(150 * time.Second)
	for {
		drift, etcd := firing("DiskcanaryFdatasyncFleetDrift"), firing("DiskcanaryFdatasyncSlow")
		if contains(drift, slowAddr) && contains(etcd, slowAddr) {
			break
		}
		if time.Now().After(deadline) {
			logState(t, prom)
			t.Fatalf("after 150 s: fleet drift firing for %v, fdatasync slow firing for %v; want both for %s", drift, etcd, slowAddr)
		}
		time.Sleep(2 * time.Second)
	}
	logState(t, prom)
	t.Logf("both alerts fire for %s after %v", slowAddr, time.Since(start).Round(time.Second))
	if drift := firing("DiskcanaryFdatasyncFleetDrift"); len(drift) != 1 || drift[0] != slowAddr {
		t.Errorf("fleet drift fires for %v; want exactly [%s]", drift, slowAddr)
	}
	// Reads are not throttled: no instance drifts on reads.
	if drift := firing("DiskcanaryReadFleetDrift"); len(drift) > 0 {
		t.Errorf("read fleet drift fires for %v; reads were not throttled", drift)
	}
	for _, a := range prom.Alerts(t) {
		if a.Labels["alertname"] == "DiskcanaryFdatasyncFleetDrift" && a.Labels["cohort"] != cohort {
			t.Errorf("fleet drift alert cohort %q, want %q", a.Labels["cohort"], cohort)
		}
	}

	// Every dashboard query returns data where its panel should have data
	// here, with the variables resolved as Grafana would (the node and
	// etcd dashboards on the slowed instance, everything else at its
	// default); the on-call dashboard's disk variable resolves to the
	// slowed instance's loop device among the six.
	picks := map[string]map[string]string{
		"diskcanary-node.json": {"instance": slowAddr},
		"diskcanary-etcd.json": {"instance": slowAddr},
	}
	values, options := checkDashboardsLive(t, prom, p, picks, fleetEmptyHere)
	if got := values["diskcanary-node.json"]["disk"]; got != inst[slow].name {
		t.Errorf("on-call disk variable = %q (options %v), want the slowed instance's disk %s", got, options["diskcanary-node.json"]["disk"], inst[slow].name)
	}
	t.Logf("fleet-drift end to end: %v", time.Since(start).Round(time.Second))
}

// noEtcdCanary: the etcd verdict's canary is the WAL probe on etcd's disk,
// one per node; the six instances here share the empty node label and
// none is told an etcd data directory.
const noEtcdCanary = "no etcd is scraped, and no WAL probe stands for an etcd member's disk"

// fleetEmptyHere are the dashboard queries that have no data in the fleet
// end to end, and why: every other query must return data.
var fleetEmptyHere = map[string]map[string]string{
	"diskcanary-fleet.json": {
		"Wear used (distribution)":  "SMART is off: loop devices have none",
		"Most worn disks":           "SMART is off",
		"Disks with SMART problems": "SMART is off, and nothing fails",
		"Stalled targets":           "no probe stalls",
		"read p99 against its cohort band (p10 / p50 / p90 of peers)/D": "reads are not throttled: no read outlier",
		"randread capacity ÷ a week earlier":                            "no capacity probe (opt-in), and no week of data",
		"randwrite capacity ÷ a week earlier":                           "no capacity probe (opt-in), and no week of data",
		"wal capacity ÷ a week earlier":                                 "no capacity probe (opt-in), and no week of data",
		"Capacity sweeps: the last one of each probe":                   "no capacity probe (opt-in)",
	},
	"diskcanary-node.json": {
		"SMART healthy":                          "SMART is off",
		"SMART":                                  "SMART is off",
		"Temperature":                            "SMART is off",
		"Disk errors the kernel logged, by kind": "the kernel logs no error for this disk",
		"Filesystem errors the kernel logged, by device and kind":                                                         "the kernel logs no error for this disk's filesystem",
		"Exact counters: SCSI commands failed and timed out (SCSI/SATA disks), errors the filesystems recorded on disk/A": "loop devices have no SCSI counters",
		"Exact counters: SCSI commands failed and timed out (SCSI/SATA disks), errors the filesystems recorded on disk/B": "loop devices have no SCSI counters",
	},
	"diskcanary-etcd.json": {
		"Verdict per etcd member (DiskcanaryEtcdDegraded after 5m)":        "no etcd is scraped",
		"Evidence per member (5m)/A":                                       "no etcd is scraped",
		"Evidence per member (5m)/C":                                       "no etcd is scraped",
		"Evidence per member (5m)/D":                                       "no etcd is scraped",
		"Evidence per member (5m)/E":                                       "no etcd is scraped",
		"Evidence per member (5m)/H":                                       "no etcd is scraped",
		"Evidence per member (5m)/B":                                       noEtcdCanary,
		"Evidence per member (5m)/F":                                       noEtcdCanary,
		"Evidence per member (5m)/I":                                       noEtcdCanary,
		"etcd WAL fsync p99 and the canary's fdatasync p99 (5m)/B":         noEtcdCanary,
		"Canary's disk utilisation":                                        noEtcdCanary,
		"etcd WAL fsync p99 and the canary's fdatasync p99 (5m)/A":         "no etcd is scraped",
		"etcd backend commit p99":                                          "no etcd is scraped",
		"Worst peer round-trip p99":                                        "no etcd is scraped",
		"Leader changes, slow applies, heartbeat send failures (increase)": "no etcd is scraped",
		"etcd process CPU (cores)":                                         "no etcd is scraped",
	},
}

func names[T any](xs []T, f func(T) string) []string {
	var out []string
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// logState prints the per-instance p99s, the cohort median and the alerts.
func logState(t *testing.T, prom *testkit.Prometheus) {
	for _, q := range []string{quantileRule("fdatasync", "p99", "15m"), samplesRule("fdatasync", "15m"), cohortMedianRule("fdatasync"), cohortMembersRule("fdatasync")} {
		var lines []string
		for _, s := range prom.Query(t, q) {
			lines = append(lines, fmt.Sprintf("%s=%v", s.Metric["instance"]+s.Metric["cohort"], s.Value[1]))
		}
		sort.Strings(lines)
		t.Logf("%s: %s", q, strings.Join(lines, " "))
	}
	for _, a := range prom.Alerts(t) {
		t.Logf("alert %s %s instance=%s probe=%s", a.Labels["alertname"], a.State, a.Labels["instance"], a.Labels["probe"])
	}
}
