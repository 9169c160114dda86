package main

import (
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// groupIntervals are a rule file's group interval lines.
var groupIntervals = regexp.MustCompile(`(?m)^    interval: \S+\n`)

// Throttle of the end-to-end test: reads and writes of the probed loop
// device held to this many per second once the throttle is on, so each
// of the probes' I/Os waits about 1/throttleIOPS.
const throttleIOPS = 10

// TestOnCallDashboardEndToEnd: the daemon probes ext4 on a loop device
// (backing file on /dev/shm: fast) with a WAL and a randread probe; a real
// Prometheus scrapes it every 2 s and evaluates the shipped rules
// (alerts/diskcanary-rules.yml, every group every 2 s); after a minute the daemon is moved into a
// cgroup-v1 blkio group that holds the device to throttleIOPS reads and
// writes a second. dashshot then draws the on-call dashboard over the
// whole run: every panel drawn in the PNG, the panels this setup feeds
// with data, the SMART ones (a loop device has none) without, and the
// read p99 under the 25 ms bar before the throttle and over one throttled
// I/O slot (1/throttleIOPS) at the end. DASHSHOT_OUTPUT=FILE.png keeps
// the picture (docs/oncall-dashboard.png is made so: docs/development.md).
func TestOnCallDashboardEndToEnd(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.SkipUnderRace(t)
	testkit.PrometheusBin(t)
	bin := testkit.Binary(t)
	// The shipped rules with every group at the test's 2 s evaluation
	// interval: their own intervals are minutes, and the run is under 3.
	shipped, err := os.ReadFile(filepath.Join("..", "..", "alerts", "diskcanary-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(rules, groupIntervals.ReplaceAll(shipped, nil), 0o600); err != nil {
		t.Fatal(err)
	}

	mnt, dev := testkit.LoopFSIn(t, "/dev/shm", 256<<20, "ext4")
	cg := testkit.NewReadThrottle(t, dev, throttleIOPS)
	if err := os.WriteFile(filepath.Join(cg.Path, "blkio.throttle.write_iops_device"),
		[]byte(fmt.Sprintf("%s %d", testkit.DevNumbers(t, dev), throttleIOPS)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"wal", "randread"} {
		if err := os.Mkdir(filepath.Join(mnt, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "diskcanary.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %[1]s/wal, interval: 1s, ops: 20, segment_size: 4MiB, min_free: 1MiB, daily_write_budget: 1000GB, stall_threshold: 30s}
    - {name: randread, kind: randread, dir: %[1]s/randread, interval: 1s, ops: 30, working_set: 16MiB, min_free: 1MiB, stall_threshold: 30s}
smart:
  enabled: false
`, mnt)), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	start := time.Now()
	daemon := testkit.StartProcess(t, bin, "serve", "--config.file", cfg, "--web.listen-address", addr, "--log.level", "warn")
	daemon.WaitListening(t, addr, 30*time.Second)
	prom := testkit.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 2s
  scrape_timeout: 1500ms
  evaluation_interval: 2s
rule_files: [%q]
scrape_configs:
  - job_name: diskcanary
    static_configs:
      - targets: [%q]
`, rules, addr), "--log.level=warn")

	time.Sleep(time.Until(start.Add(70 * time.Second)))
	cg.Add(t, daemon.Cmd.Process.Pid)
	t.Logf("throttled %s to %d IOPS after %v", dev, throttleIOPS, time.Since(start).Round(time.Second))
	time.Sleep(time.Until(start.Add(170 * time.Second)))

	out := os.Getenv("DASHSHOT_OUTPUT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "oncall.png")
	}
	var stdout, stderr strings.Builder
	code := run([]string{"-prometheus", prom.URL, "-o", out, "-json", "-scrape-interval", "2s",
		"-range", time.Since(start).Round(time.Second).String(), "-var", "instance=" + addr,
		filepath.Join("..", "..", "dashboards", "diskcanary-node.json")}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("dashshot exit %d: %s", code, stderr.String())
	}
	var s summary
	if err := json.Unmarshal([]byte(stdout.String()), &s); err != nil {
		t.Fatal(err)
	}
	if s.Variables["instance"] != addr || s.Variables["job"] != "diskcanary" || s.Variables["disk"] != filepath.Base(dev) {
		t.Errorf("variables %v: want instance %s, job diskcanary, disk %s", s.Variables, addr, filepath.Base(dev))
	}

	// The picture: every panel's box painted in the panel colour.
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != 1600 || img.Bounds().Dy() != s.Height {
		t.Errorf("picture is %v, want 1600 × %d", img.Bounds(), s.Height)
	}
	if want, _ := onCallShape(t); len(s.Panels) != want {
		t.Errorf("%d panels drawn, want the on-call dashboard's %d", len(s.Panels), want)
	}
	checkColors(t, img, s, themes["light"])

	// Which panels got data: all but SMART's (a loop device has none) and
	// the kernel's error counts (it logged none).
	byTitle := map[string]panelSummary{}
	var got []string
	for _, p := range s.Panels {
		byTitle[p.Title] = p
		if p.Error != "" {
			t.Errorf("panel %q: %s", p.Title, p.Error)
		}
		got = append(got, fmt.Sprintf("%s: %d", p.Title, p.Series))
	}
	sort.Strings(got)
	t.Logf("series per panel:\n%s", strings.Join(got, "\n"))
	for title, want := range map[string]int{
		"Stalled":                               2,
		"Last cycle succeeded":                  2,
		"Time since last cycle":                 2,
		"SMART":                                 0,
		"Temperature":                           0,
		"SMART healthy":                         0,
		"Filesystems the kernel made read-only": 1,
		"Probe write cost (bytes per day, page-granular)":                     2,
		"random read p50 / p99 and write() p99 (5m), with the 25 ms read bar": 3,
		"fdatasync p50 / p99 (5m) with the etcd 10 ms bar":                    2,
		"Probe targets on this disk: fdatasync p99 (15m)":                     1,
		"r/s, w/s":           2,
		"r_await, w_await":   2,
		"%util":              1,
		"aqu-sz":             1,
		"rareq-sz, wareq-sz": 2,
		"rkB/s, wkB/s":       2,
		"Disk":               1,
		"Probe cycles per minute (runs, failures)":                                                        4,
		"fdatasync p99 beside its device's flush/write latency":                                           2,
		"read p99 beside its device's read latency":                                                       2,
		"Verdict per probe target: device (its requests are slow), stack (they are not), none (not slow)": 2,
		"Disk errors the kernel logged, by kind":                                                          0,
		"Filesystem errors the kernel logged, by device and kind":                                         0,
	} {
		if byTitle[title].Series != want {
			t.Errorf("panel %q: %d series, want %d", title, byTitle[title].Series, want)
		}
	}
	for _, title := range []string{"fdatasync latency (heatmap)", "random read latency (heatmap)"} {
		if n := byTitle[title].Series; n < 10 {
			t.Errorf("heatmap %q: %d bucket series, want the histogram's buckets", title, n)
		}
	}
	// cgroup v1 accounts a disk's I/O per cgroup where blk-throttle is
	// active on it, as the test's throttle makes it: the daemon's I/O is
	// there, before and after it moved into the throttled group.
	for _, title := range []string{"Who was doing I/O on this disk (bytes/s by workload, 15m)", "Who was doing I/O on this disk: the ranking (15m)"} {
		if n := byTitle[title].Series; n < 1 {
			t.Errorf("panel %q: no series, want the daemon's I/O", title)
		}
	}

	// The read p99 before and after the throttle.
	var p99 *seriesSummary
	for i, v := range byTitle["random read p50 / p99 and write() p99 (5m), with the 25 ms read bar"].Values {
		if v.Name == "read p99 randread" {
			p99 = &byTitle["random read p50 / p99 and write() p99 (5m), with the 25 ms read bar"].Values[i]
		}
	}
	if p99 == nil || p99.First == nil || p99.Last == nil {
		t.Fatalf("no read p99 series with values: %+v", p99)
	}
	t.Logf("read p99: first %.4f s, last %.4f s, max %.4f s", *p99.First, *p99.Last, *p99.Max)
	if *p99.First > 0.025 {
		t.Errorf("read p99 before the throttle %.4f s, want under the 25 ms bar", *p99.First)
	}
	if *p99.Last < 1.0/throttleIOPS {
		t.Errorf("read p99 under the throttle %.4f s, want at least its wait of one I/O slot, %.3f s", *p99.Last, 1.0/throttleIOPS)
	}
}
