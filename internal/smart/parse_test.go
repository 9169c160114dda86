package smart

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func parseFixture(t testing.TB, name string) *Result {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	r, err := Parse(data)
	require.NoError(t, err)
	return r
}

// f64 and b make expected values readable; nil means "must be absent".
func f64(v float64) *float64 { return &v }
func b(v bool) *bool         { return &v }

func TestParseProjectFixtures(t *testing.T) {
	cases := []struct {
		file     string
		protocol string
		exit     ExitStatus
		health   Health
		model    string
		wwn      string
	}{
		{
			file: "ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json", protocol: ProtocolATA,
			exit: ExitDiskFailing | ExitPrefailBelow | ExitErrorLog | ExitSelfTestLogError,
			health: Health{Healthy: b(false), TemperatureCelsius: f64(25), PowerOnSeconds: f64(65592 * 3600),
				PowerCycles: f64(86), ReallocatedSectors: f64(1975), PendingSectors: f64(8), MediaErrors: f64(0),
				OfflineUncorrectable: f64(0)},
		},
		{
			file: "nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json", protocol: ProtocolNVMe, exit: ExitDiskFailing,
			health: Health{Healthy: b(false), TemperatureCelsius: f64(40), PowerOnSeconds: f64(18376 * 3600), PowerCycles: f64(6),
				WearUsedRatio: f64(0), MediaErrors: f64(0), AvailableSpareRatio: f64(1), AvailableSpareThresholdRatio: f64(0.1),
				CriticalWarning: ptr(16), ReadBytes: f64(146935678 * 512000), WrittenBytes: f64(147556750 * 512000),
				UnsafeShutdowns: f64(4), ErrorLogEntries: f64(0)},
		},
		{
			file: "nvme-pct-used-51-spare-93-smartctl-exporter.json", protocol: ProtocolNVMe,
			health: Health{Healthy: b(true), TemperatureCelsius: f64(30), PowerOnSeconds: f64(54704 * 3600), PowerCycles: f64(12),
				WearUsedRatio: f64(0.51), MediaErrors: f64(0), AvailableSpareRatio: f64(0.93), AvailableSpareThresholdRatio: f64(0.1),
				CriticalWarning: ptr(0), ReadBytes: f64(1662103356 * 512000), WrittenBytes: f64(15055091656 * 512000),
				UnsafeShutdowns: f64(0), ErrorLogEntries: f64(0)},
		},
		{
			file: "sat-hdd-reallocated-304-smartctl-exporter.json", protocol: ProtocolATA, wwn: "0x5000c5001234567890"[:0],
			health: Health{Healthy: b(true), TemperatureCelsius: f64(33), PowerOnSeconds: f64(44668 * 3600), PowerCycles: f64(26),
				ReallocatedSectors: f64(304), PendingSectors: f64(0), MediaErrors: f64(0), CommandTimeouts: f64(0), OfflineUncorrectable: f64(0)},
		},
		{
			file: "scsi-sas-hdd-grown-defects-260-uncorrected-smartctl-exporter.json", protocol: ProtocolSCSI,
			health: Health{Healthy: b(true), TemperatureCelsius: f64(33), PowerOnSeconds: f64(102880*3600 + 59*60),
				ReallocatedSectors: f64(260), MediaErrors: f64(536), TemperatureMaxOperatingCelsius: f64(68),
				SCSIErrors: map[[2]string]float64{{"read", "corrected"}: 5330297, {"read", "uncorrected"}: 1, {"write", "corrected"}: 1973, {"write", "uncorrected"}: 535}},
		},
		{
			file: "sat-ssd-kingston-a400-rc4-smartctl-exporter.json", protocol: ProtocolATA, exit: ExitCommandFailed,
			health: Health{Healthy: b(true), TemperatureCelsius: f64(38), PowerOnSeconds: f64(4994 * 3600), PowerCycles: f64(8),
				WearUsedRatio: f64(0.02), MediaErrors: f64(0)},
		},
		{
			file: "megaraid-sat-hdd-disk1-reallocated-387-rc4-v7.1-scrutiny.json", protocol: ProtocolATA, exit: ExitCommandFailed,
			health: Health{Healthy: b(true), TemperatureCelsius: f64(36), PowerOnSeconds: f64(37788 * 3600), PowerCycles: f64(68),
				ReallocatedSectors: f64(387), PendingSectors: f64(0), MediaErrors: f64(0), OfflineUncorrectable: f64(0)},
		},
		{
			// smartctl 7.5 normalises wear and spare itself; the NVMe drive's
			// own temperature thresholds and its health-log counters.
			file: "nvme-healthy-v7.5-beszel.json", protocol: ProtocolNVMe,
			health: Health{Healthy: b(true), TemperatureCelsius: f64(61), PowerOnSeconds: f64(4399 * 3600), PowerCycles: f64(430),
				WearUsedRatio: f64(0), MediaErrors: f64(0), AvailableSpareRatio: f64(1), AvailableSpareThresholdRatio: f64(0.32),
				CriticalWarning: ptr(0), TemperatureMaxOperatingCelsius: f64(100), TemperatureCriticalCelsius: f64(110),
				ReadBytes: f64(6573104 * 512000), WrittenBytes: f64(16040567 * 512000), UnsafeShutdowns: f64(44), ErrorLogEntries: f64(0)},
		},
		{
			// smartctl 7.5 on an ATA SSD: spare_available is the only spare
			// figure (no ATA table has one), endurance_used the wear.
			file: "sat-ssd-p3-2tb-endurance-spare-v7.5-beszel.json", protocol: ProtocolATA, exit: ExitErrorLog,
			health: Health{Healthy: b(true), TemperatureCelsius: f64(31), PowerOnSeconds: f64(7344 * 3600), PowerCycles: f64(104),
				WearUsedRatio: f64(0), MediaErrors: f64(0), ReallocatedSectors: f64(0), PendingSectors: f64(0),
				AvailableSpareRatio: f64(1), OfflineUncorrectable: f64(0)},
		},
		{
			// SSD_Life_Left normalised 100, raw 93: 7 % used (lifeInRaw).
			file: "sat-ssd-phison-life-left-raw93-v7.4-flutter-server-box.json", protocol: ProtocolATA,
			health: Health{TemperatureCelsius: f64(35), PowerOnSeconds: f64(17472 * 3600), PowerCycles: f64(1948),
				WearUsedRatio: f64(0.07), MediaErrors: f64(0)},
		},
		{
			// SCSI: power cycles from the start-stop cycle counter page, the
			// reference ("drive trip") temperature, the error counter log.
			file: "scsi-sas-hdd-15k-seagate-st600mp-v7.3-libblockdev.json", protocol: ProtocolSCSI,
			health: Health{Healthy: b(true), TemperatureCelsius: f64(29), PowerOnSeconds: f64(4665*3600 + 46*60), PowerCycles: f64(1090),
				ReallocatedSectors: f64(0), MediaErrors: f64(0), TemperatureMaxOperatingCelsius: f64(60),
				SCSIErrors: map[[2]string]float64{{"read", "corrected"}: 170693715, {"read", "uncorrected"}: 0, {"write", "corrected"}: 0,
					{"write", "uncorrected"}: 0, {"verify", "corrected"}: 26102529, {"verify", "uncorrected"}: 0}},
		},
		{
			// ATA SCT temperature limits, attributes 188 and 198, device
			// statistics wear (3 %) over the vendor attribute 202 (2 %).
			file: "sat-ssd-crucial-m4-xall-v7.4-starosdev.json", protocol: ProtocolATA,
			health: Health{Healthy: b(true), PowerOnSeconds: f64(4179 * 3600), PowerCycles: f64(1931),
				WearUsedRatio: f64(0.03), MediaErrors: f64(0), ReallocatedSectors: f64(0), PendingSectors: f64(0),
				TemperatureMaxOperatingCelsius: f64(70), TemperatureCriticalCelsius: f64(75), CommandTimeouts: f64(0), OfflineUncorrectable: f64(0)},
		},
		{file: "error-open-failed-windows-rc2-v7.0-scrutiny.json", exit: ExitOpenFailed},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			r := parseFixture(t, c.file)
			require.Equal(t, c.protocol, r.Protocol)
			require.Equal(t, c.exit, r.ExitStatus, "exit bits %v", r.ExitStatus.Bits())
			requireHealth(t, c.health, r.Health)
		})
	}
}

func requireHealth(t *testing.T, want, got Health) {
	t.Helper()
	eqf := func(name string, w, g *float64) {
		t.Helper()
		if w == nil {
			require.Nil(t, g, "%s must be absent", name)
			return
		}
		require.NotNil(t, g, "%s must be present", name)
		require.InDelta(t, *w, *g, 1e-9, name)
	}
	require.Equal(t, want.Healthy, got.Healthy, "healthy")
	eqf("temperature", want.TemperatureCelsius, got.TemperatureCelsius)
	eqf("power_on_seconds", want.PowerOnSeconds, got.PowerOnSeconds)
	eqf("power_cycles", want.PowerCycles, got.PowerCycles)
	eqf("wear_used_ratio", want.WearUsedRatio, got.WearUsedRatio)
	eqf("media_errors", want.MediaErrors, got.MediaErrors)
	eqf("reallocated_sectors", want.ReallocatedSectors, got.ReallocatedSectors)
	eqf("pending_sectors", want.PendingSectors, got.PendingSectors)
	eqf("available_spare_ratio", want.AvailableSpareRatio, got.AvailableSpareRatio)
	eqf("available_spare_threshold_ratio", want.AvailableSpareThresholdRatio, got.AvailableSpareThresholdRatio)
	require.Equal(t, want.CriticalWarning, got.CriticalWarning, "critical_warning")
	eqf("temperature_max_operating", want.TemperatureMaxOperatingCelsius, got.TemperatureMaxOperatingCelsius)
	eqf("temperature_critical", want.TemperatureCriticalCelsius, got.TemperatureCriticalCelsius)
	eqf("command_timeouts", want.CommandTimeouts, got.CommandTimeouts)
	eqf("offline_uncorrectable", want.OfflineUncorrectable, got.OfflineUncorrectable)
	eqf("read_bytes", want.ReadBytes, got.ReadBytes)
	eqf("written_bytes", want.WrittenBytes, got.WrittenBytes)
	eqf("unsafe_shutdowns", want.UnsafeShutdowns, got.UnsafeShutdowns)
	eqf("error_log_entries", want.ErrorLogEntries, got.ErrorLogEntries)
	require.Equal(t, want.SCSIErrors, got.SCSIErrors, "scsi error counter log")
}

func TestExitStatusBits(t *testing.T) {
	for bit := range 8 {
		e := ExitStatus(1 << bit)
		require.Equal(t, []string{ExitBitNames[bit]}, e.Bits())
		require.Equal(t, bit < 2, e.NoData(), "bit %d", bit)
	}
	require.Equal(t, []string{"disk_failing", "prefail_attribute_below_threshold", "error_log_has_errors", "self_test_log_has_errors"}, ExitStatus(216).Bits())
	require.Empty(t, ExitStatus(0).Bits())
}

func TestParseStandby(t *testing.T) {
	r := parseFixture(t, "synth-ata-standby-v7.3.json")
	require.True(t, r.Standby())
	require.Equal(t, "STANDBY", r.PowerMode)
	require.True(t, r.ExitStatus.NoData())
	require.Empty(t, r.Errors, "standby is not an error")
	require.Nil(t, r.Health.Healthy)
	require.Equal(t, "WDC WD40EFRX-68N32N0", r.Model)
}

func TestParseDuplicateAttribute(t *testing.T) {
	r := parseFixture(t, "synth-ata-duplicate-attribute.json")
	require.Len(t, r.Attributes, 2)
	require.Equal(t, 5, r.Attributes[0].ID)
	require.Equal(t, 8.0, *r.Attributes[0].Raw, "the first row wins")
	require.Equal(t, 8.0, *r.Health.ReallocatedSectors)
	require.Len(t, r.Errors, 1)
	require.Contains(t, r.Errors[0], "attribute 5")
}

func TestParsePartialTypeError(t *testing.T) {
	// power_cycle_count as a string must cost that field only.
	r, err := Parse([]byte(`{"smartctl":{"exit_status":0},"device":{"name":"/dev/sda","protocol":"ATA"},
		"power_cycle_count":"many","temperature":{"current":41},"smart_status":{"passed":true}}`))
	require.NoError(t, err)
	require.Nil(t, r.Health.PowerCycles)
	require.Equal(t, 41.0, *r.Health.TemperatureCelsius)
	require.Equal(t, true, *r.Health.Healthy)

	// A boolean that is not a boolean must not read as "failed".
	r, err = Parse([]byte(`{"smartctl":{"exit_status":0},"smart_status":{"passed":"yes"}}`))
	require.NoError(t, err)
	require.Nil(t, r.Health.Healthy)

	// A structural mismatch costs that section and is reported.
	r, err = Parse([]byte(`{"smartctl":{"exit_status":0},"device":{"protocol":"ATA"},"temperature":{"current":40},"ata_smart_attributes":{"table":{"id":5}}}`))
	require.NoError(t, err)
	require.Equal(t, 40.0, *r.Health.TemperatureCelsius)
	require.Empty(t, r.Attributes)
	require.NotEmpty(t, r.Errors)
}

func TestParseRejectsNonSmartctl(t *testing.T) {
	for _, in := range []string{``, `garbage`, `[]`, `{}`, `null`, `{"devices":[]}`, `{"smartctl":`} {
		_, err := Parse([]byte(in))
		require.Error(t, err, "%q", in)
	}
}

func TestIdentity(t *testing.T) {
	r := parseFixture(t, "ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json")
	// naa 5, oui 3274 (0x000cca), id 15028879784 (0x37fca81a8)
	require.Equal(t, "0x5000cca37fca81a8", r.WWN)
	require.Equal(t, "MS1OA650", r.Firmware)
	s := parseFixture(t, "scsi-sas-hdd-grown-defects-260-uncorrected-smartctl-exporter.json")
	require.Equal(t, "DX10", s.Firmware)
	require.NotEmpty(t, s.Model)
}

func TestParseScan(t *testing.T) {
	data, err := os.ReadFile("testdata/scan-megaraid-10dev-v7.1-telegraf.json")
	require.NoError(t, err)
	ts, err := ParseScan(data)
	require.NoError(t, err)
	require.Len(t, ts, 10)
	require.Equal(t, Device{Name: "/dev/sda", Protocol: ProtocolSCSI}, ts[0])
	require.Equal(t, "", ts[2].Type, "sat is autodetected again, not forced")
	require.Equal(t, Device{Name: "/dev/bus/6", Type: "megaraid,8", Protocol: ProtocolSCSI}, ts[3])
	require.Equal(t, "bus/6:megaraid,8", ts[3].Label())
	require.Equal(t, "/dev/bus/6;megaraid,8", ts[3].Key())
	labels := map[string]bool{}
	for _, t := range ts {
		labels[t.Label()] = true
	}
	require.Len(t, labels, 10, "every scanned disk gets its own device label")

	data, err = os.ReadFile("testdata/scan-sat-nvme-v7.4-telegraf.json")
	require.NoError(t, err)
	ts, err = ParseScan(data)
	require.NoError(t, err)
	require.Equal(t, []Device{{Name: "/dev/sda", Protocol: ProtocolATA}, {Name: "/dev/nvme0", Protocol: ProtocolNVMe}, {Name: "/dev/nvme1", Protocol: ProtocolNVMe}}, ts)
}

func TestDeviceLabel(t *testing.T) {
	require.Equal(t, "sda", DeviceLabel("/dev/sda", ""))
	require.Equal(t, "sdc", DeviceLabel("/dev/sdc", "usbjmicron"))
	require.Equal(t, "sda:sat+megaraid,0", DeviceLabel("/dev/sda", "sat+megaraid,0"))
	require.Equal(t, "sg1:cciss,3", DeviceLabel("/dev/sg1", "cciss,3"))
	require.Equal(t, "sdb", DeviceLabel("/dev/sdb", "sat,12"))
}

func benchmarkParse(b *testing.B, name string) {
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseATA(b *testing.B) {
	benchmarkParse(b, "ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json")
}
func BenchmarkParseNVMe(b *testing.B) {
	benchmarkParse(b, "nvme-pct-used-51-spare-93-smartctl-exporter.json")
}
func BenchmarkParseSCSI(b *testing.B) {
	benchmarkParse(b, "scsi-sas-hdd-grown-defects-260-uncorrected-smartctl-exporter.json")
}

// Every lifeInRaw entry names its drives and at least one real output;
// one that is a file of this package's testdata must be there.
func TestLifeInRawSources(t *testing.T) {
	require.NotEmpty(t, lifeInRaw)
	for name, e := range lifeInRaw {
		require.True(t, wearFromNormalised[name], "%s is a life attribute", name)
		require.NotEmpty(t, e.drives, name)
		require.NotEmpty(t, e.sources, name)
		for _, src := range e.sources {
			require.Regexp(t, `^\S+/\S+ \S+ @[0-9a-f]{40}$`, src, "%s: a source is repository, path and commit", name)
		}
	}
	r := parseFixture(t, "sat-ssd-phison-life-left-raw93-v7.4-flutter-server-box.json")
	require.InDelta(t, 0.07, *r.Health.WearUsedRatio, 1e-9, "SSD_Life_Left normalised 100, raw 93")
}

// The self-test log of smartctl 7.5's P3 SSD: three short tests aborted by
// the host, all stamped at power-on hour 0 (the drive's stamp, not ours).
func TestParseSelfTestAborted(t *testing.T) {
	r := parseFixture(t, "sat-ssd-p3-2tb-endurance-spare-v7.5-beszel.json")
	require.Equal(t, &SelfTest{Type: "Short offline", Result: SelfTestAborted, Status: "Aborted by host",
		AgeSeconds: ptr(7344 * 3600.0)}, r.SelfTest)
	require.Equal(t, SelfTestProgress{Reported: true, ExpectedSeconds: [2]float64{2 * 60, 10 * 60}}, r.Testing,
		"an aborted test did not test the disk: no last age by kind")
	require.Empty(t, r.Errors, "smartctl 7.5's output reads without errors")
}

// Wear from an attribute's raw value where the drive keeps the normalised
// value at 100 and counts life left in the raw: the figures of the drives
// lifeInRaw names (SKC400 74 and MTS400 96 as issue 18 reports them, the
// others from the outputs it cites), as smartctl prints those rows.
func TestWearFromRawLifeLeft(t *testing.T) {
	row := func(id int, name string, value int, raw string) []byte {
		return []byte(fmt.Sprintf(`{"smartctl":{"exit_status":0},"device":{"name":"/dev/sda","protocol":"ATA"},
"ata_smart_attributes":{"table":[{"id":%d,"name":%q,"value":%d,"worst":%d,"thresh":0,"raw":{"value":%s,"string":%q}}]}}`, id, name, value, value, raw, raw))
	}
	for _, tc := range []struct {
		name string
		doc  []byte
		want float64
	}{
		{"Kingston SKC400: normalised 100, raw 74", row(231, "SSD_Life_Left", 100, "74"), 0.26},
		{"Phison SSD (smartctl 7.4): normalised 100, raw 93", row(231, "SSD_Life_Left", 100, "93"), 0.07},
		{"Transcend MTS400: normalised 100, raw 96", row(169, "Remaining_Lifetime_Perc", 100, "96"), 0.04},
		{"Transcend TS128GMTS400 (linuxhw): normalised 100, raw 97", row(169, "Remaining_Lifetime_Perc", 100, "97"), 0.03},
		{"Kingston SKC400S371T (linuxhw): normalised 100, raw 98", row(231, "SSD_Life_Left", 100, "98"), 0.02},
		{"Kingston A400: both moved, normalised 98, raw 98", row(231, "SSD_Life_Left", 98, "98"), 0.02},
		{"a fresh drive: normalised 100, raw 100", row(231, "SSD_Life_Left", 100, "100"), 0},
		{"Intel 233 counts down only in the normalised value: raw 0 is not life left", row(233, "Media_Wearout_Indicator", 100, "0"), 0},
		{"a raw that is no percentage is ignored", row(169, "Remaining_Lifetime_Perc", 100, "65406"), 0},
	} {
		r, err := Parse(tc.doc)
		require.NoError(t, err, tc.name)
		require.NotNil(t, r.Health.WearUsedRatio, tc.name)
		require.InDelta(t, tc.want, *r.Health.WearUsedRatio, 1e-9, tc.name)
	}
}

// TestParseImpossibleValues: a value no disk can report is unset and named
// in Invalid (and Errors), in Health's field order; an attribute's huge
// raw value is left out, never ±Inf.
func TestParseImpossibleValues(t *testing.T) {
	r, err := Parse([]byte(`{"smartctl":{"exit_status":0},"device":{"name":"/dev/sda","protocol":"ATA"},"smart_status":{"passed":true},
		"temperature":{"current":-1e400,"op_limit_max":70},"power_cycle_count":-3,"power_on_time":{"hours":12},
		"ata_smart_attributes":{"table":[{"id":5,"name":"Reallocated_Sector_Ct","value":1e400,"raw":{"value":1e30,"string":"x"}},
		{"id":197,"name":"Current_Pending_Sector","value":100,"raw":{"value":7,"string":"7"}}]}}`))
	require.NoError(t, err)
	want := []string{
		"invalid value ignored: temperature_celsius is beyond any number a disk reports",
		"invalid value ignored: power_cycles -3 is below 0",
		"invalid value ignored: reallocated_sectors is beyond any number a disk reports",
	}
	require.Equal(t, want, r.Invalid)
	require.Equal(t, want, r.Errors)
	require.Nil(t, r.Health.TemperatureCelsius)
	require.Nil(t, r.Health.PowerCycles)
	require.Nil(t, r.Health.ReallocatedSectors)
	require.Equal(t, 70.0, *r.Health.TemperatureMaxOperatingCelsius)
	require.Equal(t, 43200.0, *r.Health.PowerOnSeconds)
	require.Equal(t, 7.0, *r.Health.PendingSectors)
	require.Nil(t, r.Attributes[0].Value)
	require.Nil(t, r.Attributes[0].Raw)

	st := StateFromResult(r)
	rep := NewReport(&st)
	require.Equal(t, SeverityUnknown, rep.Worst())
	require.Equal(t, []Signal{
		{SeverityUnknown, want[0]}, {SeverityUnknown, want[1]}, {SeverityUnknown, want[2]},
		{SeverityDegraded, "7 pending sectors"},
	}, rep.Signals())
}
