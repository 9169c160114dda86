package smart

import (
	"fmt"
	"sort"
	"strings"
)

// Report is one device in `diskcanary smart --json` (the shape is in
// docs/contract.md). What the device does not report is null, never 0.
type Report struct {
	Device             string   `json:"device"`
	Protocol           string   `json:"protocol"`
	Model              string   `json:"model"`
	Serial             string   `json:"serial"`
	Firmware           string   `json:"firmware"`
	Healthy            *bool    `json:"healthy"`
	TemperatureCelsius *float64 `json:"temperature_celsius"`
	PowerOnSeconds     *float64 `json:"power_on_seconds"`
	PowerCycles        *float64 `json:"power_cycles"`
	WearUsedRatio      *float64 `json:"wear_used_ratio"`
	MediaErrors        *float64 `json:"media_errors"`
	ReallocatedSectors *float64 `json:"reallocated_sectors"`
	PendingSectors     *float64 `json:"pending_sectors"`
	AvailableSpare     *float64 `json:"available_spare_ratio"`
	CriticalWarning    *int     `json:"critical_warning"`
	SmartctlExitStatus *int     `json:"smartctl_exit_status"`
	ExitStatusBits     []string `json:"exit_status_bits"`
	Errors             []string `json:"errors"`

	// Standby is shown in the table; the JSON shape has no field for it
	// beyond the exit bits and errors.
	Standby bool `json:"-"`
	// Source is the saved file a --from-json report was read from (the
	// device name alone is ambiguous: every host has an sda). Table only:
	// docs/contract.md's --json object is a closed set of keys.
	Source string `json:"-"`
	// Invalid are the values the result had that no disk can report
	// (Result.Invalid); they are among Errors too, and make it UNKNOWN.
	Invalid []string `json:"-"`
}

// NewReport builds a device's report from its state: the last result with
// data (may be nil), the last exit status and the last run's errors.
func NewReport(st *DeviceState) Report {
	rep := Report{Device: st.Label, Protocol: st.Device.Protocol, Standby: st.Standby, ExitStatusBits: []string{}, Errors: []string{}}
	if r := st.Result; r != nil {
		rep.Protocol = firstOf(r.Protocol, rep.Protocol)
		rep.Model, rep.Serial, rep.Firmware = r.Model, r.Serial, r.Firmware
		h := r.Health
		rep.Healthy, rep.TemperatureCelsius, rep.PowerOnSeconds, rep.PowerCycles = h.Healthy, h.TemperatureCelsius, h.PowerOnSeconds, h.PowerCycles
		rep.WearUsedRatio, rep.MediaErrors, rep.ReallocatedSectors, rep.PendingSectors = h.WearUsedRatio, h.MediaErrors, h.ReallocatedSectors, h.PendingSectors
		rep.AvailableSpare, rep.CriticalWarning = h.AvailableSpareRatio, h.CriticalWarning
		rep.Invalid = r.Invalid
	}
	if st.ExitStatus >= 0 {
		rep.SmartctlExitStatus = ptr(int(st.ExitStatus))
		rep.ExitStatusBits = st.ExitStatus.Bits()
	}
	rep.Errors = append(rep.Errors, st.Errors...)
	return rep
}

// StateFromResult wraps a parsed file as a device state, for --from-json.
func StateFromResult(r *Result) DeviceState {
	st := DeviceState{
		Device:     Device{Name: r.Name, Type: r.Type, Protocol: r.Protocol},
		Label:      DeviceLabel(r.Name, r.Type),
		ExitStatus: r.ExitStatus,
		Standby:    r.Standby(),
		Errors:     r.Errors,
		Success:    !r.ExitStatus.NoData(),
	}
	// A saved file is shown as it is: even a no-data run names the disk.
	st.Result = r
	return st
}

// Severity orders signals; the table lists the worst disk first, and the
// order is the precedence of `diskcanary smart`'s exit status: a known
// failure first, then a disk that could not be judged (a disk that stops
// answering may be the one that is dying), then a known degradation.
type Severity int

const (
	SeverityOK Severity = iota
	SeverityInfo
	SeverityWarning
	SeverityDegraded
	// SeverityUnknown: no health verdict (not read, or read without one).
	SeverityUnknown
	SeverityFailing
)

func (s Severity) String() string {
	return [...]string{"OK", "INFO", "WARN", "DEGRADED", "UNKNOWN", "FAILING"}[s]
}

// Signal is one finding about a device, worded for the table.
type Signal struct {
	Severity Severity
	Text     string
}

func (s Signal) String() string { return s.Severity.String() + ": " + s.Text }

// Signals lists every finding about a device, worst first. A device with
// no finding at or above SeverityWarning, and a health verdict, is healthy.
func (rep *Report) Signals() []Signal {
	var s []Signal
	add := func(sev Severity, format string, args ...any) {
		s = append(s, Signal{sev, fmt.Sprintf(format, args...)})
	}
	bits := map[string]bool{}
	for _, b := range rep.ExitStatusBits {
		bits[b] = true
	}
	if rep.Healthy != nil && !*rep.Healthy {
		add(SeverityFailing, "SMART health check FAILED")
	} else if bits["disk_failing"] {
		// smartctl's bit 3 is the same verdict; it stands alone when the
		// output lost smart_status.
		add(SeverityFailing, "smartctl exit status says DISK FAILING")
	}
	if cw := rep.CriticalWarning; cw != nil && *cw != 0 {
		var flags []string
		for bit, name := range CriticalWarningFlags {
			if *cw>>bit&1 == 1 {
				flags = append(flags, name)
			}
		}
		add(SeverityFailing, "NVMe critical warning: %s", strings.Join(flags, ","))
	}
	if bits["prefail_attribute_below_threshold"] {
		add(SeverityFailing, "pre-failure attribute at or below threshold")
	}
	if v := rep.PendingSectors; v != nil && *v > 0 {
		add(SeverityDegraded, "%.0f pending sectors", *v)
	}
	if v := rep.MediaErrors; v != nil && *v > 0 {
		add(SeverityDegraded, "%.0f media errors", *v)
	}
	if v := rep.ReallocatedSectors; v != nil && *v > 0 {
		add(SeverityDegraded, "%.0f reallocated sectors", *v)
	}
	if v := rep.WearUsedRatio; v != nil && *v >= 0.9 {
		add(SeverityDegraded, "%.0f%% of rated endurance used", *v*100)
	}
	if bits["self_test_log_has_errors"] {
		add(SeverityDegraded, "self-test log has failed tests")
	}
	if bits["attribute_below_threshold_in_past"] {
		add(SeverityWarning, "an attribute was below threshold in the past")
	}
	if bits["error_log_has_errors"] {
		add(SeverityWarning, "device error log has entries")
	}
	if bits["smart_command_failed"] {
		add(SeverityInfo, "a SMART command failed; some values may be missing")
	}
	// A value no disk can report: what else the disk says is not trusted.
	invalid := map[string]bool{}
	for _, e := range rep.Invalid {
		add(SeverityUnknown, "%s", e)
		invalid[e] = true
	}
	// Whether there is a verdict at all. The first error says why not, so
	// it joins that line; every other error follows on its own.
	var errs []string
	for _, e := range rep.Errors {
		if !invalid[e] {
			errs = append(errs, e)
		}
	}
	because := func() string {
		if len(errs) == 0 {
			return ""
		}
		e := errs[0]
		errs = errs[1:]
		return ": " + e
	}
	noData := rep.SmartctlExitStatus != nil && ExitStatus(*rep.SmartctlExitStatus).NoData() ||
		rep.SmartctlExitStatus == nil && len(errs) > 0
	switch {
	case rep.Standby && rep.Healthy == nil:
		add(SeverityUnknown, "in standby, left asleep: no health verdict (--nocheck never reads it)")
	case rep.Standby:
		add(SeverityInfo, "in standby, left asleep; values are from its last read")
	case noData:
		text := because()
		if text == "" && rep.SmartctlExitStatus != nil {
			text = fmt.Sprintf(": smartctl exit status %d (%s)", *rep.SmartctlExitStatus, strings.Join(rep.ExitStatusBits, ","))
		}
		add(SeverityUnknown, "could not read%s", text)
	case rep.Healthy == nil:
		add(SeverityUnknown, "no SMART health verdict%s", because())
	}
	for _, e := range errs {
		add(SeverityInfo, "%s", e)
	}
	sort.SliceStable(s, func(i, j int) bool { return s[i].Severity > s[j].Severity })
	return s
}

// Worst is the severity of the worst signal.
func (rep *Report) Worst() Severity {
	if s := rep.Signals(); len(s) > 0 {
		return s[0].Severity
	}
	return SeverityOK
}
