package smart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
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

func scaled(v *float64, k float64) *float64 {
	if v == nil {
		return nil
	}
	return f64(*v * k)
}

func nonZeroF(v *float64) *float64 {
	if v == nil || *v == 0 {
		return nil
	}
	return v
}

// ataAttr returns the first row of the ATA attribute table with this id.
func ataAttr(doc any, id int) map[string]any {
	rows, _ := j(doc, "ata_smart_attributes", "table").([]any)
	for _, r := range rows {
		if m, ok := r.(map[string]any); ok && jnum(m["id"]) != nil && *jnum(m["id"]) == float64(id) {
			return m
		}
	}
	return nil
}

func ataRawCount(doc any, id int) *float64 {
	a := ataAttr(doc, id)
	if a == nil {
		return nil
	}
	s, _ := j(a, "raw", "string").(string)
	if f := strings.Fields(s); len(f) > 0 {
		digits := strings.TrimRightFunc(f[0], func(r rune) bool { return r < '0' || r > '9' })
		if v, err := strconv.ParseFloat(digits, 64); err == nil {
			return &v
		}
	}
	return jnum(j(a, "raw", "value"))
}

func devstat(doc any, page, offset int) *float64 {
	pages, _ := j(doc, "ata_device_statistics", "pages").([]any)
	for _, p := range pages {
		if n := jnum(j(p, "number")); n == nil || *n != float64(page) {
			continue
		}
		rows, _ := j(p, "table").([]any)
		for _, r := range rows {
			if o := jnum(j(r, "offset")); o != nil && *o == float64(offset) && j(r, "flags", "valid") != false {
				return jnum(j(r, "value"))
			}
		}
	}
	return nil
}

// expectedHealth derives the normalised fields straight from a file's JSON,
// written against the rules in README "SMART" independently of the typed
// parser: where each protocol keeps each value.
func expectedHealth(doc any) Health {
	var h Health
	protocol, _ := j(doc, "device", "protocol").(string)
	exit := jnum(j(doc, "smartctl", "exit_status"))
	if p, ok := j(doc, "smart_status", "passed").(bool); ok {
		h.Healthy = b(p)
	} else if exit != nil && int(*exit)&8 != 0 {
		h.Healthy = b(false)
	}
	h.TemperatureCelsius = nonZeroF(jnum(j(doc, "temperature", "current")))
	h.TemperatureMaxOperatingCelsius = nonZeroF(jnum(j(doc, "temperature", "op_limit_max")))
	h.TemperatureCriticalCelsius = nonZeroF(jnum(j(doc, "temperature", "critical_limit_max")))
	if h.TemperatureCriticalCelsius == nil {
		h.TemperatureCriticalCelsius = nonZeroF(jnum(j(doc, "temperature", "limit_max")))
	}
	if hours := jnum(j(doc, "power_on_time", "hours")); hours != nil {
		s := *hours * 3600
		if m := jnum(j(doc, "power_on_time", "minutes")); m != nil {
			s += *m * 60
		}
		h.PowerOnSeconds = &s
	}
	h.PowerCycles = jnum(j(doc, "power_cycle_count"))
	switch protocol {
	case "NVMe":
		l := j(doc, "nvme_smart_health_information_log")
		if l == nil {
			break
		}
		if h.TemperatureCelsius == nil {
			h.TemperatureCelsius = nonZeroF(jnum(j(l, "temperature")))
		}
		if h.PowerOnSeconds == nil {
			h.PowerOnSeconds = scaled(jnum(j(l, "power_on_hours")), 3600)
		}
		if h.PowerCycles == nil {
			h.PowerCycles = jnum(j(l, "power_cycles"))
		}
		h.WearUsedRatio = scaled(jnum(j(l, "percentage_used")), 0.01)
		h.MediaErrors = jnum(j(l, "media_errors"))
		h.AvailableSpareRatio = scaled(jnum(j(l, "available_spare")), 0.01)
		h.AvailableSpareThresholdRatio = scaled(jnum(j(l, "available_spare_threshold")), 0.01)
		if cw := jnum(j(l, "critical_warning")); cw != nil {
			h.CriticalWarning = ptr(int(*cw))
		}
		h.ReadBytes = scaled(jnum(j(l, "data_units_read")), 512_000)
		h.WrittenBytes = scaled(jnum(j(l, "data_units_written")), 512_000)
		h.UnsafeShutdowns = jnum(j(l, "unsafe_shutdowns"))
		h.ErrorLogEntries = jnum(j(l, "num_err_log_entries"))
	case "SCSI":
		if h.TemperatureCelsius == nil {
			h.TemperatureCelsius = nonZeroF(jnum(j(doc, "scsi_environmental_reports", "temperature_1", "current")))
		}
		if trip := jnum(j(doc, "temperature", "drive_trip")); h.TemperatureMaxOperatingCelsius == nil && trip != nil && *trip != 255 {
			h.TemperatureMaxOperatingCelsius = nonZeroF(trip)
		}
		h.ReallocatedSectors = jnum(j(doc, "scsi_grown_defect_list"))
		h.WearUsedRatio = scaled(jnum(j(doc, "scsi_percentage_used_endurance_indicator")), 0.01)
		if h.PowerCycles == nil {
			h.PowerCycles = jnum(j(doc, "scsi_start_stop_cycle_counter", "accumulated_start_stop_cycles"))
		}
		var sum float64
		any := false
		for _, k := range []string{"read", "write", "verify"} {
			if v := jnum(j(doc, "scsi_error_counter_log", k, "total_uncorrected_errors")); v != nil {
				sum += *v
				any = true
			}
			if j(doc, "scsi_error_counter_log", k) != nil && h.SCSIErrors == nil {
				h.SCSIErrors = map[[2]string]float64{}
			}
			for kind, key := range map[string]string{"corrected": "total_errors_corrected", "uncorrected": "total_uncorrected_errors"} {
				if v := jnum(j(doc, "scsi_error_counter_log", k, key)); v != nil {
					h.SCSIErrors[[2]string{k, kind}] = *v
				}
			}
		}
		if any {
			h.MediaErrors = &sum
		}
	case "ATA":
		h.ReallocatedSectors = ataRawCount(doc, 5)
		h.PendingSectors = ataRawCount(doc, 197)
		h.CommandTimeouts = ataRawCount(doc, 188)
		h.OfflineUncorrectable = ataRawCount(doc, 198)
		if h.PowerOnSeconds == nil {
			if a := ataAttr(doc, 9); a != nil && a["name"] == "Power_On_Hours" {
				h.PowerOnSeconds = scaled(ataRawCount(doc, 9), 3600)
			}
		}
		if h.PowerCycles == nil {
			h.PowerCycles = ataRawCount(doc, 12)
		}
		if h.TemperatureCelsius == nil {
			h.TemperatureCelsius = nonZeroF(ataRawCount(doc, 194))
		}
		h.MediaErrors = ataRawCount(doc, 187)
		if h.MediaErrors == nil {
			h.MediaErrors = devstat(doc, 4, 8)
		}
		if h.MediaErrors == nil {
			h.MediaErrors = ataRawCount(doc, 198)
		}
		h.WearUsedRatio = scaled(devstat(doc, 7, 8), 0.01)
		if h.WearUsedRatio == nil {
			rows, _ := j(doc, "ata_smart_attributes", "table").([]any)
			for _, r := range rows {
				name, _ := j(r, "name").(string)
				v := jnum(j(r, "value"))
				if v != nil && *v <= 100 && wearFromNormalised[name] {
					h.WearUsedRatio = f64((100 - *v) / 100)
					break
				}
			}
		}
	}
	// smartctl 7.5's normalised percentages, where printed, win.
	if v := jnum(j(doc, "endurance_used", "current_percent")); v != nil {
		h.WearUsedRatio = scaled(v, 0.01)
	}
	if v := jnum(j(doc, "spare_available", "current_percent")); v != nil {
		h.AvailableSpareRatio = scaled(v, 0.01)
		if th := jnum(j(doc, "spare_available", "threshold_percent")); th != nil {
			h.AvailableSpareThresholdRatio = scaled(th, 0.01)
		}
	}
	return h
}

// corpusSpotChecks are the headline facts MANIFEST.tsv states for some
// files, checked literally so the derivation above cannot drift with the parser.
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
			want := expectedHealth(doc)
			requireHealth(t, want, r.Health)
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
	for name := range corpusSpotChecks {
		found := false
		for _, f := range files {
			found = found || f == name
		}
		require.True(t, found, "spot check for %s, which the corpus no longer has", name)
	}
	t.Logf("corpus: %d device files, %d scan files", devices, scans)
}
