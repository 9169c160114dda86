package smart

import "strings"

// ExitStatus is smartctl's exit status, a bitmask (smartctl(8) "RETURN
// VALUES"). Bits 0-1 mean smartctl produced no device data; bits 2-7 are
// health signals about data it did produce, so they never discard data.
type ExitStatus int

// The exit-status bits, named as exported in exit_status_bits and in the
// diskcanary_smartctl_exit_status{bit} series.
const (
	ExitCommandLine      ExitStatus = 1 << 0 // command line did not parse
	ExitOpenFailed       ExitStatus = 1 << 1 // open failed, no IDENTIFY, or device in a low-power mode (-n)
	ExitCommandFailed    ExitStatus = 1 << 2 // some SMART/ATA/SCSI command failed or a checksum error
	ExitDiskFailing      ExitStatus = 1 << 3 // SMART status check returned "DISK FAILING"
	ExitPrefailBelow     ExitStatus = 1 << 4 // prefail attributes <= threshold now
	ExitPastBelow        ExitStatus = 1 << 5 // some attributes <= threshold at some time in the past
	ExitErrorLog         ExitStatus = 1 << 6 // the device error log has records
	ExitSelfTestLogError ExitStatus = 1 << 7 // the self-test log has failed tests
)

// ExitBitNames maps each bit position to its exported name.
var ExitBitNames = [8]string{
	"command_line_error",
	"device_open_failed",
	"smart_command_failed",
	"disk_failing",
	"prefail_attribute_below_threshold",
	"attribute_below_threshold_in_past",
	"error_log_has_errors",
	"self_test_log_has_errors",
}

// NoData reports whether smartctl said it could not read the device at all
// (bits 0-1): such a result carries no health data to replace older data with.
func (e ExitStatus) NoData() bool { return e&(ExitCommandLine|ExitOpenFailed) != 0 }

// Bits returns the names of the set bits, lowest first.
func (e ExitStatus) Bits() []string {
	names := []string{}
	for i, n := range ExitBitNames {
		if e&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return names
}

func (e ExitStatus) String() string { return strings.Join(e.Bits(), ",") }
