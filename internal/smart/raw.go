package smart

import (
	"bytes"
	"errors"
	"math"
	"strconv"
)

// The raw* types mirror the parts of `smartctl --json` output diskcanary
// reads (smartctl JSON format 1.0, smartctl 6.7-7.5). Numbers and booleans
// are optInt/optBool: smartctl omits what a device does not report, and a
// missing value must stay missing rather than become 0.

type rawOutput struct {
	Smartctl *rawSmartctl `json:"smartctl"`
	Device   *rawDevice   `json:"device"`

	// Scan output (--scan / --scan-open).
	Devices []rawDevice `json:"devices"`

	ModelFamily     string   `json:"model_family"`
	ModelName       string   `json:"model_name"`
	SerialNumber    string   `json:"serial_number"`
	FirmwareVersion string   `json:"firmware_version"`
	WWN             *rawWWN  `json:"wwn"`
	LogicalUnitID   string   `json:"logical_unit_id"`
	UserCapacity    *rawCap  `json:"user_capacity"`
	SmartStatus     *rawStat `json:"smart_status"`

	// SCSI identity: smartctl < 7.3 used vendor/product/revision, later
	// versions scsi_vendor/scsi_product/scsi_model_name/scsi_revision.
	Vendor        string `json:"vendor"`
	Product       string `json:"product"`
	Revision      string `json:"revision"`
	SCSIVendor    string `json:"scsi_vendor"`
	SCSIProduct   string `json:"scsi_product"`
	SCSIModelName string `json:"scsi_model_name"`
	SCSIRevision  string `json:"scsi_revision"`

	Temperature     *rawTemp              `json:"temperature"`
	PowerOnTime     *rawPowerOn           `json:"power_on_time"`
	PowerCycleCount optInt                `json:"power_cycle_count"`
	ATAAttributes   *rawATAAttrs          `json:"ata_smart_attributes"`
	ATADevStats     *rawDevStats          `json:"ata_device_statistics"`
	NVMeHealth      *rawNVMeLog           `json:"nvme_smart_health_information_log"`
	SCSIGrownDefect optInt                `json:"scsi_grown_defect_list"`
	SCSIPctUsed     optInt                `json:"scsi_percentage_used_endurance_indicator"`
	SCSIErrorLog    *rawSCSIErrs          `json:"scsi_error_counter_log"`
	SCSIEnvReports  map[string]rawEnvTemp `json:"scsi_environmental_reports"`
	SCSIStartStop   *rawSCSIStartStop     `json:"scsi_start_stop_cycle_counter"`

	// smartctl 7.5 normalises wear and spare across protocols.
	EnduranceUsed  *rawPercent `json:"endurance_used"`
	SpareAvailable *rawPercent `json:"spare_available"`

	// ATA SMART data (--capabilities): the self-test execution status.
	ATASmartData *rawATASmartData `json:"ata_smart_data"`

	// Self-test logs (--log=selftest), newest entry first.
	ATASelfTestLog  *rawATASelfTestLog  `json:"ata_smart_self_test_log"`
	NVMeSelfTestLog *rawNVMeSelfTestLog `json:"nvme_self_test_log"`
	SCSISelfTest0   *rawSCSISelfTest    `json:"scsi_self_test_0"`
}

type rawNamed struct {
	Value  optInt `json:"value"`
	String string `json:"string"`
}

type rawATASelfTestLog struct {
	Standard *struct {
		Table []struct {
			Type          rawNamed `json:"type"`
			Status        rawNamed `json:"status"`
			LifetimeHours optInt   `json:"lifetime_hours"`
			LBA           optInt   `json:"lba"`
		} `json:"table"`
	} `json:"standard"`
}

// rawATASmartData is the part of ATA's SMART READ DATA that smartctl -c
// prints: the self-test execution status byte and the drive's own
// estimate of each test's duration.
type rawATASmartData struct {
	SelfTest *struct {
		Status *struct {
			Value optInt `json:"value"`
			// smartctl prints it only while a test runs: the status byte's
			// low nibble × 10.
			RemainingPercent optInt `json:"remaining_percent"`
		} `json:"status"`
		PollingMinutes *struct {
			Short    optInt `json:"short"`
			Extended optInt `json:"extended"`
		} `json:"polling_minutes"`
	} `json:"self_test"`
}

type rawNVMeSelfTestLog struct {
	// The log page's header: the operation in progress (0: none) and, only
	// while one runs, how much of it is done.
	CurrentOperation  *rawNamed `json:"current_self_test_operation"`
	CompletionPercent optInt    `json:"current_self_test_completion_percent"`
	Table             []struct {
		Code         rawNamed `json:"self_test_code"`
		Result       rawNamed `json:"self_test_result"`
		PowerOnHours optInt   `json:"power_on_hours"`
		LBA          optInt   `json:"lba"`
	} `json:"table"`
}

type rawSCSISelfTest struct {
	Code        rawNamed    `json:"code"`
	Result      rawNamed    `json:"result"`
	PowerOnTime *rawPowerOn `json:"power_on_time"`
	LBA         *struct {
		Value optInt `json:"value"`
	} `json:"lba_first_failure"`
}

// rawSCSIStartStop is the SCSI Start-Stop Cycle Counter log page (0x0e):
// a SAS disk's power cycles are its accumulated start-stop cycles.
type rawSCSIStartStop struct {
	AccumulatedStartStopCycles optInt `json:"accumulated_start_stop_cycles"`
}

type rawSmartctl struct {
	Version    []int        `json:"version"`
	Argv       []string     `json:"argv"`
	Messages   []rawMessage `json:"messages"`
	ExitStatus optInt       `json:"exit_status"`
}

type rawMessage struct {
	String   string `json:"string"`
	Severity string `json:"severity"`
}

type rawDevice struct {
	Name     string `json:"name"`
	InfoName string `json:"info_name"`
	Type     string `json:"type"`
	Protocol string `json:"protocol"`
}

type rawWWN struct {
	NAA optInt `json:"naa"`
	OUI optInt `json:"oui"`
	ID  optInt `json:"id"`
}

type rawCap struct {
	Bytes optInt `json:"bytes"`
}

type rawStat struct {
	Passed optBool `json:"passed"`
}

type rawTemp struct {
	Current optInt `json:"current"`
	// The drive's own limits: NVMe's warning and critical composite
	// temperature thresholds (WCTEMP, CCTEMP), ATA SCT's recommended
	// operating maximum and absolute limit (smartctl -x / -l scttemp).
	OpLimitMax       optInt `json:"op_limit_max"`
	LimitMax         optInt `json:"limit_max"`
	CriticalLimitMax optInt `json:"critical_limit_max"`
	// DriveTrip is a SCSI disk's reference temperature (SPC-4 Temperature
	// log page, parameter 0001h): the highest it operates at continuously
	// without harm; 255 (and smartctl's 0) mean none.
	DriveTrip optInt `json:"drive_trip"`
}

// rawPercent is smartctl 7.5's normalised {current_percent, threshold_percent}.
type rawPercent struct {
	Current   optInt `json:"current_percent"`
	Threshold optInt `json:"threshold_percent"`
}

type rawPowerOn struct {
	Hours   optInt `json:"hours"`
	Minutes optInt `json:"minutes"`
}

type rawATAAttrs struct {
	Table []rawATAAttr `json:"table"`
}

type rawATAAttr struct {
	ID         optInt  `json:"id"`
	Name       string  `json:"name"`
	Value      optInt  `json:"value"`
	Worst      optInt  `json:"worst"`
	Thresh     optInt  `json:"thresh"`
	WhenFailed string  `json:"when_failed"`
	Raw        *rawRaw `json:"raw"`
}

type rawRaw struct {
	Value  optInt `json:"value"`
	String string `json:"string"`
}

type rawDevStats struct {
	Pages []rawDevStatPage `json:"pages"`
}

type rawDevStatPage struct {
	Number int              `json:"number"`
	Table  []rawDevStatItem `json:"table"`
}

type rawDevStatItem struct {
	Offset int    `json:"offset"`
	Value  optInt `json:"value"`
	Flags  struct {
		Valid optBool `json:"valid"`
	} `json:"flags"`
}

type rawNVMeLog struct {
	CriticalWarning         optInt `json:"critical_warning"`
	Temperature             optInt `json:"temperature"`
	AvailableSpare          optInt `json:"available_spare"`
	AvailableSpareThreshold optInt `json:"available_spare_threshold"`
	PercentageUsed          optInt `json:"percentage_used"`
	PowerCycles             optInt `json:"power_cycles"`
	PowerOnHours            optInt `json:"power_on_hours"`
	MediaErrors             optInt `json:"media_errors"`
	DataUnitsRead           optInt `json:"data_units_read"`
	DataUnitsWritten        optInt `json:"data_units_written"`
	UnsafeShutdowns         optInt `json:"unsafe_shutdowns"`
	ErrorLogEntries         optInt `json:"num_err_log_entries"`
}

type rawSCSIErrs struct {
	Read   *rawSCSIErrCounters `json:"read"`
	Write  *rawSCSIErrCounters `json:"write"`
	Verify *rawSCSIErrCounters `json:"verify"`
}

type rawSCSIErrCounters struct {
	TotalCorrected   optInt `json:"total_errors_corrected"`
	TotalUncorrected optInt `json:"total_uncorrected_errors"`
}

type rawEnvTemp struct {
	Current optInt `json:"current"`
}

// optInt is an optional JSON integer. A value of another type (a string, an
// object) leaves it unset instead of failing the document or, as a *int64
// would, leaving a pointer to 0 behind.
type optInt struct {
	v  int64
	ok bool
	// huge marks a number beyond ±9.2e18, which no disk counter reaches:
	// num and the other readers turn it into ±Inf, which Health.check
	// refuses by name, rather than dropping it as if it were not there.
	huge bool
}

// present: the field holds a number (ok), possibly a huge one.
func (o optInt) present() bool { return o.ok || o.huge }

func (o *optInt) UnmarshalJSON(b []byte) error {
	if v, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		*o = optInt{v: v, ok: true}
		return nil
	}
	// smartctl prints integers, but a float (1.5e+3) is still a number.
	f, err := strconv.ParseFloat(string(b), 64)
	switch {
	case err == nil && f >= -9.2e18 && f <= 9.2e18:
		*o = optInt{v: int64(f), ok: true}
	case err == nil || errors.Is(err, strconv.ErrRange):
		*o = optInt{huge: true, v: int64(math.Copysign(1, f))}
	default:
		*o = optInt{}
	}
	return nil
}

// optBool is an optional JSON boolean; anything but true/false leaves it unset.
type optBool struct {
	v, ok bool
}

func (o *optBool) UnmarshalJSON(b []byte) error {
	switch {
	case bytes.Equal(b, []byte("true")):
		*o = optBool{v: true, ok: true}
	case bytes.Equal(b, []byte("false")):
		*o = optBool{v: false, ok: true}
	default:
		*o = optBool{}
	}
	return nil
}
