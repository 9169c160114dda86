package rulegen

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const blkioRoot = "/sys/fs/cgroup/blkio"

// TestFleetDriftEndToEnd: six `diskcanary serve` on six loop-device ext4
// filesystems, one of them slowed by the cgroup-v1 blkio write-IOPS
// throttle, scraped every second by a real Prometheus that loads the rules
// (generated with shortened for: durations and sample floors, and a 10 ms
// drift floor against CI noise). Through the
// Prometheus HTTP API: the fleet-drift alert fires for exactly the slowed
// instance, the etcd 10 ms warning fires for it, and every dashboard's main
// panels return data.
func TestFleetDriftEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the fleet-drift end-to-end test")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: the fleet-drift end-to-end test needs loop devices, mounts and the blkio cgroup (bash .ci/run runs it)")
	}
	prometheus, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("no prometheus binary (Debian package prometheus): skipping the fleet-drift end-to-end test")
	}
	for _, tool := range []string{"losetup", "mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: skipping", tool)
		}
	}
	if _, err := os.Stat(filepath.Join(blkioRoot, "blkio.throttle.write_iops_device")); err != nil {
		t.Skipf("no cgroup-v1 blkio throttle at %s: skipping", blkioRoot)
	}
	start := time.Now()
	bin := buildDiskcanary(t)

	const members, slow = 6, 5 // instance index 5 is throttled
	const cohort = "e2e-loop-ext4"
	type instance struct {
		dev, name, mnt, addr string
		d                    *daemon
	}
	inst := make([]*instance, members)
	for i := range inst {
		dev, mnt := loopFilesystem(t, i)
		inst[i] = &instance{dev: dev, name: filepath.Base(dev), mnt: mnt}
	}

	// The throttle: 15 write IOPS on the slowed instance's loop device. Each
	// fdatasync of the WAL pattern writes a data page from the caller's
	// context, so it waits ~1/15 s; reads are not throttled.
	cg := filepath.Join(blkioRoot, fmt.Sprintf("diskcanary-e2e-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatalf("create blkio cgroup: %v", err)
	}
	t.Cleanup(func() {
		// Runs after the daemons stopped (cleanups are LIFO); move any
		// leftover task to the root first so rmdir succeeds.
		if data, err := os.ReadFile(filepath.Join(cg, "cgroup.procs")); err == nil {
			for _, pid := range strings.Fields(string(data)) {
				_ = os.WriteFile(filepath.Join(blkioRoot, "cgroup.procs"), []byte(pid), 0o644)
			}
		}
		if err := os.Remove(cg); err != nil {
			t.Errorf("remove cgroup %s: %v", cg, err)
		}
	})
	var st unix.Stat_t
	if err := unix.Stat(inst[slow].dev, &st); err != nil {
		t.Fatal(err)
	}
	throttle := fmt.Sprintf("%d:%d 15", unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)))
	writeFile(t, filepath.Join(cg, "blkio.throttle.write_iops_device"), throttle)

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
			writeFile(t, filepath.Join(cg, "cgroup.procs"), strconv.Itoa(in.d.cmd.Process.Pid))
		}
	}
	t.Logf("6 instances on %v; %s throttled to %q (pid %d)", names(inst, func(in *instance) string { return in.name + "@" + in.addr }),
		inst[slow].name, throttle, inst[slow].d.cmd.Process.Pid)

	// The rules, with for: and sample floors shortened for a 2-minute run.
	p := Defaults()
	p.FdatasyncSlowFor = 15 * time.Second
	p.DriftFor = 15 * time.Second
	p.MinSamples = 200
	// The floor is the noise guard: on a CI machine busy with other tests a
	// tmpfs-backed loop device's p99 can reach a few ms from CPU wakeup
	// delays alone. The throttled one sits near 250 ms, far above either.
	p.DriftFloor = 10 * time.Millisecond
	rules, err := marshalYAML(Rules(p))
	if err != nil {
		t.Fatal(err)
	}
	promDir := t.TempDir()
	writeFile(t, filepath.Join(promDir, "rules.yml"), string(rules))
	var targets []string
	for _, in := range inst {
		targets = append(targets, strconv.Quote(in.addr))
	}
	writeFile(t, filepath.Join(promDir, "prometheus.yml"), fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [rules.yml]
scrape_configs:
  - job_name: diskcanary
    static_configs:
      - targets: [%s]
    relabel_configs:
      # The cohort: what a fleet would set from an instance type or volume type.
      - target_label: cohort
        replacement: %s
`, strings.Join(targets, ", "), cohort))
	promAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, prometheus, "--config.file="+filepath.Join(promDir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(promDir, "data"), "--web.listen-address="+promAddr, "--log.level=warn")
	api := "http://" + promAddr
	waitHTTP(t, api+"/-/ready", 30*time.Second)

	slowAddr := inst[slow].addr
	firing := func(alert string) []string {
		var out []string
		for _, a := range promAlerts(t, api) {
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
			logState(t, api)
			t.Fatalf("after 150 s: fleet drift firing for %v, fdatasync slow firing for %v; want both for %s", drift, etcd, slowAddr)
		}
		time.Sleep(2 * time.Second)
	}
	logState(t, api)
	t.Logf("both alerts fire for %s after %v", slowAddr, time.Since(start).Round(time.Second))
	if drift := firing("DiskcanaryFdatasyncFleetDrift"); len(drift) != 1 || drift[0] != slowAddr {
		t.Errorf("fleet drift fires for %v; want exactly [%s]", drift, slowAddr)
	}
	// Reads are not throttled: no instance drifts on reads.
	if drift := firing("DiskcanaryReadFleetDrift"); len(drift) > 0 {
		t.Errorf("read fleet drift fires for %v; reads were not throttled", drift)
	}
	for _, a := range promAlerts(t, api) {
		if a.Labels["alertname"] == "DiskcanaryFdatasyncFleetDrift" && a.Labels["cohort"] != cohort {
			t.Errorf("fleet drift alert cohort %q, want %q", a.Labels["cohort"], cohort)
		}
	}

	// Every dashboard's main panels return data for the slowed instance.
	// Variable values as a user would pick them (the node dashboard's probe
	// variable at its default, All).
	vars := map[string]map[string]string{
		"diskcanary-fleet.json": {"job": "diskcanary", "cohort": cohort},
		"diskcanary-node.json":  {"job": "diskcanary", "instance": slowAddr, "probe": ".*", "disk": inst[slow].name},
		"diskcanary-etcd.json":  {"job": "diskcanary", "instance": slowAddr, "etcd_job": ".*"},
	}
	main := map[string][]string{
		"diskcanary-fleet.json": {"Worst targets by fdatasync p99 (15m)", "Drift: p99 ÷ cohort median (fdatasync, 15m)",
			"fdatasync p99 against its cohort band (p10 / p50 / p90 of peers)", "Fleet-drift outliers", "Stalled targets over time",
			"Worst targets by random-read p99 (15m)", "Drift: p99 ÷ cohort median (read, 15m)"},
		"diskcanary-node.json": {"fdatasync latency (heatmap)", "fdatasync p50 / p99 (5m) with the etcd 10 ms bar",
			"random read latency (heatmap)", "Probe targets on this disk: fdatasync p99 (15m)", "r/s, w/s", "r_await, w_await",
			"%util", "aqu-sz", "rareq-sz, wareq-sz", "Stalled", "Probe write cost (bytes per day, page-granular)"},
		"diskcanary-etcd.json": {"WAL targets meeting the bar (15m p99)", "Worst fdatasync p99 (15m)",
			"Samples behind the p99 (15m, fewest)", "diskcanary fdatasync p99 (5m)"},
	}
	for file, d := range Dashboards(Defaults()) {
		withData, total := 0, 0
		for _, panel := range d.Panels {
			isMain := contains(main[file], panel.Title)
			for _, tg := range panel.Targets {
				q := grafanaVar.ReplaceAllStringFunc(tg.Expr, func(m string) string {
					name := strings.Trim(m, "${}")
					if strings.HasPrefix(name, "__") {
						return "1m"
					}
					if v, ok := vars[file][name]; ok {
						return v
					}
					t.Errorf("%s: no value for %s", file, m)
					return ""
				})
				res := promQuery(t, api, q)
				n := len(res)
				if panel.Title == "Fleet-drift outliers" && (n != 1 || res[0].Value[1] != "1") {
					t.Errorf("Fleet-drift outliers = %v, want 1 (the throttled instance)", res)
				}
				total++
				if n > 0 {
					withData++
				} else if isMain {
					t.Errorf("%s panel %q query %s returns no data:\n%s", file, panel.Title, tg.RefID, q)
				}
			}
		}
		for _, title := range main[file] {
			found := false
			for _, panel := range d.Panels {
				found = found || panel.Title == title
			}
			if !found {
				t.Errorf("%s has no panel %q", file, title)
			}
		}
		t.Logf("%s: %d of %d queries return data (SMART and etcd panels are empty here: loop devices, no etcd)", file, withData, total)
	}
	t.Logf("fleet-drift end to end: %v", time.Since(start).Round(time.Second))
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

// loopFilesystem makes an ext4 filesystem on a loop device backed by a
// tmpfs file (so the unthrottled instances are fast and alike) and mounts
// it; everything is undone in Cleanup.
func loopFilesystem(t *testing.T, i int) (dev, mnt string) {
	t.Helper()
	img := filepath.Join("/dev/shm", fmt.Sprintf("diskcanary-e2e-%d-%d.img", os.Getpid(), i))
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(img) })
	if err := os.Truncate(img, 160<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	dev = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 %s: %v: %s", dev, err, out)
	}
	mnt = t.TempDir()
	if out, err := exec.Command("mount", dev, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v: %s", dev, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	return dev, mnt
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
	Value  string            `json:"value"`
}

func promGet(t *testing.T, u string, into any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	if env.Status != "success" {
		t.Fatalf("GET %s: %s", u, env.Error)
	}
	if err := json.Unmarshal(env.Data, into); err != nil {
		t.Fatal(err)
	}
}

func promAlerts(t *testing.T, api string) []promAlert {
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	promGet(t, api+"/api/v1/alerts", &data)
	return data.Alerts
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func promQuery(t *testing.T, api, q string) []promSample {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	promGet(t, api+"/api/v1/query?query="+url.QueryEscape(q), &data)
	if data.ResultType != "vector" {
		t.Fatalf("query %s: result type %s", q, data.ResultType)
	}
	var out []promSample
	if err := json.Unmarshal(data.Result, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// logState prints the per-instance p99s, the cohort median and the alerts.
func logState(t *testing.T, api string) {
	for _, q := range []string{quantileRule("fdatasync", "p99", "15m"), samplesRule("fdatasync", "15m"), cohortMedianRule("fdatasync"), cohortMembersRule("fdatasync")} {
		var lines []string
		for _, s := range promQuery(t, api, q) {
			lines = append(lines, fmt.Sprintf("%s=%v", s.Metric["instance"]+s.Metric["cohort"], s.Value[1]))
		}
		sort.Strings(lines)
		t.Logf("%s: %s", q, strings.Join(lines, " "))
	}
	for _, a := range promAlerts(t, api) {
		t.Logf("alert %s %s instance=%s probe=%s", a.Labels["alertname"], a.State, a.Labels["instance"], a.Labels["probe"])
	}
}
