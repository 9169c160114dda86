package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/smart"
	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/internal/testkit/guest"
)

// The emulated disks' identities. QEMU names its NVMe controller "QEMU
// NVMe Ctrl" and its ATA disks "QEMU HARDDISK"; the serials are ours.
const (
	qemuNVMeModel  = "QEMU NVMe Ctrl"
	qemuNVMeSerial = "DCNVME0001"
	qemuSATAModel  = "QEMU HARDDISK"
	qemuSATASerial = "DCSATA0001"
	// qemuCriticalWarning is what the test raises on the NVMe controller:
	// bits 0 (available spare below threshold) and 2 (reliability
	// degraded) of the SMART / Health log's critical-warning byte.
	qemuCriticalWarning = 0b101
)

// guestConfig is the daemon's config in the guest: SMART every 10 s (the
// shortest the config allows), no probes (no filesystem to probe).
const guestConfig = `probes: {enabled: false}
smart:
  interval: 10s
  rescan_interval: 10s
`

// TestQEMUSmartEndToEnd runs diskcanary on emulated hardware: a Debian
// kernel under QEMU (TCG) with an NVMe controller and a SATA disk on an
// AHCI controller, found through the real drivers (nvme, ahci, libata,
// sd) by smartctl --scan-open. `diskcanary smart` and `diskcanary serve`
// report both; then the test raises a critical warning on the NVMe
// controller through QMP, and both see the drive fail.
func TestQEMUSmartEndToEnd(t *testing.T) {
	if testkit.Race {
		t.Skip("skipping under the race detector: the guest emulates a CPU (TCG), too slow for a race build; it runs in the non-race pass")
	}
	guest.QEMU(t)
	guest.Busybox(t)
	smartctl, err := exec.LookPath("smartctl")
	if err != nil {
		t.Skip("skipping: needs smartctl in the guest (apt-get install smartmontools)")
	}
	kernel := guest.FindKernel(t)
	start := time.Now()

	root := guest.NewInitramfs()
	root.Program(t, "/usr/sbin/smartctl", smartctl)
	root.Program(t, "/usr/bin/diskcanary", testkit.Binary(t))
	root.File("/etc/diskcanary.yml", []byte(guestConfig), 0o644)
	disks := t.TempDir()
	for _, name := range []string{"nvme.img", "sata.img"} {
		require.NoError(t, os.WriteFile(filepath.Join(disks, name), nil, 0o644))
		require.NoError(t, os.Truncate(filepath.Join(disks, name), 64<<20))
	}
	g := guest.Boot(t, guest.Config{
		Kernel:  kernel,
		Modules: kernel.ModuleFiles(t, "nvme", "ahci", "sd_mod"),
		Root:    root,
		QEMUArgs: []string{
			"-drive", "if=none,id=nvmedisk,format=raw,file=" + filepath.Join(disks, "nvme.img"),
			"-device", "nvme,id=nvme0,serial=" + qemuNVMeSerial + ",drive=nvmedisk",
			"-drive", "if=none,id=satadisk,format=raw,file=" + filepath.Join(disks, "sata.img"),
			"-device", "ide-hd,bus=ide.0,drive=satadisk,serial=" + qemuSATASerial,
		},
	})
	t.Logf("guest up after %v", time.Since(start).Round(time.Millisecond))

	// The kernel's drivers bind the controllers while init already runs.
	_, status := g.Run(t, "for i in $(seq 60); do [ -b /dev/nvme0n1 ] && [ -b /dev/sda ] && exit 0; sleep 1; done; exit 1", 90*time.Second)
	if status != 0 {
		out, _ := g.Run(t, "ls /dev; cat /proc/partitions", 10*time.Second)
		t.Fatalf("the guest's drivers made no /dev/nvme0n1 and /dev/sda within 60 s:\n%s", out)
	}

	// What diskcanary discovers through: the NVMe controller, and the SATA
	// disk behind libata's SCSI translation.
	out, status := g.Run(t, "smartctl --scan-open --json", time.Minute)
	require.Equal(t, 0, status, out)
	targets, err := smart.ParseScan([]byte(out))
	require.NoError(t, err)
	var names []string
	for _, tg := range targets {
		names = append(names, tg.Name)
	}
	sort.Strings(names)
	require.Equal(t, []string{"/dev/nvme0", "/dev/sda"}, names, out)

	// `diskcanary smart` on healthy disks.
	reports, code := guestSmart(t, g)
	require.Equal(t, 0, code, "diskcanary smart exit status with two healthy disks")
	require.Len(t, reports, 2)
	nvme, sata := reports["nvme0n1"], reports["sda"]
	require.NotNil(t, nvme, "the NVMe namespace is reported as nvme0n1: %v", reports)
	require.NotNil(t, sata, "the SATA disk is reported as sda: %v", reports)
	require.Equal(t, guestReport{Device: "nvme0n1", Protocol: "NVMe", Model: qemuNVMeModel, Serial: qemuNVMeSerial,
		Healthy: ptrTo(true), CriticalWarning: ptrTo(0)}, nvme.summary())
	require.Equal(t, guestReport{Device: "sda", Protocol: "ATA", Model: qemuSATAModel, Serial: qemuSATASerial,
		Healthy: ptrTo(true)}, sata.summary())

	// `diskcanary serve` on the same disks.
	_, status = g.Run(t, "diskcanary serve --config.file=/etc/diskcanary.yml --web.listen-address=127.0.0.1:9742 --no-collector.blocklatency >/dev/console 2>&1 &", 10*time.Second)
	require.Equal(t, 0, status)
	mfs := waitGuestMetrics(t, g, "both disks' health", func(m guestMetrics) bool {
		_, nvmeOK := m.value("diskcanary_smart_healthy", "device", "nvme0n1")
		_, sataOK := m.value("diskcanary_smart_healthy", "device", "sda")
		return nvmeOK && sataOK
	})
	for _, want := range []struct {
		name   string
		labels []string
		value  float64
	}{
		{"diskcanary_smart_device_info", []string{"device", "nvme0n1", "protocol", "NVMe", "type", "nvme", "model", qemuNVMeModel, "serial", qemuNVMeSerial}, 1},
		{"diskcanary_smart_device_info", []string{"device", "sda", "protocol", "ATA", "type", "sat", "model", qemuSATAModel, "serial", qemuSATASerial}, 1},
		{"diskcanary_smart_healthy", []string{"device", "nvme0n1"}, 1},
		{"diskcanary_smart_healthy", []string{"device", "sda"}, 1},
		{"diskcanary_smart_collect_success", []string{"device", "nvme0n1"}, 1},
		{"diskcanary_smart_collect_success", []string{"device", "sda"}, 1},
		// QEMU's fixed readings: the NVMe health log's 323 K, the ATA
		// temperature attribute's raw 31.
		{"diskcanary_smart_temperature_celsius", []string{"device", "nvme0n1"}, 50},
		{"diskcanary_smart_temperature_celsius", []string{"device", "sda"}, 31},
		{"diskcanary_smart_critical_warning", []string{"device", "nvme0n1", "flag", "available_spare"}, 0},
		{"diskcanary_smart_critical_warning", []string{"device", "nvme0n1", "flag", "reliability_degraded"}, 0},
		{"diskcanary_smartctl_exit_status_bit", []string{"device", "nvme0n1", "bit", "disk_failing"}, 0},
	} {
		got, ok := mfs.value(want.name, want.labels...)
		require.True(t, ok, "%s%v is exported", want.name, want.labels)
		require.Equal(t, want.value, got, "%s%v", want.name, want.labels)
	}

	// The drive raises a critical warning (an asynchronous event to the
	// guest's driver, and byte 0 of its health log).
	require.JSONEq(t, "0", string(g.QOMGet(t, "/machine/peripheral/nvme0", "smart_critical_warning")))
	g.QOMSet(t, "/machine/peripheral/nvme0", "smart_critical_warning", qemuCriticalWarning)
	raised := time.Now()
	mfs = waitGuestMetrics(t, g, "nvme0n1 unhealthy", func(m guestMetrics) bool {
		v, ok := m.value("diskcanary_smart_healthy", "device", "nvme0n1")
		return ok && v == 0
	})
	t.Logf("diskcanary_smart_healthy{device=\"nvme0n1\"} 0 after %v", time.Since(raised).Round(time.Millisecond))
	for _, want := range []struct {
		name   string
		labels []string
		value  float64
	}{
		{"diskcanary_smart_critical_warning", []string{"device", "nvme0n1", "flag", "available_spare"}, 1},
		{"diskcanary_smart_critical_warning", []string{"device", "nvme0n1", "flag", "temperature"}, 0},
		{"diskcanary_smart_critical_warning", []string{"device", "nvme0n1", "flag", "reliability_degraded"}, 1},
		{"diskcanary_smart_critical_warning", []string{"device", "nvme0n1", "flag", "read_only"}, 0},
		{"diskcanary_smartctl_exit_status_bit", []string{"device", "nvme0n1", "bit", "disk_failing"}, 1},
		{"diskcanary_smart_healthy", []string{"device", "sda"}, 1},
	} {
		got, ok := mfs.value(want.name, want.labels...)
		require.True(t, ok, "%s%v is exported", want.name, want.labels)
		require.Equal(t, want.value, got, "%s%v", want.name, want.labels)
	}

	// And the CLI's verdict: FAILING, the NVMe drive first.
	reports, code = guestSmart(t, g)
	require.Equal(t, smartExitFailing, code, "diskcanary smart exit status with a critical warning")
	require.Equal(t, guestReport{Device: "nvme0n1", Protocol: "NVMe", Model: qemuNVMeModel, Serial: qemuNVMeSerial,
		Healthy: ptrTo(false), CriticalWarning: ptrTo(qemuCriticalWarning)}, reports["nvme0n1"].summary())
	require.Equal(t, guestReport{Device: "sda", Protocol: "ATA", Model: qemuSATAModel, Serial: qemuSATASerial,
		Healthy: ptrTo(true)}, reports["sda"].summary())
	table, code := g.Run(t, "diskcanary smart -v", time.Minute)
	require.Equal(t, smartExitFailing, code)
	rows := lines(table)
	require.Len(t, rows, 3, table)
	require.Contains(t, rows[1], "nvme0n1", "the failing drive is the first row:\n%s", table)
	require.Contains(t, rows[1], "FAILING: SMART health check FAILED; FAILING: NVMe critical warning: available_spare,reliability_degraded", table)
	require.Contains(t, rows[2], "sda", table)
	require.True(t, strings.HasSuffix(rows[2], "  OK"), "the SATA disk stays OK:\n%s", table)
	t.Logf("whole test %v", time.Since(start).Round(time.Millisecond))
}

// guestReport is the part of a `diskcanary smart --json` object the test
// pins: identity, verdict and the NVMe critical-warning byte.
type guestReport struct {
	Device          string `json:"device"`
	Protocol        string `json:"protocol"`
	Model           string `json:"model"`
	Serial          string `json:"serial"`
	Healthy         *bool  `json:"healthy"`
	CriticalWarning *int   `json:"critical_warning"`
}

type guestReportJSON struct {
	guestReport
	ExitStatusBits []string `json:"exit_status_bits"`
	Errors         []string `json:"errors"`
}

func (r *guestReportJSON) summary() guestReport {
	if r == nil {
		return guestReport{}
	}
	return r.guestReport
}

// guestSmart runs `diskcanary smart --json` in the guest.
func guestSmart(t *testing.T, g *guest.Guest) (map[string]*guestReportJSON, int) {
	t.Helper()
	out, code := g.Run(t, "diskcanary smart --json", 2*time.Minute)
	var list []*guestReportJSON
	require.NoError(t, json.Unmarshal([]byte(out), &list), "diskcanary smart --json output:\n%s", out)
	byDevice := map[string]*guestReportJSON{}
	for _, r := range list {
		byDevice[r.Device] = r
		t.Logf("diskcanary smart: %s %s %q healthy=%v critical_warning=%v bits=%v errors=%v",
			r.Device, r.Protocol, r.Model, deref(r.Healthy), deref(r.CriticalWarning), r.ExitStatusBits, r.Errors)
	}
	return byDevice, code
}

func ptrTo[T any](v T) *T { return &v }

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// guestMetrics is one scrape of the guest daemon's SMART families.
type guestMetrics map[string]*dto.MetricFamily

// value returns the sample of family name whose labels include the
// given name/value pairs.
func (m guestMetrics) value(name string, labels ...string) (float64, bool) {
	mf := m[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, s := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		return s.GetGauge().GetValue() + s.GetCounter().GetValue() + s.GetUntyped().GetValue(), true
	}
	return 0, false
}

// waitGuestMetrics scrapes the guest daemon once a second until ok
// accepts the SMART families, for at most a minute (a SMART read every
// 10 s, each a few seconds of smartctl under emulation).
func waitGuestMetrics(t *testing.T, g *guest.Guest, what string, ok func(guestMetrics) bool) guestMetrics {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last string
	for {
		out, status := g.Run(t, "wget -q -O - http://127.0.0.1:9742/metrics | grep diskcanary_smart", 30*time.Second)
		if status == 0 {
			last = out
			parser := expfmt.NewTextParser(model.LegacyValidation)
			mfs, err := parser.TextToMetricFamilies(strings.NewReader(out + "\n"))
			require.NoError(t, err, "the guest's /metrics parses")
			if ok(mfs) {
				return mfs
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("guest /metrics: no %s within a minute; last SMART series:\n%s", what, last)
		}
		g.Run(t, "sleep 1", 10*time.Second)
	}
}
