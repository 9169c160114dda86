package collector

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/smart"
	"github.com/diskcanary/diskcanary/internal/smart/smarttest"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// smartStatusCollector exposes a fixed runner status through the part's own
// scrape path, so metric building is tested without running anything.
type smartStatusCollector struct{ s smart.Status }

func (c smartStatusCollector) Describe(chan<- *prometheus.Desc) {}
func (c smartStatusCollector) Collect(ch chan<- prometheus.Metric) {
	(&smartCollector{cache: map[string]smartCached{}}).emit(ch, c.s)
}

func smartStateFromFixture(t testing.TB, name string) smart.DeviceState {
	t.Helper()
	data, err := os.ReadFile(smarttest.Fixture(name))
	require.NoError(t, err)
	r, err := smart.Parse(data)
	require.NoError(t, err)
	st := smart.StateFromResult(r)
	st.Success = true
	st.LastSuccess = time.Unix(1700000000, 0)
	return st
}

func TestSmartMetricsNVMeCriticalWarning(t *testing.T) {
	st := smartStateFromFixture(t, "nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json")
	st.Label = "nvme0n1"
	c := smartStatusCollector{smart.Status{SmartctlFound: true, ScanSuccess: true, Devices: []smart.DeviceState{st}}}
	want := `
# HELP diskcanary_smart_critical_warning NVMe critical-warning flags (1 set).
# TYPE diskcanary_smart_critical_warning gauge
diskcanary_smart_critical_warning{device="nvme0n1",flag="available_spare"} 0
diskcanary_smart_critical_warning{device="nvme0n1",flag="persistent_memory_region_unreliable"} 0
diskcanary_smart_critical_warning{device="nvme0n1",flag="read_only"} 0
diskcanary_smart_critical_warning{device="nvme0n1",flag="reliability_degraded"} 0
diskcanary_smart_critical_warning{device="nvme0n1",flag="temperature"} 0
diskcanary_smart_critical_warning{device="nvme0n1",flag="volatile_memory_backup_failed"} 1
# HELP diskcanary_smart_healthy SMART overall health self-assessment (1 passed, 0 failed; NVMe fails on any critical warning).
# TYPE diskcanary_smart_healthy gauge
diskcanary_smart_healthy{device="nvme0n1"} 0
# HELP diskcanary_smart_available_spare_ratio NVMe available spare.
# TYPE diskcanary_smart_available_spare_ratio gauge
diskcanary_smart_available_spare_ratio{device="nvme0n1"} 1
# HELP diskcanary_smart_available_spare_threshold_ratio NVMe available spare threshold.
# TYPE diskcanary_smart_available_spare_threshold_ratio gauge
diskcanary_smart_available_spare_threshold_ratio{device="nvme0n1"} 0.1
# HELP diskcanary_smart_power_on_seconds_total Power-on time.
# TYPE diskcanary_smart_power_on_seconds_total counter
diskcanary_smart_power_on_seconds_total{device="nvme0n1"} 6.61536e+07
# HELP diskcanary_smart_temperature_celsius Current drive temperature.
# TYPE diskcanary_smart_temperature_celsius gauge
diskcanary_smart_temperature_celsius{device="nvme0n1"} 40
# HELP diskcanary_smartctl_exit_status Exit status of the last smartctl run (a bitmask, see smartctl(8)); -1 if it did not finish.
# TYPE diskcanary_smartctl_exit_status gauge
diskcanary_smartctl_exit_status{device="nvme0n1"} 8
# HELP diskcanary_smart_device_info Identity of a SMART device; always 1.
# TYPE diskcanary_smart_device_info gauge
diskcanary_smart_device_info{device="nvme0n1",firmware="REDACTED",model="SAMSUNG MZWLL3T2HAJQ-00005",protocol="NVMe",serial="REDACTED",type="nvme",wwn=""} 1
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"diskcanary_smart_critical_warning", "diskcanary_smart_healthy", "diskcanary_smart_available_spare_ratio",
		"diskcanary_smart_available_spare_threshold_ratio", "diskcanary_smart_power_on_seconds_total",
		"diskcanary_smart_temperature_celsius", "diskcanary_smartctl_exit_status", "diskcanary_smart_device_info"))

	// Not reported by NVMe: absent, never 0.
	n, err := testutil.GatherAndCount(smartRegistry(t, c), "diskcanary_smart_reallocated_sectors", "diskcanary_smart_pending_sectors", "diskcanary_smart_attribute_raw")
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestSmartMetricsATAAttributesAndExitBits(t *testing.T) {
	st := smartStateFromFixture(t, "synth-ata-duplicate-attribute.json")
	st.ExitStatus = smart.ExitErrorLog | smart.ExitCommandFailed
	c := smartStatusCollector{smart.Status{SmartctlFound: true, ScanSuccess: true, Devices: []smart.DeviceState{st}}}
	// The pedantic registry in smartRegistry fails the gather on two series
	// with one label set: the duplicate attribute 5 must have been dropped.
	smartRegistry(t, c)
	want := `
# HELP diskcanary_smart_attribute_raw ATA SMART attribute raw value (48-bit, vendor-encoded).
# TYPE diskcanary_smart_attribute_raw gauge
diskcanary_smart_attribute_raw{device="sdc",id="197",name="Current_Pending_Sector"} 2
diskcanary_smart_attribute_raw{device="sdc",id="5",name="Reallocated_Sector_Ct"} 8
# HELP diskcanary_smart_attribute_threshold ATA SMART attribute failure threshold.
# TYPE diskcanary_smart_attribute_threshold gauge
diskcanary_smart_attribute_threshold{device="sdc",id="197",name="Current_Pending_Sector"} 0
diskcanary_smart_attribute_threshold{device="sdc",id="5",name="Reallocated_Sector_Ct"} 10
# HELP diskcanary_smartctl_exit_status_bit One bit of the last smartctl exit status, by name.
# TYPE diskcanary_smartctl_exit_status_bit gauge
diskcanary_smartctl_exit_status_bit{bit="attribute_below_threshold_in_past",device="sdc"} 0
diskcanary_smartctl_exit_status_bit{bit="command_line_error",device="sdc"} 0
diskcanary_smartctl_exit_status_bit{bit="device_open_failed",device="sdc"} 0
diskcanary_smartctl_exit_status_bit{bit="disk_failing",device="sdc"} 0
diskcanary_smartctl_exit_status_bit{bit="error_log_has_errors",device="sdc"} 1
diskcanary_smartctl_exit_status_bit{bit="prefail_attribute_below_threshold",device="sdc"} 0
diskcanary_smartctl_exit_status_bit{bit="self_test_log_has_errors",device="sdc"} 0
diskcanary_smartctl_exit_status_bit{bit="smart_command_failed",device="sdc"} 1
# HELP diskcanary_smart_reallocated_sectors Reallocated sectors (ATA attribute 5) or SCSI grown defect list entries.
# TYPE diskcanary_smart_reallocated_sectors gauge
diskcanary_smart_reallocated_sectors{device="sdc"} 8
# HELP diskcanary_smart_pending_sectors Sectors pending reallocation (ATA attribute 197).
# TYPE diskcanary_smart_pending_sectors gauge
diskcanary_smart_pending_sectors{device="sdc"} 2
# HELP diskcanary_smart_last_success_timestamp_seconds When SMART data was last read from the device.
# TYPE diskcanary_smart_last_success_timestamp_seconds gauge
diskcanary_smart_last_success_timestamp_seconds{device="sdc"} 1.7e+09
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"diskcanary_smart_attribute_raw", "diskcanary_smart_attribute_threshold", "diskcanary_smartctl_exit_status_bit",
		"diskcanary_smart_reallocated_sectors", "diskcanary_smart_pending_sectors", "diskcanary_smart_last_success_timestamp_seconds"))
	// Not reported by this drive: absent, never 0.
	n, err := testutil.GatherAndCount(smartRegistry(t, c), "diskcanary_smart_power_on_seconds_total", "diskcanary_smart_wear_used_ratio", "diskcanary_smart_media_errors_total")
	require.NoError(t, err)
	require.Zero(t, n)
}

func smartRegistry(t testing.TB, c prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	_, err := reg.Gather()
	require.NoError(t, err)
	return reg
}

// Self-test progress comes from the drive's own status in real-shaped
// smartctl output; the scheduling counters from the runner's state.
func TestSmartMetricsSelfTests(t *testing.T) {
	ata := smartStateFromFixture(t, "synth-ata-selftest-in-progress-v7.3.json")
	ata.Label = "sda"
	ata.SelfTestsEnabled, ata.Controller = true, "pci:0000:00:17.0"
	ata.SelfTestStarts = [2]uint64{1, 0}
	ata.SelfTestSkips[smart.SelfTestShort][smart.SkipStandby] = 2
	ata.SelfTestSkips[smart.SelfTestShort][smart.SkipControllerBusy] = 1
	ata.SelfTestLastStart[smart.SelfTestShort] = time.Unix(1700000000, 0)
	nvme := smartStateFromFixture(t, "synth-nvme-selftest-in-progress-v7.5.json")
	nvme.Label = "nvme0n1"
	idle := smartStateFromFixture(t, "ata-hdd-healthy-hgst-hms5c4040-v7.3-libblockdev.json")
	idle.Label = "sdb"
	// Asleep now: its last read's running test is over, whatever it said.
	asleep := smartStateFromFixture(t, "synth-ata-selftest-in-progress-v7.3.json")
	asleep.Label, asleep.Standby = "sdc", true
	scsi := smartStateFromFixture(t, "scsi-sas-hdd-grown-defects-260-uncorrected-smartctl-exporter.json")
	scsi.Label = "sdd"
	c := smartStatusCollector{smart.Status{SmartctlFound: true, ScanSuccess: true, Devices: []smart.DeviceState{ata, nvme, idle, asleep, scsi}}}
	smartRegistry(t, c)
	want := `
# HELP diskcanary_smart_selftest_in_progress 1 while the drive reports a self-test running (ATA self-test execution status, NVMe current operation, SCSI self-test log), whoever started it.
# TYPE diskcanary_smart_selftest_in_progress gauge
diskcanary_smart_selftest_in_progress{device="nvme0n1"} 1
diskcanary_smart_selftest_in_progress{device="sda"} 1
diskcanary_smart_selftest_in_progress{device="sdb"} 0
diskcanary_smart_selftest_in_progress{device="sdc"} 0
# HELP diskcanary_smart_selftest_remaining_ratio Share of the running self-test still to do, where the drive reports it (ATA in tenths, NVMe in percent).
# TYPE diskcanary_smart_selftest_remaining_ratio gauge
diskcanary_smart_selftest_remaining_ratio{device="nvme0n1"} 0.7
diskcanary_smart_selftest_remaining_ratio{device="sda"} 0.9
# HELP diskcanary_smart_selftest_starts_total Scheduled self-tests diskcanary started on the drive, by type (short, long).
# TYPE diskcanary_smart_selftest_starts_total counter
diskcanary_smart_selftest_starts_total{device="sda",type="long"} 0
diskcanary_smart_selftest_starts_total{device="sda",type="short"} 1
# HELP diskcanary_smart_selftest_skips_total Due self-tests not started, by type and reason: standby (the disk slept; after smart.self_tests.max_standby_skips in a row it is woken), in_progress (a test already runs on it), controller_busy (a disk behind its controller is testing), start_failed (smartctl did not start it).
# TYPE diskcanary_smart_selftest_skips_total counter
diskcanary_smart_selftest_skips_total{device="sda",reason="controller_busy",type="long"} 0
diskcanary_smart_selftest_skips_total{device="sda",reason="controller_busy",type="short"} 1
diskcanary_smart_selftest_skips_total{device="sda",reason="in_progress",type="long"} 0
diskcanary_smart_selftest_skips_total{device="sda",reason="in_progress",type="short"} 0
diskcanary_smart_selftest_skips_total{device="sda",reason="standby",type="long"} 0
diskcanary_smart_selftest_skips_total{device="sda",reason="standby",type="short"} 2
diskcanary_smart_selftest_skips_total{device="sda",reason="start_failed",type="long"} 0
diskcanary_smart_selftest_skips_total{device="sda",reason="start_failed",type="short"} 0
# HELP diskcanary_smart_selftest_last_start_timestamp_seconds When diskcanary last started a self-test of this type on the drive.
# TYPE diskcanary_smart_selftest_last_start_timestamp_seconds gauge
diskcanary_smart_selftest_last_start_timestamp_seconds{device="sda",type="short"} 1.7e+09
# HELP diskcanary_smart_controller_info The controller a device's scheduled self-tests are staggered with (pci:ADDRESS, scsi:hostN, port:/dev/NODE for RAID ports, disk:NAME when none was found); always 1.
# TYPE diskcanary_smart_controller_info gauge
diskcanary_smart_controller_info{controller="pci:0000:00:17.0",device="sda"} 1
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"diskcanary_smart_selftest_in_progress", "diskcanary_smart_selftest_remaining_ratio", "diskcanary_smart_selftest_starts_total",
		"diskcanary_smart_selftest_skips_total", "diskcanary_smart_selftest_last_start_timestamp_seconds", "diskcanary_smart_controller_info"))
}

// The config's per-protocol sections reach the runner under the protocol
// names smartctl reports.
func TestSmartSelfTestConfig(t *testing.T) {
	c, err := config.Parse([]byte("smart:\n  self_tests:\n    enabled: true\n    start_hour: 3\n    nvme: {long: 0s}\n    scsi: {short: 48h}\n"))
	require.NoError(t, err)
	day := 24 * time.Hour
	require.Equal(t, smart.SelfTestConfig{
		Enabled: true,
		Default: [2]time.Duration{day, 7 * day},
		ByProtocol: map[string][2]time.Duration{
			smart.ProtocolATA:  {day, 7 * day},
			smart.ProtocolNVMe: {day, 0},
			smart.ProtocolSCSI: {2 * day, 7 * day},
		},
		StartHour: 3, Window: 6 * time.Hour, MaxStandbySkips: 12,
	}, selfTestConfig(&c.Smart.SelfTests))
}

func TestSmartMetricsNoDataDevice(t *testing.T) {
	// A device never read yet (or never readable): freshness series only.
	st := smart.DeviceState{Device: smart.Device{Name: "/dev/sdq"}, Label: "sdq", ExitStatus: -1, Timeouts: 3, Quarantined: true, MissingCapability: "CAP_SYS_RAWIO"}
	c := smartStatusCollector{smart.Status{SmartctlFound: true, ScanSuccess: false, Devices: []smart.DeviceState{st}}}
	want := `
# HELP diskcanary_smart_collect_success Whether the last smartctl run read the device (or found it asleep and left it so).
# TYPE diskcanary_smart_collect_success gauge
diskcanary_smart_collect_success{device="sdq"} 0
# HELP diskcanary_smart_missing_capability 1 when smartctl failed for lack of this capability (CAP_SYS_RAWIO for ATA/SCSI, CAP_SYS_ADMIN for NVMe).
# TYPE diskcanary_smart_missing_capability gauge
diskcanary_smart_missing_capability{capability="CAP_SYS_RAWIO",device="sdq"} 1
# HELP diskcanary_smart_quarantined 1 while the device is backed off because smartctl hung on it.
# TYPE diskcanary_smart_quarantined gauge
diskcanary_smart_quarantined{device="sdq"} 1
# HELP diskcanary_smart_scan_success Whether the last smartctl --scan-open discovery succeeded.
# TYPE diskcanary_smart_scan_success gauge
diskcanary_smart_scan_success 0
# HELP diskcanary_smartctl_exit_status Exit status of the last smartctl run (a bitmask, see smartctl(8)); -1 if it did not finish.
# TYPE diskcanary_smartctl_exit_status gauge
diskcanary_smartctl_exit_status{device="sdq"} -1
# HELP diskcanary_smartctl_timeouts_total smartctl runs killed at the timeout.
# TYPE diskcanary_smartctl_timeouts_total counter
diskcanary_smartctl_timeouts_total{device="sdq"} 3
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"diskcanary_smart_collect_success", "diskcanary_smart_missing_capability", "diskcanary_smart_quarantined",
		"diskcanary_smart_scan_success", "diskcanary_smartctl_exit_status", "diskcanary_smartctl_timeouts_total"))
	n, err := testutil.GatherAndCount(smartRegistry(t, c), "diskcanary_smart_device_info", "diskcanary_smart_last_success_timestamp_seconds", "diskcanary_smartctl_exit_status_bit")
	require.NoError(t, err)
	require.Zero(t, n)
}

func smartTestConfig(bin string) *config.Config {
	return &config.Config{Smart: config.Smart{
		Enabled: true, Smartctl: bin, Interval: time.Minute, Timeout: 10 * time.Second, Concurrency: 2,
		Scan: true, RescanInterval: time.Hour, VanishedAfter: time.Hour, NoCheck: "standby",
	}}
}

func TestSmartCollectorSmartctlMissing(t *testing.T) {
	cfg := smartTestConfig(filepath.Join(t.TempDir(), "no-smartctl"))
	c, err := New(Options{Config: cfg, Logger: smartDiscardLogger()}, map[string]bool{"smart": true, "probes": false, "diskstats": false, "blocklatency": false, "errors": false, "pressure": false})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	c.Run(ctx)
	want := `
# HELP diskcanary_smartctl_available Whether the smartctl binary was found (0: no SMART metrics; install smartmontools).
# TYPE diskcanary_smartctl_available gauge
diskcanary_smartctl_available 0
# HELP diskcanary_collector_success Whether the collector succeeded on this scrape (1) or failed (0).
# TYPE diskcanary_collector_success gauge
diskcanary_collector_success{collector="smart"} 1
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), "diskcanary_smartctl_available", "diskcanary_collector_success"))
}

// TestSmart24DevicesOneHanging is the acceptance test: 24 disks
// whose smartctl takes 2 s each and one whose smartctl hangs forever. A
// scrape of /metrics must stay fast (p99 < 50 ms), the hung run must be
// killed at its timeout and the device quarantined, and every other disk
// must keep updating.
func TestSmart24DevicesOneHanging(t *testing.T) {
	testkit.E2E(t)
	testkit.SkipUnderRace(t)
	fixtures := []string{
		"sat-hdd-reallocated-304-smartctl-exporter.json",
		"nvme-pct-used-51-spare-93-smartctl-exporter.json",
		"scsi-sas-hdd-grown-defects-260-uncorrected-smartctl-exporter.json",
		"ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json",
		"sat-ssd-kingston-a400-rc4-smartctl-exporter.json",
		"nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json",
	}
	dir := t.TempDir()
	fake := smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{}, PIDFile: filepath.Join(dir, "pids"), Log: filepath.Join(dir, "runs.log")}
	const hung = "/dev/sdx"
	for i := range 24 {
		name := "/dev/sd" + string(rune('a'+i))
		fake.Scan = append(fake.Scan, map[string]string{"name": name, "type": "scsi", "protocol": "SCSI"})
		fake.Devices[name] = smarttest.FakeDevice{Fixture: smarttest.Fixture(fixtures[i%len(fixtures)]), Sleep: "2s"}
	}
	fake.Devices[hung] = smarttest.FakeDevice{Hang: true}
	bin := smarttest.Install(t, fake)

	cfg := smartTestConfig(bin)
	cfg.Smart.Interval = 3 * time.Second
	cfg.Smart.Timeout = 4 * time.Second
	cfg.Smart.Concurrency = 12
	col, err := New(Options{Config: cfg, Logger: smartDiscardLogger()}, map[string]bool{"smart": true, "probes": false, "diskstats": false, "blocklatency": false, "errors": false, "pressure": false})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { col.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	scrape := func() (time.Duration, string) {
		start := time.Now()
		resp, err := http.Get(srv.URL)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return time.Since(start), string(body)
	}
	var lat []time.Duration
	var firstReads map[string]float64
	deadline := time.Now().Add(16 * time.Second)
	for time.Now().Before(deadline) {
		d, body := scrape()
		lat = append(lat, d)
		if firstReads == nil {
			if m := smartLastSuccess(body); len(m) == 23 {
				firstReads = m
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	t.Logf("/metrics over %d scrapes: p50 %s p99 %s max %s", len(lat), p(0.5), p(0.99), lat[len(lat)-1])
	// Every smartctl run takes 2 s and one never ends: a scrape that waited
	// on one would take seconds. The bounds leave room for a loaded CI
	// machine, where a 24-device scrape's own p99 reaches tens of ms.
	require.Less(t, p(0.99), 500*time.Millisecond, "/metrics p99")
	require.Less(t, lat[len(lat)-1], time.Second, "/metrics max")

	_, body := scrape()
	require.Contains(t, body, `diskcanary_smart_quarantined{device="sdx"} 1`)
	require.Regexp(t, `diskcanary_smartctl_timeouts_total\{device="sdx"\} [1-9]`, body)
	require.Contains(t, body, `diskcanary_smartctl_exit_status{device="sdx"} -1`)
	require.NotContains(t, body, `diskcanary_smart_last_success_timestamp_seconds{device="sdx"}`)

	require.NotNil(t, firstReads, "all 23 healthy disks were read")
	last := smartLastSuccess(body)
	require.Len(t, last, 23)
	for dev, ts := range last {
		require.Greater(t, ts, firstReads[dev], "%s kept updating while sdx hung", dev)
	}
	// The hung smartctl and the grandchild in its process group were killed.
	data, err := os.ReadFile(fake.PIDFile)
	require.NoError(t, err)
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		require.Eventually(t, func() bool { return !smartPIDAlive(pid) }, 5*time.Second, 20*time.Millisecond, "pid %d survived", pid)
	}
}

// smartLastSuccess reads diskcanary_smart_last_success_timestamp_seconds per device from an exposition.
func smartLastSuccess(body string) map[string]float64 {
	m := map[string]float64{}
	const prefix = `diskcanary_smart_last_success_timestamp_seconds{device="`
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		dev, val, _ := strings.Cut(rest, `"} `)
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			m[dev] = v
		}
	}
	return m
}

func smartPIDAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z' // a zombie is dead, only unreaped
}

func smartDiscardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// BenchmarkSmartParseAndMetrics is the per-device cost of one smartctl
// result: parsing its JSON (done once per run, in the runner) plus building
// its const metrics (done on every scrape).
func BenchmarkSmartParseAndMetrics(b *testing.B) {
	for _, tc := range []struct{ name, file string }{
		{"ATA", "ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json"},
		{"NVMe", "nvme-pct-used-51-spare-93-smartctl-exporter.json"},
		{"SCSI", "scsi-sas-hdd-grown-defects-260-uncorrected-smartctl-exporter.json"},
	} {
		data, err := os.ReadFile(smarttest.Fixture(tc.file))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				r, err := smart.Parse(data)
				if err != nil {
					b.Fatal(err)
				}
				st := smart.StateFromResult(r)
				n = len(appendSmartDevice(nil, &st))
			}
			b.ReportMetric(float64(n), "series/device")
		})
		b.Run(tc.name+"/metrics-only", func(b *testing.B) {
			r, _ := smart.Parse(data)
			st := smart.StateFromResult(r)
			b.ReportAllocs()
			for b.Loop() {
				appendSmartDevice(nil, &st)
			}
		})
	}
}

// BenchmarkSmartScrape24 is one scrape's cost for 24 disks (8 each of ATA,
// NVMe, SCSI) once their results are in: what a Prometheus scrape pays.
func BenchmarkSmartScrape24(b *testing.B) {
	files := []string{
		"ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json",
		"nvme-pct-used-51-spare-93-smartctl-exporter.json",
		"scsi-sas-hdd-grown-defects-260-uncorrected-smartctl-exporter.json",
	}
	fake := smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{}}
	var devices []smart.Device
	for i := range 24 {
		name := "/dev/sd" + string(rune('a'+i))
		fake.Devices[name] = smarttest.FakeDevice{Fixture: smarttest.Fixture(files[i%3])}
		devices = append(devices, smart.Device{Name: name})
	}
	bin := smarttest.Install(b, fake)
	r := smart.NewRunner(smart.RunnerConfig{Smartctl: bin, Interval: time.Hour, Timeout: 10 * time.Second, Concurrency: 4})
	st, err := r.CollectOnce(context.Background(), devices)
	if err != nil || len(st.Devices) != 24 {
		b.Fatalf("collect: %v, %d devices", err, len(st.Devices))
	}
	p := &smartCollector{runner: r, cache: map[string]smartCached{}}
	ch := make(chan prometheus.Metric, 4096)
	series := 0
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Update(ch); err != nil {
			b.Fatal(err)
		}
		series = len(ch)
		for len(ch) > 0 {
			<-ch
		}
	}
	b.ReportMetric(float64(series), "series")
}

// TestSmartMetricsLint runs `promtool check metrics` (naming, units,
// _total on counters, _info) over the series of every protocol.
func TestSmartMetricsLint(t *testing.T) {
	testkit.E2E(t) // an installed promtool: the end-to-end set, so the fast set is the same everywhere
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed")
	}
	var devs []smart.DeviceState
	for i, f := range []string{
		"ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json",
		"nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json",
		"scsi-sas-hdd-grown-defects-260-uncorrected-smartctl-exporter.json",
		"synth-ata-standby-v7.3.json",
		"synth-ata-selftest-in-progress-v7.3.json",
	} {
		st := smartStateFromFixture(t, f)
		st.Label = "disk" + strconv.Itoa(i)
		st.Timeouts, st.Quarantined, st.MissingCapability = 1, true, "CAP_SYS_RAWIO"
		st.SelfTestsEnabled, st.Controller = true, "pci:0000:00:17.0"
		st.SelfTestLastStart[smart.SelfTestLong] = time.Unix(1700000000, 0)
		devs = append(devs, st)
	}
	reg := smartRegistry(t, smartStatusCollector{smart.Status{SmartctlFound: true, ScanSuccess: true, Devices: devs}})
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{DisableCompression: true}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(string(body))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check metrics:\n%s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "promtool found problems")
}

// The drive's own temperature limits (NVMe thresholds, ATA SCT, SCSI
// reference temperature), Backblaze's 188 and 198, the NVMe health-log
// counters, the SCSI error counter log, SCSI start-stop cycles and wear
// from a raw life-left value, from real outputs, as exported.
func TestSmartMetricsLimitsAndCounters(t *testing.T) {
	var devs []smart.DeviceState
	for label, file := range map[string]string{
		"nvme0n1": "nvme-healthy-v7.5-beszel.json",
		"sdb":     "sat-ssd-crucial-m4-xall-v7.4-starosdev.json",
		"sdc":     "scsi-sas-hdd-15k-seagate-st600mp-v7.3-libblockdev.json",
		"sdd":     "sat-ssd-phison-life-left-raw93-v7.4-flutter-server-box.json",
	} {
		st := smartStateFromFixture(t, file)
		st.Label = label
		devs = append(devs, st)
	}
	c := smartStatusCollector{smart.Status{SmartctlFound: true, ScanSuccess: true, Devices: devs}}
	want := `
# HELP diskcanary_smart_temperature_max_operating_celsius The drive's own highest recommended operating temperature (NVMe warning composite threshold, ATA SCT recommended maximum, SCSI reference temperature).
# TYPE diskcanary_smart_temperature_max_operating_celsius gauge
diskcanary_smart_temperature_max_operating_celsius{device="nvme0n1"} 100
diskcanary_smart_temperature_max_operating_celsius{device="sdb"} 70
diskcanary_smart_temperature_max_operating_celsius{device="sdc"} 60
# HELP diskcanary_smart_temperature_critical_celsius The drive's own critical temperature (NVMe critical composite threshold, ATA SCT absolute limit).
# TYPE diskcanary_smart_temperature_critical_celsius gauge
diskcanary_smart_temperature_critical_celsius{device="nvme0n1"} 110
diskcanary_smart_temperature_critical_celsius{device="sdb"} 75
# HELP diskcanary_smart_command_timeouts_total ATA attribute 188 Command_Timeout, the leading count of its raw value (a Backblaze failure predictor).
# TYPE diskcanary_smart_command_timeouts_total counter
diskcanary_smart_command_timeouts_total{device="sdb"} 0
# HELP diskcanary_smart_offline_uncorrectable_sectors ATA attribute 198 Offline_Uncorrectable: sectors the drive's own scans could not read (a Backblaze failure predictor).
# TYPE diskcanary_smart_offline_uncorrectable_sectors gauge
diskcanary_smart_offline_uncorrectable_sectors{device="sdb"} 0
# HELP diskcanary_smart_read_bytes_total Bytes the host read, as the NVMe drive counts them (data units read × 512,000).
# TYPE diskcanary_smart_read_bytes_total counter
diskcanary_smart_read_bytes_total{device="nvme0n1"} 3.365429248e+12
# HELP diskcanary_smart_written_bytes_total Bytes the host wrote, as the NVMe drive counts them (data units written × 512,000).
# TYPE diskcanary_smart_written_bytes_total counter
diskcanary_smart_written_bytes_total{device="nvme0n1"} 8.212770304e+12
# HELP diskcanary_smart_unsafe_shutdowns_total NVMe unsafe shutdowns (power lost without a shutdown notification).
# TYPE diskcanary_smart_unsafe_shutdowns_total counter
diskcanary_smart_unsafe_shutdowns_total{device="nvme0n1"} 44
# HELP diskcanary_smart_error_log_entries_total NVMe error information log entries over the controller's life.
# TYPE diskcanary_smart_error_log_entries_total counter
diskcanary_smart_error_log_entries_total{device="nvme0n1"} 0
# HELP diskcanary_smart_scsi_errors_total SCSI error counter log totals by op (read, write, verify) and kind (corrected, uncorrected).
# TYPE diskcanary_smart_scsi_errors_total counter
diskcanary_smart_scsi_errors_total{device="sdc",kind="corrected",op="read"} 1.70693715e+08
diskcanary_smart_scsi_errors_total{device="sdc",kind="corrected",op="verify"} 2.6102529e+07
diskcanary_smart_scsi_errors_total{device="sdc",kind="corrected",op="write"} 0
diskcanary_smart_scsi_errors_total{device="sdc",kind="uncorrected",op="read"} 0
diskcanary_smart_scsi_errors_total{device="sdc",kind="uncorrected",op="verify"} 0
diskcanary_smart_scsi_errors_total{device="sdc",kind="uncorrected",op="write"} 0
# HELP diskcanary_smart_power_cycles_total Power cycles (ATA, NVMe; SCSI accumulated start-stop cycles).
# TYPE diskcanary_smart_power_cycles_total counter
diskcanary_smart_power_cycles_total{device="nvme0n1"} 430
diskcanary_smart_power_cycles_total{device="sdb"} 1931
diskcanary_smart_power_cycles_total{device="sdc"} 1090
diskcanary_smart_power_cycles_total{device="sdd"} 1948
# HELP diskcanary_smart_wear_used_ratio Share of rated endurance used (NVMe percentage used, SCSI endurance indicator, ATA device statistics or life attributes); may exceed 1.
# TYPE diskcanary_smart_wear_used_ratio gauge
diskcanary_smart_wear_used_ratio{device="nvme0n1"} 0
diskcanary_smart_wear_used_ratio{device="sdb"} 0.03
diskcanary_smart_wear_used_ratio{device="sdd"} 0.07
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"diskcanary_smart_temperature_max_operating_celsius", "diskcanary_smart_temperature_critical_celsius",
		"diskcanary_smart_command_timeouts_total", "diskcanary_smart_offline_uncorrectable_sectors",
		"diskcanary_smart_read_bytes_total", "diskcanary_smart_written_bytes_total", "diskcanary_smart_unsafe_shutdowns_total",
		"diskcanary_smart_error_log_entries_total", "diskcanary_smart_scsi_errors_total", "diskcanary_smart_power_cycles_total",
		"diskcanary_smart_wear_used_ratio"))
}

// The self-test log's newest entry as exported: its result and type, its
// age in power-on time, and the first failing LBA of the newest failed
// test the log holds; with the exit bit smartctl sets while reading it.
func TestSmartMetricsSelfTestLog(t *testing.T) {
	ata := smartStateFromFixture(t, "ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json")
	ata.Label = "sda"
	scsi := smartStateFromFixture(t, "scsi-sas-hdd-15k-seagate-st600mp-v7.3-libblockdev.json")
	scsi.Label = "sdc"
	c := smartStatusCollector{smart.Status{SmartctlFound: true, ScanSuccess: true, Devices: []smart.DeviceState{ata, scsi}}}
	want := `
# HELP diskcanary_smart_selftest_last_result The newest entry of the drive's self-test log: 1 for its result (passed, failed, aborted, in_progress), 0 for the others; type is the test as smartctl names it.
# TYPE diskcanary_smart_selftest_last_result gauge
diskcanary_smart_selftest_last_result{device="sda",result="aborted",type="Short offline"} 0
diskcanary_smart_selftest_last_result{device="sda",result="failed",type="Short offline"} 0
diskcanary_smart_selftest_last_result{device="sda",result="in_progress",type="Short offline"} 0
diskcanary_smart_selftest_last_result{device="sda",result="passed",type="Short offline"} 1
diskcanary_smart_selftest_last_result{device="sdc",result="aborted",type="Reserved(7)"} 0
diskcanary_smart_selftest_last_result{device="sdc",result="failed",type="Reserved(7)"} 0
diskcanary_smart_selftest_last_result{device="sdc",result="in_progress",type="Reserved(7)"} 0
diskcanary_smart_selftest_last_result{device="sdc",result="passed",type="Reserved(7)"} 1
# HELP diskcanary_smart_selftest_last_age_seconds Power-on time since the newest self-test in the log ran (the log counts power-on hours, not wall time).
# TYPE diskcanary_smart_selftest_last_age_seconds gauge
diskcanary_smart_selftest_last_age_seconds{device="sda"} 50400
diskcanary_smart_selftest_last_age_seconds{device="sdc"} 1.67832e+07
# HELP diskcanary_smart_selftest_failed_lba First failing LBA of the newest failed self-test in the log that reports one.
# TYPE diskcanary_smart_selftest_failed_lba gauge
diskcanary_smart_selftest_failed_lba{device="sda"} 1.04870168e+08
# HELP diskcanary_smartctl_exit_status_bit One bit of the last smartctl exit status, by name.
# TYPE diskcanary_smartctl_exit_status_bit gauge
diskcanary_smartctl_exit_status_bit{bit="attribute_below_threshold_in_past",device="sda"} 0
diskcanary_smartctl_exit_status_bit{bit="command_line_error",device="sda"} 0
diskcanary_smartctl_exit_status_bit{bit="device_open_failed",device="sda"} 0
diskcanary_smartctl_exit_status_bit{bit="disk_failing",device="sda"} 1
diskcanary_smartctl_exit_status_bit{bit="error_log_has_errors",device="sda"} 1
diskcanary_smartctl_exit_status_bit{bit="prefail_attribute_below_threshold",device="sda"} 1
diskcanary_smartctl_exit_status_bit{bit="self_test_log_has_errors",device="sda"} 1
diskcanary_smartctl_exit_status_bit{bit="smart_command_failed",device="sda"} 0
diskcanary_smartctl_exit_status_bit{bit="attribute_below_threshold_in_past",device="sdc"} 0
diskcanary_smartctl_exit_status_bit{bit="command_line_error",device="sdc"} 0
diskcanary_smartctl_exit_status_bit{bit="device_open_failed",device="sdc"} 0
diskcanary_smartctl_exit_status_bit{bit="disk_failing",device="sdc"} 0
diskcanary_smartctl_exit_status_bit{bit="error_log_has_errors",device="sdc"} 0
diskcanary_smartctl_exit_status_bit{bit="prefail_attribute_below_threshold",device="sdc"} 0
diskcanary_smartctl_exit_status_bit{bit="self_test_log_has_errors",device="sdc"} 0
diskcanary_smartctl_exit_status_bit{bit="smart_command_failed",device="sdc"} 0
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"diskcanary_smart_selftest_last_result", "diskcanary_smart_selftest_last_age_seconds",
		"diskcanary_smart_selftest_failed_lba", "diskcanary_smartctl_exit_status_bit"))
}

// The scan's cap shows as a gauge beside scan_success: how many listed
// devices are not read (issue 43: a 20,000-device scan).
func TestSmartScanDroppedDevices(t *testing.T) {
	c := smartStatusCollector{smart.Status{SmartctlFound: true, ScanSuccess: true, ScanDropped: 18_976}}
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP diskcanary_smart_scan_dropped_devices Devices the last smartctl --scan-open listed that are not read, because diskcanary reads at most 1024 (0: every device is read).
# TYPE diskcanary_smart_scan_dropped_devices gauge
diskcanary_smart_scan_dropped_devices 18976
`), "diskcanary_smart_scan_dropped_devices"))
}
