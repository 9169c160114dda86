// Package smart owns everything diskcanary knows about SMART: the typed
// model of `smartctl --json` output, its normalisation into one health
// record that reads the same for ATA, NVMe and SCSI disks, and the runner
// that invokes smartctl on its own schedule (the only place diskcanary
// starts a process), including the scheduled self-tests it starts on the
// drives (schedule.go), staggered per controller (controller.go).
package smart

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Protocols, as smartctl names them in device.protocol.
const (
	ProtocolATA  = "ATA"
	ProtocolNVMe = "NVMe"
	ProtocolSCSI = "SCSI"
)

// Health is the protocol-independent view of a disk. Every field is a
// pointer: nil means the device (or this smartctl run) did not report it,
// which is different from a reported 0.
type Health struct {
	Healthy                      *bool    `json:"healthy"`
	TemperatureCelsius           *float64 `json:"temperature_celsius"`
	PowerOnSeconds               *float64 `json:"power_on_seconds"`
	PowerCycles                  *float64 `json:"power_cycles"`
	WearUsedRatio                *float64 `json:"wear_used_ratio"`
	MediaErrors                  *float64 `json:"media_errors"`
	ReallocatedSectors           *float64 `json:"reallocated_sectors"`
	PendingSectors               *float64 `json:"pending_sectors"`
	AvailableSpareRatio          *float64 `json:"available_spare_ratio"`
	AvailableSpareThresholdRatio *float64 `json:"available_spare_threshold_ratio"`
	// CriticalWarning is the NVMe critical-warning byte (see CriticalWarningFlags).
	CriticalWarning *int `json:"critical_warning"`
	// The drive's own temperature limits: the operating maximum (NVMe
	// warning threshold, ATA SCT recommended maximum, SCSI reference
	// "drive trip" temperature) and the critical one (NVMe critical
	// threshold, ATA SCT absolute limit).
	TemperatureMaxOperatingCelsius *float64 `json:"temperature_max_operating_celsius"`
	TemperatureCriticalCelsius     *float64 `json:"temperature_critical_celsius"`
	// CommandTimeouts is ATA attribute 188 (one of Backblaze's five
	// failure predictors with 5, 187, 197, 198); the leading count of its
	// raw string where vendors pack several.
	CommandTimeouts *float64 `json:"command_timeouts"`
	// OfflineUncorrectable is ATA attribute 198, the sectors the drive's
	// own scans could not read (Backblaze's fifth predictor), kept apart
	// from MediaErrors, which prefers 187 where a drive has both.
	OfflineUncorrectable *float64 `json:"offline_uncorrectable_sectors"`
	// NVMe health log counters.
	ReadBytes       *float64 `json:"read_bytes"`
	WrittenBytes    *float64 `json:"written_bytes"`
	UnsafeShutdowns *float64 `json:"unsafe_shutdowns"`
	ErrorLogEntries *float64 `json:"error_log_entries"`
	// SCSIErrors are the SCSI error counter log's totals by op (read,
	// write, verify) and kind (corrected, uncorrected).
	SCSIErrors map[[2]string]float64 `json:"-"`
}

// Attribute is one row of the ATA SMART attribute table.
type Attribute struct {
	ID         int
	Name       string
	Value      *float64
	Worst      *float64
	Threshold  *float64
	Raw        *float64
	WhenFailed string
}

// Result is one parsed smartctl run for one device.
type Result struct {
	// Name and Type are smartctl's device name and -d type (/dev/bus/0, megaraid,1).
	Name     string
	Type     string
	Protocol string
	Model    string
	Serial   string
	Firmware string
	WWN      string

	Health     Health
	Attributes []Attribute
	// SelfTest is the self-test log's newest entry, nil when the log is
	// empty or was not read.
	SelfTest *SelfTest
	// Testing is the drive's current self-test and when each kind last ran.
	Testing SelfTestProgress

	// ExitStatus is -1 when unknown (a saved file without smartctl.exit_status).
	ExitStatus ExitStatus
	// PowerMode is set ("STANDBY", "SLEEP", "IDLE") when smartctl left a sleeping
	// disk alone because of --nocheck, from its "Device is in STANDBY mode,
	// exit(2)" message. The power mode of a disk it did read is no JSON
	// before smartctl 7.5 (7.3 prints "Power mode is: ACTIVE or IDLE" as
	// text only); 7.5's ATA `power_mode` object is not read: no real output
	// of it is in the corpus.
	PowerMode string
	// Errors are smartctl's own error messages and what the parser could not
	// read; a result with errors can still carry data.
	Errors []string
	// Invalid are the values no disk can report (Health.check), each left
	// unset; they are among Errors too. A disk that reports one has no
	// trustworthy verdict: its report is UNKNOWN.
	Invalid []string
}

// Standby reports whether smartctl skipped the device because it was in a low-power mode.
func (r *Result) Standby() bool { return r.PowerMode != "" }

// CriticalWarningFlags names the bits of the NVMe critical-warning byte (NVMe
// base spec, SMART / Health Information log, byte 0).
var CriticalWarningFlags = [6]string{
	"available_spare", // below the threshold
	"temperature",     // over or under a temperature threshold
	"reliability_degraded",
	"read_only",
	"volatile_memory_backup_failed",
	"persistent_memory_region_unreliable",
}

// Parse reads one `smartctl --json` device output. It returns an error only
// when there is no JSON object to read; anything readable is kept, and
// what was not is listed in Result.Errors.
func Parse(data []byte) (*Result, error) {
	var raw rawOutput
	err := json.Unmarshal(data, &raw)
	var te *json.UnmarshalTypeError
	if err != nil && !errors.As(err, &te) {
		return nil, fmt.Errorf("smartctl json: %w", err)
	}
	if raw.Smartctl == nil {
		return nil, errors.New("smartctl json: no smartctl object (is this smartctl --json output?)")
	}
	r := normalise(&raw)
	if err != nil {
		// A field of an unexpected type (a new smartctl, an odd drive) costs
		// that field, not the device: encoding/json has filled the rest.
		r.Errors = append(r.Errors, "smartctl json: "+err.Error())
	}
	return r, nil
}

func normalise(raw *rawOutput) *Result {
	r := &Result{ExitStatus: -1}
	if e := raw.Smartctl.ExitStatus; e.ok && e.v >= 0 {
		r.ExitStatus = ExitStatus(e.v & 0xff)
	}
	for _, m := range raw.Smartctl.Messages {
		if mode, ok := powerModeMessage(m.String); ok {
			r.PowerMode = mode
			continue
		}
		if m.Severity == "error" {
			r.Errors = append(r.Errors, m.String)
		}
	}
	if d := raw.Device; d != nil {
		r.Name, r.Type, r.Protocol = d.Name, d.Type, d.Protocol
	}
	if r.Name == "" {
		// A failed open prints no device object; argv still names the disk.
		for i := len(raw.Smartctl.Argv) - 1; i > 0; i-- {
			if a := raw.Smartctl.Argv[i]; strings.HasPrefix(a, "/dev/") {
				r.Name = a
				break
			}
		}
	}
	r.identity(raw)

	h := &r.Health
	if s := raw.SmartStatus; s != nil && s.Passed.ok {
		h.Healthy = ptr(s.Passed.v)
	} else if r.ExitStatus >= 0 && r.ExitStatus&ExitDiskFailing != 0 {
		h.Healthy = ptr(false)
	}
	if t := raw.Temperature; t != nil {
		h.TemperatureCelsius = nonZero(t.Current)
		// 0 is what smartctl prints for a limit the drive did not set.
		h.TemperatureMaxOperatingCelsius = nonZero(t.OpLimitMax)
		h.TemperatureCriticalCelsius = nonZero(t.CriticalLimitMax)
		if h.TemperatureCriticalCelsius == nil {
			h.TemperatureCriticalCelsius = nonZero(t.LimitMax)
		}
	}
	if p := raw.PowerOnTime; p != nil {
		if hours := num(p.Hours); hours != nil {
			s := *hours * 3600
			if m := num(p.Minutes); m != nil {
				s += *m * 60
			}
			h.PowerOnSeconds = &s
		}
	}
	h.PowerCycles = num(raw.PowerCycleCount)

	// Dispatch on the protocol smartctl actually spoke, not on -d type: a
	// megaraid or USB-bridge type can carry any of them.
	switch r.Protocol {
	case ProtocolATA:
		r.ata(raw)
	case ProtocolNVMe:
		r.nvme(raw)
	case ProtocolSCSI:
		r.scsi(raw)
	}
	// smartctl 7.5's own normalisation wins over the tables where present.
	if e := raw.EnduranceUsed; e != nil && e.Current.present() {
		h.WearUsedRatio = percent(e.Current)
	}
	if s := raw.SpareAvailable; s != nil && s.Current.present() {
		h.AvailableSpareRatio = percent(s.Current)
		if s.Threshold.present() {
			h.AvailableSpareThresholdRatio = percent(s.Threshold)
		}
	}
	r.selfTests(raw)
	r.progress(raw)
	r.Invalid = h.check()
	r.Errors = append(r.Errors, r.Invalid...)
	return r
}

func (r *Result) identity(raw *rawOutput) {
	r.Model = firstOf(raw.ModelName, raw.SCSIModelName, strings.TrimSpace(raw.SCSIVendor+" "+raw.SCSIProduct), strings.TrimSpace(raw.Vendor+" "+raw.Product))
	r.Serial = raw.SerialNumber
	r.Firmware = firstOf(raw.FirmwareVersion, raw.SCSIRevision, raw.Revision)
	if w := raw.WWN; w != nil && w.NAA.ok && w.OUI.ok && w.ID.ok {
		// smartctl splits the NAA WWN into its fields: 4-bit NAA, 24-bit OUI,
		// 36-bit vendor id. Joined, it is the 0x... value udev calls ID_WWN.
		r.WWN = fmt.Sprintf("0x%x", uint64(w.NAA.v)<<60|uint64(w.OUI.v&0xffffff)<<36|uint64(w.ID.v&0xfffffffff))
	} else {
		r.WWN = raw.LogicalUnitID
	}
}

func (r *Result) ata(raw *rawOutput) {
	h := &r.Health
	if raw.ATAAttributes != nil {
		seen := make(map[int]bool, len(raw.ATAAttributes.Table))
		r.Attributes = make([]Attribute, 0, len(raw.ATAAttributes.Table))
		for _, a := range raw.ATAAttributes.Table {
			if !a.ID.ok || a.ID.v < 1 || a.ID.v > 255 {
				r.Errors = append(r.Errors, fmt.Sprintf("ata attribute %q without a valid id ignored", a.Name))
				continue
			}
			id := int(a.ID.v)
			if seen[id] {
				// Two rows with one id would be two series with one label set,
				// which fails the whole scrape; keep the first.
				r.Errors = append(r.Errors, fmt.Sprintf("ata attribute %d (%s) listed twice; kept the first", id, a.Name))
				continue
			}
			seen[id] = true
			// An attribute's numbers are exported as they are, so a huge one
			// is left out, not made ±Inf (only Health's are checked).
			attr := Attribute{ID: id, Name: a.Name, Value: known(a.Value), Worst: known(a.Worst), Threshold: known(a.Thresh), WhenFailed: a.WhenFailed}
			if a.Raw != nil {
				attr.Raw = known(a.Raw.Value)
			}
			r.Attributes = append(r.Attributes, attr)
			r.ataAttrHealth(&a)
		}
	}
	// ACS device statistics are standard where attributes are vendor-defined,
	// so they win when present (smartctl -l devstat).
	if ds := raw.ATADevStats; ds != nil {
		for _, p := range ds.Pages {
			for _, it := range p.Table {
				if !it.Value.present() || (it.Flags.Valid.ok && !it.Flags.Valid.v) {
					continue
				}
				switch {
				case p.Number == 7 && it.Offset == 8: // Percentage Used Endurance Indicator
					h.WearUsedRatio = percent(it.Value)
				case p.Number == 4 && it.Offset == 8 && h.MediaErrors == nil: // Number of Reported Uncorrectable Errors
					h.MediaErrors = num(it.Value)
				}
			}
		}
	}
	// Media errors: 187 Reported_Uncorrect, else the devstat count, else 198
	// Offline_Uncorrectable, which is all many HDDs (HGST, WD) report.
	if h.MediaErrors == nil {
		h.MediaErrors = h.OfflineUncorrectable
	}
}

// wearFromNormalised are ATA attributes (by smartctl drive-database name)
// whose normalised value counts life left down from 100.
var wearFromNormalised = map[string]bool{
	"Wear_Leveling_Count":     true, // Samsung 177, Crucial/Micron 173
	"SSD_Life_Left":           true, // Kingston, SandForce 231
	"Media_Wearout_Indicator": true, // Intel 233
	"Perc_Rated_Life_Used":    true, // Crucial 202 (normalised = 100 - raw)
	"Percent_Lifetime_Remain": true, // Micron 202
	"Remaining_Lifetime_Perc": true, // WD 169
}

// lifeInRaw are life attributes some drives leave at a normalised 100
// while the raw value counts the life left in percent; where the
// normalised value has moved, it and the raw agree (Kingston A400:
// normalised 98, raw 98). Each entry names the drives that show it and
// the real smartctl outputs it was read from.
var lifeInRaw = map[string]lifeInRawEntry{
	"SSD_Life_Left": { // 231
		drives: "Kingston SKC400 and other Phison-controller SSDs",
		sources: []string{
			// smartctl 7.4 -A --json of a Phison-controller SSD: normalised
			// 100, raw 93, average erase count 126 of max 160; in
			// internal/smart/testdata (sat-ssd-phison-life-left-raw93-v7.4-flutter-server-box.json).
			"lollipopkit/flutter_server_box test/disk_smart_test.dart @089c0101796169252e84b1263735f01a6bef82bc",
			// smartctl 7.3 -x of a KINGSTON SKC400S371T: normalised 100, raw 98.
			"linuxhw/SMART SSD/Kingston/SKC400/SKC400S371T/5B11433F5AF9 @1252c08b4f14127dd816640a11f2c3fe93ee9277",
			// Issue 18 reports a SKC400 at normalised 100, raw 74 (~27 %
			// used by its erase counts); no output of it is public.
		},
	},
	"Remaining_Lifetime_Perc": { // 169
		drives: "Transcend MTS400 (Silicon Motion controller)",
		sources: []string{
			// smartctl -x of a TS128GMTS400: normalised 100, raw 97, average
			// erase count 102 of the specified 3,000, device statistics
			// "Percentage Used Endurance Indicator" 3. Issue 18 reports
			// another at normalised 100, raw 96.
			"linuxhw/SMART SSD/Transcend/TS128/TS128GMTS400/E56F0BE22100 @56869003b049b025e11c118835ec461055075313",
		},
	},
}

type lifeInRawEntry struct {
	drives  string
	sources []string
}

func (r *Result) ataAttrHealth(a *rawATAAttr) {
	h := &r.Health
	switch a.ID.v {
	case 5:
		h.ReallocatedSectors = rawCount(a.Raw)
	case 197:
		h.PendingSectors = rawCount(a.Raw)
	case 187:
		if h.MediaErrors == nil {
			h.MediaErrors = rawCount(a.Raw)
		}
	case 9:
		if h.PowerOnSeconds == nil && a.Name == "Power_On_Hours" {
			if v := rawCount(a.Raw); v != nil {
				h.PowerOnSeconds = ptr(*v * 3600)
			}
		}
	case 188:
		h.CommandTimeouts = rawCount(a.Raw)
	case 198:
		h.OfflineUncorrectable = rawCount(a.Raw)
	case 12:
		if h.PowerCycles == nil {
			h.PowerCycles = rawCount(a.Raw)
		}
	case 194:
		if h.TemperatureCelsius == nil {
			if v := rawCount(a.Raw); v != nil && *v != 0 {
				h.TemperatureCelsius = v
			}
		}
	}
	if h.WearUsedRatio == nil && wearFromNormalised[a.Name] && a.Value.ok && a.Value.v >= 0 && a.Value.v <= 100 {
		left := float64(a.Value.v)
		if _, ok := lifeInRaw[a.Name]; ok && a.Value.v == 100 {
			if raw := rawCount(a.Raw); raw != nil && *raw >= 0 && *raw < 100 {
				left = *raw
			}
		}
		h.WearUsedRatio = ptr((100 - left) / 100)
	}
}

func (r *Result) nvme(raw *rawOutput) {
	l := raw.NVMeHealth
	if l == nil {
		return
	}
	h := &r.Health
	if h.TemperatureCelsius == nil {
		h.TemperatureCelsius = nonZero(l.Temperature)
	}
	if v := num(l.PowerOnHours); h.PowerOnSeconds == nil && v != nil {
		h.PowerOnSeconds = ptr(*v * 3600)
	}
	if h.PowerCycles == nil {
		h.PowerCycles = num(l.PowerCycles)
	}
	h.WearUsedRatio = percent(l.PercentageUsed)
	h.MediaErrors = num(l.MediaErrors)
	h.AvailableSpareRatio = percent(l.AvailableSpare)
	h.AvailableSpareThresholdRatio = percent(l.AvailableSpareThreshold)
	if l.CriticalWarning.ok {
		h.CriticalWarning = ptr(int(l.CriticalWarning.v & 0xff))
	}
	// A data unit is 1,000 512-byte units (NVMe base spec, SMART log).
	if v := num(l.DataUnitsRead); v != nil {
		h.ReadBytes = ptr(*v * 512_000)
	}
	if v := num(l.DataUnitsWritten); v != nil {
		h.WrittenBytes = ptr(*v * 512_000)
	}
	h.UnsafeShutdowns = num(l.UnsafeShutdowns)
	h.ErrorLogEntries = num(l.ErrorLogEntries)
}

func (r *Result) scsi(raw *rawOutput) {
	h := &r.Health
	if h.TemperatureCelsius == nil {
		// smartctl 7.4 moved the temperature of some SAS disks to the
		// environmental reports page and left temperature.current at 0.
		if t, ok := raw.SCSIEnvReports["temperature_1"]; ok {
			h.TemperatureCelsius = nonZero(t.Current)
		}
	}
	if t := raw.Temperature; t != nil && h.TemperatureMaxOperatingCelsius == nil && t.DriveTrip.v != 255 {
		h.TemperatureMaxOperatingCelsius = nonZero(t.DriveTrip)
	}
	h.ReallocatedSectors = num(raw.SCSIGrownDefect)
	h.WearUsedRatio = percent(raw.SCSIPctUsed)
	if h.PowerCycles == nil && raw.SCSIStartStop != nil {
		h.PowerCycles = num(raw.SCSIStartStop.AccumulatedStartStopCycles)
	}
	if l := raw.SCSIErrorLog; l != nil {
		var sum float64
		var any bool
		for _, c := range []struct {
			op string
			c  *rawSCSIErrCounters
		}{{"read", l.Read}, {"write", l.Write}, {"verify", l.Verify}} {
			if c.c == nil {
				continue
			}
			if h.SCSIErrors == nil {
				h.SCSIErrors = map[[2]string]float64{}
			}
			if v := num(c.c.TotalCorrected); v != nil {
				h.SCSIErrors[[2]string{c.op, "corrected"}] = *v
			}
			if v := num(c.c.TotalUncorrected); v != nil {
				h.SCSIErrors[[2]string{c.op, "uncorrected"}] = *v
				sum += *v
				any = true
			}
		}
		if any {
			h.MediaErrors = &sum
		}
	}
}

// powerModeMessage recognises smartctl's "Device is in STANDBY mode, exit(2)"
// (and "STANDBY (OS)", "SLEEP", "IDLE"), printed when --nocheck left the disk asleep.
func powerModeMessage(s string) (string, bool) {
	i := strings.Index(s, "Device is in ")
	if i < 0 {
		return "", false
	}
	rest := s[i+len("Device is in "):]
	j := strings.Index(rest, " mode")
	if j <= 0 {
		return "", false
	}
	return rest[:j], true
}

// rawCount reads an attribute's raw count. smartctl's raw string is already
// decoded per the drive database ("38 (Min/Max 28/39)", "1234h+05m"), so its
// leading integer is the count; the 48-bit raw value is the fallback.
func rawCount(raw *rawRaw) *float64 {
	if raw == nil {
		return nil
	}
	s := raw.String
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if n > 0 {
		if v, err := strconv.ParseUint(s[:n], 10, 64); err == nil {
			return ptr(float64(v))
		}
	}
	return num(raw.Value)
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func ptr[T any](v T) *T { return &v }

// num reads a number for Health; a huge one becomes ±Inf, which
// Health.check then refuses by name.
func num(v optInt) *float64 {
	if v.huge {
		return ptr(math.Inf(int(v.v)))
	}
	if !v.ok {
		return nil
	}
	return ptr(float64(v.v))
}

// known is num without the huge: a number past int64 is not there.
func known(v optInt) *float64 {
	if v.huge {
		return nil
	}
	return num(v)
}

func percent(v optInt) *float64 {
	if p := num(v); p != nil {
		return ptr(*p / 100)
	}
	return nil
}

// nonZero treats a temperature of exactly 0 °C as not reported: SCSI log
// pages and some SSDs (Crucial m4, RAID volumes) return 0 when they have no
// sensor, and no disk in service runs at 0 °C.
func nonZero(v optInt) *float64 {
	if v.ok && v.v == 0 {
		return nil
	}
	return num(v)
}
