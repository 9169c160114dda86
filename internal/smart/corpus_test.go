package smart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// corpusDir finds the shared real-disk corpus: $DISKCANARY_SMART_CORPUS, or
// ../shared/fixtures/smartctl next to the repository. Tests that need it
// skip when it is absent, so a clone without ../shared still passes.
func corpusDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("DISKCANARY_SMART_CORPUS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "fixtures", "smartctl")
	}
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST.tsv")); err != nil {
		t.Skipf("smartctl corpus not found at %s (set DISKCANARY_SMART_CORPUS): %v", dir, err)
	}
	return dir
}

// corpusFiles lists the corpus files from MANIFEST.tsv, so a file missing
// from disk is a failure, not a silent skip.
func corpusFiles(t testing.TB, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "MANIFEST.tsv"))
	require.NoError(t, err)
	var files []string
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if i == 0 {
			continue
		}
		files = append(files, strings.SplitN(line, "\t", 2)[0])
	}
	require.NotEmpty(t, files)
	return files
}

// j walks generic JSON: j(doc, "a", "b", 3) is doc.a.b[3]; nil if absent.
func j(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func jnum(v any) *float64 {
	if f, ok := v.(float64); ok {
		return &f
	}
	return nil
}

// corpusWant is a device file's expected health as testdata/corpus-health.json
// states it: literal values, one entry per device file, null where the
// file's disk did not report the field. Written once from the rules in
// docs/metrics.md ("SMART") and checked by hand; a change to a normalisation rule
// changes the parser's output for the files it touches, and the diff to
// this file is the review of that change.
type corpusWant struct {
	Health
	// SCSIErrors keyed "op kind" ("read uncorrected").
	SCSIErrors map[string]float64 `json:"scsi_errors,omitempty"`
}

func loadCorpusWant(t *testing.T) map[string]corpusWant {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "corpus-health.json"))
	require.NoError(t, err)
	var want map[string]corpusWant
	require.NoError(t, json.Unmarshal(data, &want))
	for name, w := range want {
		for k, v := range w.SCSIErrors {
			op, kind, _ := strings.Cut(k, " ")
			if w.Health.SCSIErrors == nil {
				w.Health.SCSIErrors = map[[2]string]float64{}
			}
			w.Health.SCSIErrors[[2]string{op, kind}] = v
		}
		want[name] = w
	}
	return want
}

// corpusSpotChecks are the headline facts MANIFEST.tsv states for some
// files, and what corpus-health.json does not hold (exit bits, self-tests,
// errors), each with the reason the value is what it is.
var corpusSpotChecks = map[string]func(t *testing.T, r *Result){
	"ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json": func(t *testing.T, r *Result) {
		require.Equal(t, false, *r.Health.Healthy)
		require.Equal(t, 1975.0, *r.Health.ReallocatedSectors)
		require.Equal(t, 8.0, *r.Health.PendingSectors)
		require.Equal(t, ExitStatus(216), r.ExitStatus)
		require.Equal(t, ProtocolATA, r.Protocol, "usbjmicron type, ATA protocol")
		// The self-test log's newest entry passed; an extended test 52
		// power-on hours before it failed at LBA 104870168 (exit bit 7).
		// Power-on 65,592 h, the entry stamped 42: the log's 16-bit hours
		// wrapped, so it ran at 65,578 h, 14 h ago.
		require.Equal(t, &SelfTest{Type: "Short offline", Result: SelfTestPassed, Status: "Completed without error",
			AgeSeconds: ptr(14 * 3600.0), FailedLBA: ptr(104870168.0)}, r.SelfTest)
		require.Contains(t, r.ExitStatus.Bits(), "self_test_log_has_errors")
	},
	"nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json": func(t *testing.T, r *Result) {
		require.Equal(t, 16, *r.Health.CriticalWarning)
		require.Equal(t, false, *r.Health.Healthy)
		require.Equal(t, []string{"disk_failing"}, r.ExitStatus.Bits())
	},
	"nvme-pct-used-51-spare-93-smartctl-exporter.json": func(t *testing.T, r *Result) {
		require.InDelta(t, 0.51, *r.Health.WearUsedRatio, 1e-9)
		require.InDelta(t, 0.93, *r.Health.AvailableSpareRatio, 1e-9)
	},
	"megaraid-sat-hdd-disk1-reallocated-387-rc4-v7.1-scrutiny.json": func(t *testing.T, r *Result) {
		require.Equal(t, 387.0, *r.Health.ReallocatedSectors)
		require.Equal(t, ProtocolATA, r.Protocol, "sat+megaraid type, ATA protocol")
		require.Equal(t, "sda:sat+megaraid,1", DeviceLabel(r.Name, r.Type))
	},
	"sat-hdd-reallocated-304-smartctl-exporter.json": func(t *testing.T, r *Result) {
		require.Equal(t, 304.0, *r.Health.ReallocatedSectors)
		// Backblaze's five, normalised: 5, 187 (media errors), 188, 197, 198.
		require.Equal(t, 0.0, *r.Health.MediaErrors, "187")
		require.Equal(t, 0.0, *r.Health.CommandTimeouts, "188")
		require.Equal(t, 0.0, *r.Health.PendingSectors, "197")
		require.Equal(t, 0.0, *r.Health.OfflineUncorrectable, "198, kept though 187 is the media-error count")
	},
	"scsi-sas-hdd-grown-defects-260-uncorrected-smartctl-exporter.json": func(t *testing.T, r *Result) {
		require.Equal(t, 260.0, *r.Health.ReallocatedSectors)
		require.Equal(t, 536.0, *r.Health.MediaErrors, "535 write + 1 read uncorrected")
		require.Equal(t, map[[2]string]float64{
			{"read", "corrected"}: 5330297, {"read", "uncorrected"}: 1,
			{"write", "corrected"}: 1973, {"write", "uncorrected"}: 535,
		}, r.Health.SCSIErrors, "the error counter log, no verify page")
	},
	"sat-ssd-crucial-m4-xall-v7.4-starosdev.json": func(t *testing.T, r *Result) {
		require.InDelta(t, 0.03, *r.Health.WearUsedRatio, 1e-9, "device statistics beat the vendor attribute")
		require.Nil(t, r.Health.TemperatureCelsius, "reports 0 everywhere: no sensor")
		require.Equal(t, 70.0, *r.Health.TemperatureMaxOperatingCelsius, "SCT recommended maximum")
		require.Equal(t, 75.0, *r.Health.TemperatureCriticalCelsius, "SCT absolute limit")
		require.Equal(t, 0.0, *r.Health.CommandTimeouts, "attribute 188")
	},
	"sat-ssd-samsung860evo-xall-v7.0-scrutiny.json": func(t *testing.T, r *Result) {
		require.NotNil(t, r.Health.WearUsedRatio)
	},
	"sat-ssd-kingston-a400-rc4-smartctl-exporter.json": func(t *testing.T, r *Result) {
		require.InDelta(t, 0.02, *r.Health.WearUsedRatio, 1e-9, "SSD_Life_Left 98")
		require.Equal(t, []string{"smart_command_failed"}, r.ExitStatus.Bits())
		require.NotNil(t, r.Health.Healthy, "bit 2 keeps the data")
	},
	"nvme-healthy-v7.5-beszel.json": func(t *testing.T, r *Result) {
		require.Equal(t, 100.0, *r.Health.TemperatureMaxOperatingCelsius, "warning composite threshold")
		require.Equal(t, 110.0, *r.Health.TemperatureCriticalCelsius, "critical composite threshold")
		require.Equal(t, 0.0, *r.Health.WearUsedRatio, "smartctl 7.5 endurance_used")
		require.Equal(t, 0.32, *r.Health.AvailableSpareThresholdRatio, "smartctl 7.5 spare_available")
		require.Equal(t, 3365429248000.0, *r.Health.ReadBytes, "6,573,104 data units of 512,000 bytes")
		require.Equal(t, 8212770304000.0, *r.Health.WrittenBytes, "16,040,567 data units")
		require.Equal(t, 44.0, *r.Health.UnsafeShutdowns)
		require.Equal(t, 0.0, *r.Health.ErrorLogEntries)
	},
	"nvme-healthy-firecuda530-v7.3-netdata.json": func(t *testing.T, r *Result) {
		require.Equal(t, 4.0, *r.Health.ErrorLogEntries)
		require.Nil(t, r.Health.TemperatureMaxOperatingCelsius, "smartctl 7.3 prints no limits")
	},
	"scsi-intel-raid1-volume-windows-rc4-v7.0-scrutiny.json": func(t *testing.T, r *Result) {
		require.Nil(t, r.Health.TemperatureCelsius, "temperature 0 on a RAID volume is no sensor")
		require.Nil(t, r.Health.TemperatureMaxOperatingCelsius, "drive_trip 0: no limit")
	},
	"scsi-sas-hdd-15k-seagate-st600mp-v7.3-libblockdev.json": func(t *testing.T, r *Result) {
		require.Equal(t, 1090.0, *r.Health.PowerCycles, "SCSI: accumulated start-stop cycles")
		// scsi_self_test_0, the newest: completed at 3 of 4,665 power-on hours.
		require.Equal(t, &SelfTest{Type: "Reserved(7)", Result: SelfTestPassed, Status: "Completed",
			AgeSeconds: ptr(4662 * 3600.0)}, r.SelfTest)
	},
	"scsi-sas-ssd-hgst-husmr3280-v7.3-libblockdev.json": func(t *testing.T, r *Result) {
		require.Equal(t, 0.0, *r.Health.PowerCycles, "a reported 0 is 0, not null")
	},
	"scsi-sas-hdd-redacted-v7.3-netdata.json": func(t *testing.T, r *Result) {
		require.Equal(t, 85.0, *r.Health.TemperatureMaxOperatingCelsius, "SCSI reference (drive trip) temperature")
		require.Nil(t, r.Health.TemperatureCriticalCelsius, "SCSI states one limit")
		require.Equal(t, 4.0, *r.Health.PowerCycles, "accumulated start-stop cycles")
	},
	"scsi-sas-hdd-toshiba-al15seb120-v7.3-libblockdev.json": func(t *testing.T, r *Result) {
		require.Equal(t, 65.0, *r.Health.TemperatureMaxOperatingCelsius)
		require.Equal(t, 1073.0, *r.Health.PowerCycles)
	},
	"scsi-sas-hdd-anonymised-v7.2-telegraf.json": func(t *testing.T, r *Result) {
		require.Nil(t, r.Health.PowerCycles, "no start-stop page: null")
	},
	"scsi-sas-hdd-envtemp-v7.4-starosdev.json": func(t *testing.T, r *Result) {
		require.Equal(t, 38.0, *r.Health.TemperatureCelsius, "from the environmental reports page")
	},
	"error-open-failed-windows-rc2-v7.0-scrutiny.json": func(t *testing.T, r *Result) {
		require.True(t, r.ExitStatus.NoData())
		require.Equal(t, "/dev/sda", r.Name, "named from argv")
		require.NotEmpty(t, r.Errors)
	},
	"usb-bridge-autodetect-nosmart-rc4-v7.4-starosdev.json": func(t *testing.T, r *Result) {
		require.Contains(t, r.Errors, "Device does not support SMART")
	},
}

func TestCorpus(t *testing.T) {
	dir := corpusDir(t)
	files := corpusFiles(t, dir)
	wantHealth := loadCorpusWant(t)
	scans, devices := 0, 0
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			var doc any
			require.NoError(t, json.Unmarshal(data, &doc))
			if j(doc, "devices") != nil {
				scans++
				ts, err := ParseScan(data)
				require.NoError(t, err)
				raw, _ := j(doc, "devices").([]any)
				require.Len(t, ts, len(raw), "one target per scanned device")
				for i, tg := range ts {
					require.Equal(t, j(raw[i], "name"), tg.Name)
					typ, _ := j(raw[i], "type").(string)
					require.Equal(t, strings.Contains(typ, "megaraid"), tg.Type != "", "only port selectors are forced: %s", typ)
				}
				return
			}
			devices++
			r, err := Parse(data)
			require.NoError(t, err)
			want, ok := wantHealth[name]
			require.True(t, ok, "testdata/corpus-health.json has no entry for %s", name)
			requireHealth(t, want.Health, r.Health)
			if e := jnum(j(doc, "smartctl", "exit_status")); e != nil {
				require.Equal(t, ExitStatus(int(*e)), r.ExitStatus)
			}
			p, _ := j(doc, "device", "protocol").(string)
			require.Equal(t, p, r.Protocol)
			if check, ok := corpusSpotChecks[name]; ok {
				check(t, r)
			}
		})
	}
	require.Equal(t, len(files), scans+devices)
	require.Len(t, wantHealth, devices, "testdata/corpus-health.json: one entry per device file, none for files the corpus no longer has")
	for name := range corpusSpotChecks {
		found := false
		for _, f := range files {
			found = found || f == name
		}
		require.True(t, found, "spot check for %s, which the corpus no longer has", name)
	}
	t.Logf("corpus: %d device files, %d scan files", devices, scans)
}
