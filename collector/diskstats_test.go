package collector

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden .prom files under testdata/diskstats")

const diskstatsFixtures = "testdata/diskstats"

// partCollector adapts one part to prometheus.Collector for testutil.
type partCollector struct{ p Collector }

func (pc partCollector) Describe(chan<- *prometheus.Desc) {}
func (pc partCollector) Collect(ch chan<- prometheus.Metric) {
	if err := pc.p.Update(ch); err != nil {
		panic(err)
	}
}

func newTestDiskstats(t *testing.T, procfs string, ds config.Diskstats) *diskstatsCollector {
	t.Helper()
	p, err := newDiskstatsCollector(Options{Config: &config.Config{Diskstats: ds},
		Paths: hostpath.Paths{ProcFS: procfs, SysFS: filepath.Join(diskstatsFixtures, "sys")}})
	require.NoError(t, err)
	return p.(*diskstatsCollector)
}

// compareGolden scrapes the part and compares the whole exposition with
// testdata/diskstats/NAME.prom (rewritten with -update).
func compareGolden(t *testing.T, p Collector, name string) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(partCollector{p})
	golden := filepath.Join(diskstatsFixtures, name+".prom")
	if *update {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		var b strings.Builder
		for _, mf := range mfs {
			require.NoError(t, writeMetricFamily(&b, mf))
		}
		require.NoError(t, os.WriteFile(golden, []byte(b.String()), 0o644))
	}
	f, err := os.Open(golden)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, testutil.GatherAndCompare(reg, f))
}

func TestDiskstatsGolden(t *testing.T) {
	for _, k := range []string{"k14", "k18", "k20"} {
		t.Run(k, func(t *testing.T) {
			p := newTestDiskstats(t, filepath.Join(diskstatsFixtures, k, "proc"), config.Diskstats{})
			compareGolden(t, p, k)
		})
	}
}

// The field count decides which families exist: no discard series on a
// 14-field kernel, no flush series on an 18-field one.
func TestDiskstatsFieldCounts(t *testing.T) {
	cases := map[string]struct{ discard, flush bool }{
		"k14": {false, false}, "k18": {true, false}, "k20": {true, true},
	}
	for k, want := range cases {
		p := newTestDiskstats(t, filepath.Join(diskstatsFixtures, k, "proc"), config.Diskstats{})
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(partCollector{p})
		n, err := testutil.GatherAndCount(reg, "diskcanary_disk_discards_completed_total")
		require.NoError(t, err)
		require.Equal(t, want.discard, n > 0, k)
		n, err = testutil.GatherAndCount(reg, "diskcanary_disk_flush_requests_total")
		require.NoError(t, err)
		require.Equal(t, want.flush, n > 0, k)
	}
}

// Base units: sectors are 512 bytes, times are milliseconds in the kernel.
func TestDiskstatsUnits(t *testing.T) {
	p := newTestDiskstats(t, filepath.Join(diskstatsFixtures, "k20", "proc"), config.Diskstats{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(partCollector{p})
	want := `
# HELP diskcanary_disk_read_bytes_total The total number of bytes read successfully.
# TYPE diskcanary_disk_read_bytes_total counter
diskcanary_disk_read_bytes_total{device="sda"} 1.024e+07
# HELP diskcanary_disk_discarded_bytes_total The total number of bytes discarded successfully (Linux 4.18+).
# TYPE diskcanary_disk_discarded_bytes_total counter
diskcanary_disk_discarded_bytes_total{device="sda"} 1.048576e+06
# HELP diskcanary_disk_io_time_weighted_seconds_total Total seconds spent doing I/Os, weighted by the number in flight (the basis of iostat's aqu-sz).
# TYPE diskcanary_disk_io_time_weighted_seconds_total counter
diskcanary_disk_io_time_weighted_seconds_total{device="sda"} 13
# HELP diskcanary_disk_flush_requests_time_seconds_total The total number of seconds spent by all flush requests (Linux 5.5+).
# TYPE diskcanary_disk_flush_requests_time_seconds_total counter
diskcanary_disk_flush_requests_time_seconds_total{device="sda"} 0.07
`
	// Only sda's values matter here; filter the gathered output to it.
	p.include = regexpMust(t, "^sda$")
	p.exclude = nil
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"diskcanary_disk_read_bytes_total", "diskcanary_disk_discarded_bytes_total",
		"diskcanary_disk_io_time_weighted_seconds_total", "diskcanary_disk_flush_requests_time_seconds_total"))
}

// The join: every device maps to the physical disks under it.
func TestDiskstatsParentInfo(t *testing.T) {
	p := newTestDiskstats(t, filepath.Join(diskstatsFixtures, "k20", "proc"), config.Diskstats{DeviceInclude: ".*"})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(partCollector{p})
	pairs := gatherPairs(t, reg)
	want := map[string][]string{
		"sda": {"sda"}, "sda1": {"sda"}, "sda2": {"sda"},
		"sdb": {"sdb"}, "sdb1": {"sdb"},
		"nvme0n1": {"nvme0n1"}, "nvme0n1p1": {"nvme0n1"},
		"md0":   {"nvme0n1", "sdb"},
		"dm-0":  {"nvme0n1", "sda", "sdb"},
		"dm-1":  {"nvme0n1", "sda", "sdb"},
		"loop0": {"loop0"}, "ram0": {"ram0"},
	}
	require.Equal(t, want, pairs)
}

// With the default filter a partition's own counters are dropped but its
// join series stays, and ram0 (excluded whole disk) has neither.
func TestDiskstatsDefaultFilterKeepsJoin(t *testing.T) {
	p := newTestDiskstats(t, filepath.Join(diskstatsFixtures, "k20", "proc"), config.Diskstats{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(partCollector{p})
	pairs := gatherPairs(t, reg)
	require.Equal(t, []string{"sda"}, pairs["sda1"])
	require.NotContains(t, pairs, "ram0")
	devices := gatherDevices(t, reg, "diskcanary_disk_reads_completed_total")
	require.Equal(t, []string{"dm-0", "dm-1", "loop0", "md0", "nvme0n1", "sda", "sdb"}, devices)
}

// A device that disappears between scrapes loses its series and its cache
// entry; one that comes back under another MAJ:MIN is re-read.
func TestDiskstatsDeviceDisappears(t *testing.T) {
	proc := t.TempDir()
	copyFile(t, filepath.Join(diskstatsFixtures, "k20/proc/diskstats"), filepath.Join(proc, "diskstats"))
	p := newTestDiskstats(t, proc, config.Diskstats{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(partCollector{p})
	require.Contains(t, gatherDevices(t, reg, "diskcanary_disk_info"), "dm-1")
	require.Contains(t, p.static, "dm-1")

	copyFile(t, filepath.Join(diskstatsFixtures, "k20-removed/proc/diskstats"), filepath.Join(proc, "diskstats"))
	compareGolden(t, p, "k20-removed")
	require.NotContains(t, p.static, "dm-1")
	require.NotContains(t, gatherPairs(t, reg), "dm-1")
}

// Static attributes are read once, not per scrape: changing sysfs under a
// cached device shows only after the device is re-created or the entry expires.
func TestDiskstatsStaticCache(t *testing.T) {
	sys := t.TempDir()
	proc := t.TempDir()
	model := filepath.Join(sys, "block/sdx/device/model")
	require.NoError(t, os.MkdirAll(filepath.Dir(model), 0o755))
	require.NoError(t, os.WriteFile(model, []byte("OLD\n"), 0o644))
	stats := filepath.Join(proc, "diskstats")
	require.NoError(t, os.WriteFile(stats, []byte("8 0 sdx 10 0 80 1 0 0 0 0 0 1 1\n"), 0o644))
	part, err := newDiskstatsCollector(Options{Config: &config.Config{}, Paths: hostpath.Paths{ProcFS: proc, SysFS: sys}})
	require.NoError(t, err)
	p := part.(*diskstatsCollector)
	now := time.Unix(1_700_000_000, 0)
	p.now = func() time.Time { return now }
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(partCollector{p})

	modelOf := func() string {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "diskcanary_disk_info" {
				for _, l := range mf.GetMetric()[0].GetLabel() {
					if l.GetName() == "model" {
						return l.GetValue()
					}
				}
			}
		}
		return ""
	}
	require.Equal(t, "OLD", modelOf())
	require.NoError(t, os.WriteFile(model, []byte("NEW\n"), 0o644))
	require.Equal(t, "OLD", modelOf(), "sysfs must not be re-read on every scrape")

	// Counters going backwards: the device was re-created.
	require.NoError(t, os.WriteFile(stats, []byte("8 0 sdx 1 0 8 1 0 0 0 0 0 1 1\n"), 0o644))
	require.Equal(t, "NEW", modelOf())

	require.NoError(t, os.WriteFile(model, []byte("NEWER\n"), 0o644))
	require.Equal(t, "NEW", modelOf())
	now = now.Add(staticRefresh * 2)
	require.Equal(t, "NEWER", modelOf(), "entries expire")
}

// The golden expositions pass promtool's metric lint (names, units, help).
func TestDiskstatsGoldenLint(t *testing.T) {
	testkit.E2E(t) // an installed promtool: the end-to-end set, so the fast set is the same everywhere
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install prometheus): lint skipped")
	}
	files, err := filepath.Glob(filepath.Join(diskstatsFixtures, "*.prom"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		in, err := os.Open(f)
		require.NoError(t, err)
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = in
		out, err := cmd.CombinedOutput()
		in.Close()
		require.NoError(t, err, "%s: %s", f, out)
		require.Empty(t, strings.TrimSpace(string(out)), f)
	}
}

// Firmware strings that are not UTF-8 are repaired, not a scrape panic.
func TestDiskstatsInvalidUTF8Model(t *testing.T) {
	sys, proc := t.TempDir(), t.TempDir()
	model := filepath.Join(sys, "block/sdx/device/model")
	require.NoError(t, os.MkdirAll(filepath.Dir(model), 0o755))
	require.NoError(t, os.WriteFile(model, []byte("BAD\xffNAME\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "diskstats"), []byte("8 0 sdx 10 0 80 1 0 0 0 0 0 1 1\n"), 0o644))
	part, err := newDiskstatsCollector(Options{Config: &config.Config{}, Paths: hostpath.Paths{ProcFS: proc, SysFS: sys}})
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(partCollector{part})
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "diskcanary_disk_info" {
			require.Equal(t, "BAD\uFFFDNAME", label(mf.GetMetric()[0], "model"))
			return
		}
	}
	t.Fatal("no diskcanary_disk_info")
}

// Warm reads sysfs before the first scrape: a model changed after Warm is
// not what the first scrape reports, and a collector never warmed reads it
// then.
func TestDiskstatsWarmFillsTheCacheBeforeTheFirstScrape(t *testing.T) {
	sys, proc := t.TempDir(), t.TempDir()
	model := filepath.Join(sys, "block/sdx/device/model")
	require.NoError(t, os.MkdirAll(filepath.Dir(model), 0o755))
	require.NoError(t, os.WriteFile(model, []byte("AT-WARM\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "diskstats"), []byte("8 0 sdx 10 0 80 1 0 0 0 0 0 1 1\n"), 0o644))
	modelAtFirstScrape := func(warm bool) string {
		c, err := newDiskstatsCollector(Options{Config: &config.Config{}, Paths: hostpath.Paths{ProcFS: proc, SysFS: sys}})
		require.NoError(t, err)
		if warm {
			c.(Warmer).Warm()
		}
		require.NoError(t, os.WriteFile(model, []byte("AT-SCRAPE\n"), 0o644))
		defer func() { require.NoError(t, os.WriteFile(model, []byte("AT-WARM\n"), 0o644)) }()
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(partCollector{c})
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "diskcanary_disk_info" {
				for _, l := range mf.GetMetric()[0].GetLabel() {
					if l.GetName() == "model" {
						return l.GetValue()
					}
				}
			}
		}
		return ""
	}
	require.Equal(t, "AT-WARM", modelAtFirstScrape(true))
	require.Equal(t, "AT-SCRAPE", modelAtFirstScrape(false))
}
