package smart

import (
	"fmt"
	"sort"
	"strings"
)

// Report is one device in `diskcanary smart --json` (the shape is in
// DESIGN.md). What the device does not report is null, never 0.
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
}

// NewReport builds a device's report from its state: the last result with
// data (may be nil), the last exit status and the last run's errors.
func NewReport(st *DeviceState) Report {
	rep := Report{Device: st.Label, Protocol: st.Target.Protocol, Standby: st.Standby, ExitStatusBits: []string{}, Errors: []string{}}
	if r := st.Result; r != nil {
		rep.Protocol = firstOf(r.Protocol, rep.Protocol)
		rep.Model, rep.Serial, rep.Firmware = r.Model, r.Serial, r.Firmware
		h := r.Health
		rep.Healthy, rep.TemperatureCelsius, rep.PowerOnSeconds, rep.PowerCycles = h.Healthy, h.TemperatureCelsius, h.PowerOnSeconds, h.PowerCycles
		rep.WearUsedRatio, rep.MediaErrors, rep.ReallocatedSectors, rep.PendingSectors = h.WearUsedRatio, h.MediaErrors, h.ReallocatedSectors, h.PendingSectors
		rep.AvailableSpare, rep.CriticalWarning = h.AvailableSpareRatio, h.CriticalWarning
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
		Target:     Target{Name: r.Name, Type: r.Type, Protocol: r.Protocol},
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

// Severity orders signals; the table lists the worst disk first.
type Severity int

const (
	SeverityOK Severity = iota
	SeverityInfo
	SeverityWarning
	SeverityDegraded
	SeverityFailing
)

func (s Severity) String() string {
	return [...]string{"OK", "INFO", "WARN", "DEGRADED", "FAILING"}[s]
}

// Signal is one finding about a device, worded for the table.
type Signal struct {
	Severity Severity
	Text     string
}

// Signals lists what is wrong with a device, worst first.
func (rep *Report) Signals() []Signal {
	var s []Signal
	add := func(sev Severity, format string, args ...any) {
		s = append(s, Signal{sev, fmt.Sprintf(format, args...)})
	}
	if rep.Healthy != nil && !*rep.Healthy {
		add(SeverityFailing, "SMART health check FAILED")
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
	bits := map[string]bool{}
	for _, b := range rep.ExitStatusBits {
		bits[b] = true
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
	if rep.Standby {
		add(SeverityInfo, "in standby, left asleep")
	} else if rep.SmartctlExitStatus != nil && ExitStatus(*rep.SmartctlExitStatus).NoData() || (rep.SmartctlExitStatus == nil && len(rep.Errors) > 0) {
		add(SeverityWarning, "could not read")
	}
	if len(rep.Errors) > 0 {
		add(SeverityInfo, "%s", rep.Errors[0])
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
