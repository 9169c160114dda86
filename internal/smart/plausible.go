package smart

import (
	"fmt"
	"math"
	"sort"
)

// The values a disk can report. Anything outside is garbage (a corrupt
// or hand-edited file, a firmware bug, a number past int64) and must not
// read as healthy: Health.check unsets it and names it, and the report is
// UNKNOWN.
const (
	// absoluteZero: below it no temperature exists.
	absoluteZero = -273.0
	// maxDiskTemperature: drives are rated to ~85 °C and lead-free solder
	// melts at ~217 °C; no disk reports more and still runs.
	maxDiskTemperature = 200.0
	// maxWearRatio: NVMe percentage used, the SCSI and ATA endurance
	// indicators may pass 100 % and stop at 255 % (NVMe base spec, SMART log
	// byte 5: "shall be represented as 255").
	maxWearRatio = 2.55
	// maxPowerOnSeconds: 100 years; the first hard disk shipped in 1956.
	maxPowerOnSeconds = 100 * 365.25 * 24 * 3600
)

// check unsets every Health value that no disk can report and returns why,
// one line per value, in a stable order.
func (h *Health) check() []string {
	counts := math.Inf(1)
	fields := []struct {
		name   string
		v      **float64
		lo, hi float64
	}{
		{"temperature_celsius", &h.TemperatureCelsius, absoluteZero, maxDiskTemperature},
		{"temperature_max_operating_celsius", &h.TemperatureMaxOperatingCelsius, absoluteZero, maxDiskTemperature},
		{"temperature_critical_celsius", &h.TemperatureCriticalCelsius, absoluteZero, maxDiskTemperature},
		{"wear_used_ratio", &h.WearUsedRatio, 0, maxWearRatio},
		{"available_spare_ratio", &h.AvailableSpareRatio, 0, 1},
		{"available_spare_threshold_ratio", &h.AvailableSpareThresholdRatio, 0, 1},
		{"power_on_seconds", &h.PowerOnSeconds, 0, maxPowerOnSeconds},
		{"power_cycles", &h.PowerCycles, 0, counts},
		{"media_errors", &h.MediaErrors, 0, counts},
		{"reallocated_sectors", &h.ReallocatedSectors, 0, counts},
		{"pending_sectors", &h.PendingSectors, 0, counts},
		{"command_timeouts", &h.CommandTimeouts, 0, counts},
		{"offline_uncorrectable_sectors", &h.OfflineUncorrectable, 0, counts},
		{"read_bytes", &h.ReadBytes, 0, counts},
		{"written_bytes", &h.WrittenBytes, 0, counts},
		{"unsafe_shutdowns", &h.UnsafeShutdowns, 0, counts},
		{"error_log_entries", &h.ErrorLogEntries, 0, counts},
	}
	var bad []string
	for _, f := range fields {
		if *f.v == nil {
			continue
		}
		if why := outOfRange(**f.v, f.lo, f.hi); why != "" {
			bad = append(bad, fmt.Sprintf("invalid value ignored: %s %s", f.name, why))
			*f.v = nil
		}
	}
	keys := make([][2]string, 0, len(h.SCSIErrors))
	for k := range h.SCSIErrors {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		if why := outOfRange(h.SCSIErrors[k], 0, counts); why != "" {
			bad = append(bad, fmt.Sprintf("invalid value ignored: scsi %s errors %s %s", k[0], k[1], why))
			delete(h.SCSIErrors, k)
		}
	}
	return bad
}

// outOfRange says how v falls outside [lo, hi], or "" when it does not.
// ±Inf is a number too large for any counter (optInt.huge).
func outOfRange(v, lo, hi float64) string {
	switch {
	case math.IsInf(v, 0) || math.IsNaN(v):
		return "is beyond any number a disk reports"
	case v < lo:
		return fmt.Sprintf("%g is below %g", v, lo)
	case v > hi:
		return fmt.Sprintf("%g is above %g", v, hi)
	}
	return ""
}
