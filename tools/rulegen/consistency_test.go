package rulegen

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/diskcanary/diskcanary/internal/smart/smarttest"
	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/internal/testkit/testfs"
)

// expression is one PromQL query and where it comes from.
type expression struct {
	where, expr string
	dashboard   bool
}

// grafanaVar matches $var, ${var} and ${var:format} (not label_replace's $1).
var grafanaVar = regexp.MustCompile(`\$\{?([A-Za-z_]\w*)(:\w+)?\}?`)

// promqlOf turns a dashboard query into PromQL: Grafana's interval
// variables become a duration, the others a label value.
func promqlOf(q string) string {
	return grafanaVar.ReplaceAllStringFunc(q, func(m string) string {
		if strings.HasPrefix(m, "$__") || strings.HasPrefix(m, "${__") {
			return "5m"
		}
		return "x"
	})
}

// Grafana's Prometheus variable queries: label_values(selector, label)
// and query_result(expr).
var (
	labelValues = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)
	queryResult = regexp.MustCompile(`^query_result\((.*)\)$`)
)

// allExpressions reads the rules and dashboards as generated with the
// default parameters (the committed files, see TestCommittedFilesAreGenerated).
func allExpressions(t *testing.T) []expression {
	p := Defaults()
	var out []expression
	for _, g := range Rules(p).Groups {
		for _, r := range g.Rules {
			out = append(out, expression{where: "rule " + r.Record + r.Alert, expr: r.Expr})
		}
	}
	for name, d := range generatedDashboards(t, p) {
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			m := labelValues.FindStringSubmatch(v.Definition)
			if m == nil {
				m = queryResult.FindStringSubmatch(v.Definition)
			}
			if m == nil {
				t.Errorf("%s: variable %s: query %q is neither label_values(selector, label) nor query_result(expr)", name, v.Name, v.Definition)
				continue
			}
			out = append(out, expression{where: name + " variable " + v.Name, expr: promqlOf(m[1]), dashboard: true})
		}
		for _, panel := range d.Panels {
			for _, tg := range panel.Targets {
				out = append(out, expression{where: fmt.Sprintf("%s panel %q %s", name, panel.Title, tg.RefID), expr: promqlOf(tg.Expr), dashboard: true})
			}
		}
	}
	return out
}

// selector is one metric an expression selects and the labels it matches on.
type selector struct {
	name   string
	labels []string
}

// selectors returns the metrics an expression selects.
func selectors(e parser.Expr) []selector {
	var out []selector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		sel := selector{name: vs.Name}
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel {
				if m.Type == labels.MatchEqual {
					sel.name = m.Value
				}
				continue
			}
			sel.labels = append(sel.labels, m.Name)
		}
		out = append(out, sel)
		return nil
	})
	return out
}

// parseAll parses every expression and returns, per metric name, where it
// is used and the label names it is matched on.
func parseAll(t *testing.T) (used map[string][]string, matched map[string]map[string]bool) {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	used, matched = map[string][]string{}, map[string]map[string]bool{}
	for _, e := range allExpressions(t) {
		ast, err := p.ParseExpr(e.expr)
		if err != nil {
			t.Errorf("%s: %v\n%s", e.where, err, e.expr)
			continue
		}
		for _, s := range selectors(ast) {
			if s.name == "" {
				t.Errorf("%s: a selector without a metric name", e.where)
				continue
			}
			used[s.name] = append(used[s.name], e.where)
			if matched[s.name] == nil {
				matched[s.name] = map[string]bool{}
			}
			for _, l := range s.labels {
				matched[s.name][l] = true
			}
		}
	}
	return used, matched
}

// TestExpressionsParse: every rule and dashboard query parses with the
// Prometheus PromQL parser.
func TestExpressionsParse(t *testing.T) {
	used, _ := parseAll(t)
	if len(used) < 40 {
		t.Fatalf("only %d metric names found in the expressions", len(used))
	}
	// And every recording rule the dashboards and alerts read is defined
	// before... anywhere in the file.
	recorded := recordedNames()
	for name, where := range used {
		if strings.Contains(name, ":") && !recorded[name] {
			t.Errorf("%s reads recording rule %s, which no rule defines", where[0], name)
		}
	}
}

func recordedNames() map[string]bool {
	out := map[string]bool{}
	for _, g := range Rules(Defaults()).Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				out[r.Record] = true
			}
		}
	}
	return out
}

// notDiskcanary are the series the rules and dashboards read that other
// software exports: Prometheus' own `up` (exporter-down alert) and etcd's
// latency histograms (the etcd dashboard, shown beside diskcanary's).
var notDiskcanary = map[string]string{
	"up": "Prometheus: scrape health of the diskcanary job",
	"etcd_disk_wal_fsync_duration_seconds_bucket":      "etcd: shown beside diskcanary's fdatasync p99",
	"etcd_disk_backend_commit_duration_seconds_bucket": "etcd: shown beside diskcanary's fdatasync p99",
	"etcd_disk_wal_fsync_duration_seconds_count":       "etcd: its members, for the etcd verdict",
	"etcd_network_peer_round_trip_time_seconds_bucket": "etcd: the network witness of the etcd verdict",
	"etcd_network_peer_round_trip_time_seconds_count":  "etcd: the samples behind the verdict's round-trip p99",
	"etcd_disk_backend_commit_duration_seconds_count":  "etcd: the samples behind the verdict's commit p99",
	"etcd_network_peer_sent_failures_total":            "etcd: failed peer messages, the etcd verdict's network witness",
	"etcd_network_peer_received_failures_total":        "etcd: failed peer messages, the etcd verdict's network witness",
	"etcd_server_id":                            "etcd: the member ID a peer's round trip (To) names, joined to its node",
	"etcd_server_slow_apply_total":              "etcd: trouble counters of the etcd verdict",
	"etcd_server_heartbeat_send_failures_total": "etcd: trouble counters of the etcd verdict",
	"etcd_server_leader_changes_seen_total":     "etcd: trouble counters of the etcd verdict",
	"process_cpu_seconds_total":                 "etcd's process CPU (the etcd dashboard)",
}

// notLiveHere lists diskcanary series that exist only on hardware or after
// an event a short live run cannot produce. The live run below makes every
// other series the rules and dashboards read appear (a probe that always
// fails for failures_total{reason}; SMART through the project's fake
// smartctl replaying real smartctl --json output of an ATA and an NVMe
// device, which also emits the standby, quarantine and timeout series;
// real kernel errors as root). Add a name here only with the reason it
// cannot be live.
var notLiveHere = map[string]string{
	"diskcanary_disk_scsi_io_errors_total":   "only SCSI and SATA disks have the midlayer's counters; the test machines have virtio and loop disks (collector TestErrorsFromSysfsAndMounts replays a SATA disk's sysfs)",
	"diskcanary_disk_scsi_io_timeouts_total": "as diskcanary_disk_scsi_io_errors_total",
}

// cgroupIOSeries appear once a cgroup did I/O on a device the kernel
// accounts per cgroup.
var cgroupIOSeries = []string{"diskcanary_cgroup_io_bytes_total", "diskcanary_cgroup_io_ops_total"}

// provokeCgroupIO makes the test's own cgroup write to a loop device's
// filesystem that cgroup v1 blkio accounts (blk-throttle activated with a
// no-limit rule); cgroup v2 accounts every device. It reports false
// without root.
func provokeCgroupIO(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	mnt, dev := testkit.LoopFSIn(t, "/dev/shm", 64<<20, "ext4")
	if _, err := os.Stat("/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device"); err == nil {
		testkit.ActivateBlkioAccounting(t, dev)
	}
	f, err := os.OpenFile(filepath.Join(mnt, "io"), os.O_CREATE|os.O_WRONLY|syscall.O_DIRECT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf, err := syscall.Mmap(-1, 0, 1<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE) // page-aligned for O_DIRECT
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Munmap(buf) }()
	if _, err := f.Write(buf); err != nil {
		t.Fatal(err)
	}
	return true
}

// kernelLogSeries appear only after the kernel logs a storage error, and
// only to a daemon that may read /dev/kmsg (root here, CAP_SYSLOG).
var kernelLogSeries = []string{"diskcanary_disk_errors_total", "diskcanary_filesystem_errors_total"}

// provokeKernelErrors makes the kernel log real storage errors for a
// running daemon to count: a read of a loop device over the FUSE test
// filesystem failing with EIO, and an ext4 error (trigger_fs_error) on a
// loop-device filesystem. It reports false without root.
func provokeKernelErrors(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	m := testfs.Start(t, t.TempDir())
	dev := m.LoopDevice(t)
	m.Do(t, "io-error EIO")
	if f, err := os.Open(dev); err == nil {
		_, _ = f.Read(make([]byte, 4096)) // buffered: the kernel reads ahead and fails
		f.Close()
	}
	_, fsDev := testkit.LoopFSIn(t, "/dev/shm", 64<<20, "ext4")
	trigger := filepath.Join("/sys/fs/ext4", filepath.Base(fsDev), "trigger_fs_error")
	if err := os.WriteFile(trigger, []byte("diskcanary consistency test"), 0); err != nil {
		t.Fatalf("ext4 error: %v", err)
	}
	return true
}

// TestExpressionsUseLiveMetrics: every metric name in the rules and
// dashboards is a recording rule, or a metric family a running `diskcanary
// serve` exports on /metrics (probes on a temp dir, one broken probe, SMART
// through the project's fake smartctl answering with real smartctl --json
// fixtures), or one of the two short documented lists above.
func TestExpressionsUseLiveMetrics(t *testing.T) {
	used, matched := parseAll(t)
	bin := testkit.Binary(t)
	fake := smarttest.Install(t, smarttest.FakeConfig{
		Scan: []map[string]string{{"name": "/dev/sda", "type": "sat", "protocol": "ATA"}, {"name": "/dev/sdb", "type": "sat", "protocol": "ATA"},
			{"name": "/dev/nvme0", "type": "nvme", "protocol": "NVMe"}},
		Devices: map[string]smarttest.FakeDevice{
			"/dev/sda": {Fixture: smarttest.Fixture("sat-hdd-reallocated-304-smartctl-exporter.json")},
			// a self-test log
			"/dev/sdb": {Fixture: smarttest.Fixture("ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json")},
			// smartctl 7.5: the drive's own temperature limits
			"/dev/nvme0": {Fixture: smarttest.Fixture("nvme-healthy-v7.5-beszel.json")},
		},
	})
	dir := t.TempDir()
	// The broken probe wants 1000 TB free: every cycle fails (low_space),
	// so diskcanary_probe_failures_total{reason} exists. The capacity probe
	// sweeps one 2-second step within a second of the start.
	cfg := filepath.Join(t.TempDir(), "diskcanary.yml")
	writeFile(t, cfg, fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %[1]s, interval: 1s, ops: 20, min_free: 1MiB, etcd_data_dir: %[1]s}
    - {name: randread, kind: randread, dir: %[1]s, interval: 1s, ops: 20, working_set: 4MiB, min_free: 1MiB}
    - {name: broken, kind: wal, dir: %[1]s, interval: 1s, ops: 1, min_free: 1000TB}
    - {name: capacity, kind: capacity, dir: %[1]s, interval: 1h, jitter: 0.0001, rates: [500], max_p99: 1s, working_set: 4MiB, min_free: 1MiB}
smart:
  smartctl: %[2]s
`, dir, fake))
	d := startServe(t, bin, "--config.file", cfg)
	notLive := maps.Clone(notLiveHere)
	var wantKernel []string
	if provokeKernelErrors(t) {
		wantKernel = kernelLogSeries
	} else {
		for _, n := range kernelLogSeries {
			notLive[n] = "needs root: the daemon reads the kernel log with CAP_SYSLOG, and the test makes the errors with loop devices"
		}
	}
	want := []string{"diskcanary_fdatasync_duration_seconds", "diskcanary_read_duration_seconds",
		"diskcanary_probe_failures_total", "diskcanary_disk_reads_completed_total", "diskcanary_capacity_iops",
		"diskcanary_smart_healthy", "diskcanary_smart_reallocated_sectors", "diskcanary_smart_critical_warning", "diskcanary_smart_available_spare_ratio",
		"diskcanary_smart_selftest_last_result", "diskcanary_smart_temperature_max_operating_celsius",
		"diskcanary_smart_command_timeouts_total", "diskcanary_smart_offline_uncorrectable_sectors"}
	want = append(want, wantKernel...)
	if provokeCgroupIO(t) {
		want = append(want, cgroupIOSeries...)
	} else {
		for _, n := range cgroupIOSeries {
			notLive[n] = "needs root on cgroup v1: the kernel counts a device per cgroup only once blk-throttle is active on it, and the test activates it on a loop device"
		}
	}
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(60 * time.Second)
	for {
		fams = scrape(t, d.url)
		missing := ""
		for _, w := range want {
			if fams[w] == nil {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s /metrics still lacks %s", missing)
		}
		time.Sleep(500 * time.Millisecond)
	}
	live := map[string]bool{}
	liveLabels := map[string]map[string]bool{} // series name → its label names
	for name, f := range fams {
		ls := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				ls[lp.GetName()] = true
			}
		}
		live[name], liveLabels[name] = true, ls
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				live[name+suffix], liveLabels[name+suffix] = true, ls
			}
		}
	}
	recorded := recordedNames()
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	liveCount := 0
	for _, n := range names {
		switch {
		case recorded[n], notDiskcanary[n] != "":
		case live[n]:
			liveCount++
			// Labels a query matches on must exist on the live series:
			// Prometheus adds job and instance, the scrape config the cohort,
			// external labels or the remote-write pipeline the cluster.
			for l := range matched[n] {
				if l != "job" && l != "instance" && l != Defaults().CohortLabel && l != Defaults().ClusterLabel && !liveLabels[n][l] {
					t.Errorf("%s is matched on label %q, which the live series do not have (used by %s)", n, l, used[n][0])
				}
			}
		case notLive[n] != "":
		default:
			t.Errorf("%s (used by %s) is neither on a live diskcanary /metrics nor a recording rule", n, used[n][0])
		}
	}
	for n := range notLive {
		if live[n] {
			t.Errorf("%s is live now: drop it from notLiveHere", n)
		}
	}
	// Every series the exporter serves is read by an expression or
	// dropped at the scrape (ScrapeDrops), never neither.
	var read, drop int
	for name, f := range fams {
		names := []string{name}
		if f.GetType() == dto.MetricType_HISTOGRAM {
			names = []string{name + "_bucket", name + "_count", name + "_sum"}
		}
		for _, m := range f.GetMetric() {
			ls := map[string]string{}
			for _, lp := range m.GetLabel() {
				ls[lp.GetName()] = lp.GetValue()
			}
			for _, n := range names {
				switch {
				case dropped(n, ls):
					drop++
				case len(used[n]) > 0 && notDiskcanary[n] == "":
					read++
				default:
					t.Errorf("%s%v: no alert, rule or panel reads it and ScrapeDrops keeps it", n, ls)
				}
			}
		}
	}
	t.Logf("live series (buckets one each): %d read, %d dropped at the scrape", read, drop)
	t.Logf("%d metric names used: %d live on /metrics, %d recording rules, %d allowlisted (%d not live here, %d not diskcanary's)",
		len(names), liveCount, countIn(names, recorded), len(notLive)+len(notDiskcanary), len(notLive), len(notDiskcanary))
}

func countIn(names []string, set map[string]bool) int {
	n := 0
	for _, x := range names {
		if set[x] {
			n++
		}
	}
	return n
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// everyGroupAtGlobal puts every group of p at the global evaluation
// interval: the end-to-end tests' second or two, where the shipped
// groups' minutes would outlast the test.
func everyGroupAtGlobal(p *Params) { p.Interval15m, p.Interval1h, p.Interval = 0, 0, 0 }

// writeRules writes the rule file p generates into a temporary directory,
// for an end-to-end test's Prometheus, and returns its path.
func writeRules(t *testing.T, p Params) string {
	t.Helper()
	rules, err := marshalYAML(Rules(p))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "rules.yml")
	writeFile(t, file, string(rules))
	return file
}

// requireEtcd is etcd's path, or a skip saying how to install it.
func requireEtcd(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("skipping: needs etcd on PATH (apt-get install etcd-server)")
	}
	return bin
}
