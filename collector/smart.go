package collector

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/smart"
)

// smartCollector exposes SMART health. smartctl runs in Run on the runner's own
// schedule; Update only turns the runner's last results into const metrics,
// so a hung disk can never hold up a scrape.
type smartCollector struct {
	runner *smart.Runner

	mu sync.Mutex
	// cache holds each device's const metrics, rebuilt only when the runner
	// has a new result: a scrape re-sends immutable metrics and allocates
	// next to nothing however many disks and attributes there are.
	cache map[string]smartCached
}

type smartCached struct {
	gen     uint64
	metrics []prometheus.Metric
}

func newSmartCollector(o Options) (Collector, error) {
	c := o.Config.Smart
	devices := make([]smart.Device, 0, len(c.Devices))
	for _, d := range c.Devices {
		devices = append(devices, smart.Device{Name: d.Name, Type: d.Type})
	}
	return &smartCollector{cache: map[string]smartCached{}, runner: smart.NewRunner(smart.RunnerConfig{
		Smartctl:       c.Smartctl,
		Interval:       c.Interval,
		Timeout:        c.Timeout,
		Concurrency:    c.Concurrency,
		Scan:           c.Scan,
		RescanInterval: c.RescanInterval,
		VanishedAfter:  c.VanishedAfter,
		NoCheck:        c.NoCheck,
		SelfTests:      selfTestConfig(&c.SelfTests),
		Devices:        devices,
		Paths:          o.Paths,
		Logger:         o.Logger,
	})}, nil
}

// selfTestConfig maps the config's per-protocol sections (ata, nvme, scsi)
// onto the protocols smartctl reports.
func selfTestConfig(c *config.SelfTests) smart.SelfTestConfig {
	short, long := c.Intervals("")
	out := smart.SelfTestConfig{
		Enabled:         c.Enabled,
		Default:         [2]time.Duration{short, long},
		ByProtocol:      map[string][2]time.Duration{},
		StartHour:       c.StartHour,
		Window:          c.Window,
		MaxStandbySkips: c.MaxStandbySkips,
	}
	for class, protocol := range map[string]string{"ata": smart.ProtocolATA, "nvme": smart.ProtocolNVMe, "scsi": smart.ProtocolSCSI} {
		short, long := c.Intervals(class)
		out.ByProtocol[protocol] = [2]time.Duration{short, long}
	}
	return out
}

func (p *smartCollector) Run(ctx context.Context) { p.runner.Run(ctx) }

func (p *smartCollector) Update(ch chan<- prometheus.Metric) error {
	p.emit(ch, p.runner.Status())
	return nil
}

// emit sends the series of a runner status, rebuilding a device's only
// when its state changed since the last scrape.
func (p *smartCollector) emit(ch chan<- prometheus.Metric, s smart.Status) {
	p.mu.Lock()
	defer p.mu.Unlock()
	emitSmartRunner(ch, s)
	seen := make(map[string]bool, len(s.Devices))
	for i := range s.Devices {
		d := &s.Devices[i]
		if seen[d.Label] {
			continue // the runner never hands out a label twice; if it did, one device beats a failed scrape
		}
		seen[d.Label] = true
		c, ok := p.cache[d.Label]
		if !ok || c.gen != d.Generation {
			c = smartCached{gen: d.Generation, metrics: appendSmartDevice(c.metrics[:0], d)}
			p.cache[d.Label] = c
		}
		for _, m := range c.metrics {
			ch <- m
		}
	}
	// A vanished device's series go with it.
	for label := range p.cache {
		if !seen[label] {
			delete(p.cache, label)
		}
	}
}

func smartDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(namespace+"_"+name, help, append([]string{"device"}, labels...), nil)
}

// The SMART descriptors, built once. `device` is the kernel name (sda,
// nvme0n1) so the series join diskstats and node_exporter.
var (
	smartctlAvailableDesc = prometheus.NewDesc(namespace+"_smartctl_available",
		"Whether the smartctl binary was found (0: no SMART metrics; install smartmontools).", nil, nil)
	smartScanSuccessDesc = prometheus.NewDesc(namespace+"_smart_scan_success",
		"Whether the last smartctl --scan-open discovery succeeded.", nil, nil)
	smartScanDroppedDesc = prometheus.NewDesc(namespace+"_smart_scan_dropped_devices",
		"Devices the last smartctl --scan-open listed that are not read, because diskcanary reads at most "+strconv.Itoa(config.MaxSmartDevices)+" (0: every device is read).", nil, nil)
	smartInfoDesc = smartDesc("smart_device_info", "Identity of a SMART device; always 1.",
		"protocol", "type", "model", "serial", "firmware", "wwn")
	smartHealthyDesc = smartDesc("smart_healthy",
		"SMART overall health self-assessment (1 passed, 0 failed; NVMe fails on any critical warning).")
	smartTempDesc        = smartDesc("smart_temperature_celsius", "Current drive temperature.")
	smartPowerOnDesc     = smartDesc("smart_power_on_seconds_total", "Power-on time.")
	smartPowerCyclesDesc = smartDesc("smart_power_cycles_total", "Power cycles (ATA, NVMe; SCSI accumulated start-stop cycles).")
	smartWearDesc        = smartDesc("smart_wear_used_ratio",
		"Share of rated endurance used (NVMe percentage used, SCSI endurance indicator, ATA device statistics or life attributes); may exceed 1.")
	smartMediaErrorsDesc = smartDesc("smart_media_errors_total",
		"Unrecovered media errors (NVMe media errors, SCSI total uncorrected, ATA 187/devstat/198).")
	smartReallocDesc = smartDesc("smart_reallocated_sectors",
		"Reallocated sectors (ATA attribute 5) or SCSI grown defect list entries.")
	smartPendingDesc     = smartDesc("smart_pending_sectors", "Sectors pending reallocation (ATA attribute 197).")
	smartSpareDesc       = smartDesc("smart_available_spare_ratio", "NVMe available spare.")
	smartSpareThreshDesc = smartDesc("smart_available_spare_threshold_ratio", "NVMe available spare threshold.")
	smartCritWarnDesc    = smartDesc("smart_critical_warning", "NVMe critical-warning flags (1 set).", "flag")
	smartAttrValueDesc   = smartDesc("smart_attribute_value", "ATA SMART attribute normalised value.", "id", "name")
	smartAttrWorstDesc   = smartDesc("smart_attribute_worst", "ATA SMART attribute worst normalised value.", "id", "name")
	smartAttrThreshDesc  = smartDesc("smart_attribute_threshold", "ATA SMART attribute failure threshold.", "id", "name")
	smartAttrRawDesc     = smartDesc("smart_attribute_raw", "ATA SMART attribute raw value (48-bit, vendor-encoded).", "id", "name")
	smartTempMaxOpDesc   = smartDesc("smart_temperature_max_operating_celsius",
		"The drive's own highest recommended operating temperature (NVMe warning composite threshold, ATA SCT recommended maximum, SCSI reference temperature).")
	smartTempCritDesc = smartDesc("smart_temperature_critical_celsius",
		"The drive's own critical temperature (NVMe critical composite threshold, ATA SCT absolute limit).")
	smartCmdTimeoutsDesc = smartDesc("smart_command_timeouts_total",
		"ATA attribute 188 Command_Timeout, the leading count of its raw value (a Backblaze failure predictor).")
	smartOfflineUncDesc = smartDesc("smart_offline_uncorrectable_sectors",
		"ATA attribute 198 Offline_Uncorrectable: sectors the drive's own scans could not read (a Backblaze failure predictor).")
	smartReadBytesDesc       = smartDesc("smart_read_bytes_total", "Bytes the host read, as the NVMe drive counts them (data units read × 512,000).")
	smartWrittenBytesDesc    = smartDesc("smart_written_bytes_total", "Bytes the host wrote, as the NVMe drive counts them (data units written × 512,000).")
	smartUnsafeShutdownsDesc = smartDesc("smart_unsafe_shutdowns_total", "NVMe unsafe shutdowns (power lost without a shutdown notification).")
	smartErrLogDesc          = smartDesc("smart_error_log_entries_total", "NVMe error information log entries over the controller's life.")
	smartSCSIErrorsDesc      = smartDesc("smart_scsi_errors_total",
		"SCSI error counter log totals by op (read, write, verify) and kind (corrected, uncorrected).", "op", "kind")
	smartSelfTestDesc = smartDesc("smart_selftest_last_result",
		"The newest entry of the drive's self-test log: 1 for its result (passed, failed, aborted, in_progress), 0 for the others; type is the test as smartctl names it.", "type", "result")
	smartSelfTestAgeDesc = smartDesc("smart_selftest_last_age_seconds",
		"Power-on time since the newest self-test in the log ran (the log counts power-on hours, not wall time).")
	smartSelfTestLBADesc = smartDesc("smart_selftest_failed_lba",
		"First failing LBA of the newest failed self-test in the log that reports one.")
	smartSelfTestInProgressDesc = smartDesc("smart_selftest_in_progress",
		"1 while the drive reports a self-test running (ATA self-test execution status, NVMe current operation, SCSI self-test log), whoever started it.")
	smartSelfTestRemainingDesc = smartDesc("smart_selftest_remaining_ratio",
		"Share of the running self-test still to do, where the drive reports it (ATA in tenths, NVMe in percent).")
	smartSelfTestStartsDesc = smartDesc("smart_selftest_starts_total",
		"Scheduled self-tests diskcanary started on the drive, by type (short, long).", "type")
	smartSelfTestSkipsDesc = smartDesc("smart_selftest_skips_total",
		"Due self-tests not started, by type and reason: standby (the disk slept; after smart.self_tests.max_standby_skips in a row it is woken), in_progress (a test already runs on it), controller_busy (a disk behind its controller is testing), start_failed (smartctl did not start it).", "type", "reason")
	smartSelfTestLastStartDesc = smartDesc("smart_selftest_last_start_timestamp_seconds",
		"When diskcanary last started a self-test of this type on the drive.", "type")
	smartControllerInfoDesc = smartDesc("smart_controller_info",
		"The controller a device's scheduled self-tests are staggered with (pci:ADDRESS, scsi:hostN, port:/dev/NODE for RAID ports, disk:NAME when none was found); always 1.", "controller")
	smartExitDesc    = smartDesc("smartctl_exit_status", "Exit status of the last smartctl run (a bitmask, see smartctl(8)); -1 if it did not finish.")
	smartExitBitDesc = smartDesc("smartctl_exit_status_bit", "One bit of the last smartctl exit status, by name.", "bit")
	smartSuccessDesc = smartDesc("smart_collect_success",
		"Whether the last smartctl run read the device (or found it asleep and left it so).")
	smartLastSuccessDesc = smartDesc("smart_last_success_timestamp_seconds", "When SMART data was last read from the device.")
	smartTimeoutsDesc    = smartDesc("smartctl_timeouts_total", "smartctl runs killed at the timeout.")
	smartStandbyDesc     = smartDesc("smart_standby",
		"1 when the last run found the disk in a low-power mode and left it asleep (--nocheck); its values are from the last read.")
	smartQuarantinedDesc = smartDesc("smart_quarantined",
		"1 while the device is backed off because smartctl hung on it.")
	smartMissingCapDesc = smartDesc("smart_missing_capability",
		"1 when smartctl failed for lack of this capability (CAP_SYS_RAWIO for ATA/SCSI, CAP_SYS_ADMIN for NVMe).", "capability")
)

// emitSmartRunner sends the runner's own series.
func emitSmartRunner(ch chan<- prometheus.Metric, s smart.Status) {
	ch <- prometheus.MustNewConstMetric(smartctlAvailableDesc, prometheus.GaugeValue, smartBool(s.SmartctlFound))
	if s.SmartctlFound {
		ch <- prometheus.MustNewConstMetric(smartScanSuccessDesc, prometheus.GaugeValue, smartBool(s.ScanSuccess))
		ch <- prometheus.MustNewConstMetric(smartScanDroppedDesc, prometheus.GaugeValue, float64(s.ScanDropped))
	}
}

// appendSmartDevice builds one device's series. Values the device did not
// report are left out, never sent as 0.
func appendSmartDevice(ms []prometheus.Metric, d *smart.DeviceState) []prometheus.Metric {
	dev := d.Label
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ms = append(ms, prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, append([]string{dev}, labels...)...))
	}
	counter := func(desc *prometheus.Desc, v float64) {
		ms = append(ms, prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, dev))
	}
	opt := func(desc *prometheus.Desc, v *float64, kind prometheus.ValueType) {
		if v != nil {
			ms = append(ms, prometheus.MustNewConstMetric(desc, kind, *v, dev))
		}
	}

	gauge(smartExitDesc, float64(d.ExitStatus))
	if d.ExitStatus >= 0 {
		for bit, name := range smart.ExitBitNames {
			gauge(smartExitBitDesc, float64(int(d.ExitStatus)>>bit&1), name)
		}
	}
	gauge(smartSuccessDesc, smartBool(d.Success))
	if !d.LastSuccess.IsZero() {
		gauge(smartLastSuccessDesc, float64(d.LastSuccess.UnixNano())/1e9)
	}
	counter(smartTimeoutsDesc, float64(d.Timeouts))
	gauge(smartStandbyDesc, smartBool(d.Standby))
	gauge(smartQuarantinedDesc, smartBool(d.Quarantined))
	if d.MissingCapability != "" {
		gauge(smartMissingCapDesc, 1, d.MissingCapability)
	}

	if d.SelfTestsEnabled {
		gauge(smartControllerInfoDesc, 1, d.Controller)
		for k, kind := range smart.SelfTestKinds {
			ms = append(ms, prometheus.MustNewConstMetric(smartSelfTestStartsDesc, prometheus.CounterValue, float64(d.SelfTestStarts[k]), dev, kind))
			for reason, name := range smart.SelfTestSkipReasons {
				ms = append(ms, prometheus.MustNewConstMetric(smartSelfTestSkipsDesc, prometheus.CounterValue, float64(d.SelfTestSkips[k][reason]), dev, kind, name))
			}
			if t := d.SelfTestLastStart[k]; !t.IsZero() {
				gauge(smartSelfTestLastStartDesc, float64(t.UnixNano())/1e9, kind)
			}
		}
	}

	r := d.Result
	if r == nil {
		return ms
	}
	// type is what smartctl ended up using (sat, nvme, sat+megaraid,1),
	// which autodetection fills in when no -d was given.
	typ := r.Type
	if typ == "" {
		typ = d.Device.Type
	}
	gauge(smartInfoDesc, 1, r.Protocol, typ, r.Model, r.Serial, r.Firmware, r.WWN)
	h := &r.Health
	if h.Healthy != nil {
		gauge(smartHealthyDesc, smartBool(*h.Healthy))
	}
	opt(smartTempDesc, h.TemperatureCelsius, prometheus.GaugeValue)
	opt(smartPowerOnDesc, h.PowerOnSeconds, prometheus.CounterValue)
	opt(smartPowerCyclesDesc, h.PowerCycles, prometheus.CounterValue)
	opt(smartWearDesc, h.WearUsedRatio, prometheus.GaugeValue)
	opt(smartMediaErrorsDesc, h.MediaErrors, prometheus.CounterValue)
	opt(smartReallocDesc, h.ReallocatedSectors, prometheus.GaugeValue)
	opt(smartPendingDesc, h.PendingSectors, prometheus.GaugeValue)
	opt(smartSpareDesc, h.AvailableSpareRatio, prometheus.GaugeValue)
	opt(smartSpareThreshDesc, h.AvailableSpareThresholdRatio, prometheus.GaugeValue)
	if h.CriticalWarning != nil {
		for bit, flag := range smart.CriticalWarningFlags {
			gauge(smartCritWarnDesc, float64(*h.CriticalWarning>>bit&1), flag)
		}
	}
	opt(smartTempMaxOpDesc, h.TemperatureMaxOperatingCelsius, prometheus.GaugeValue)
	opt(smartTempCritDesc, h.TemperatureCriticalCelsius, prometheus.GaugeValue)
	opt(smartCmdTimeoutsDesc, h.CommandTimeouts, prometheus.CounterValue)
	opt(smartOfflineUncDesc, h.OfflineUncorrectable, prometheus.GaugeValue)
	opt(smartReadBytesDesc, h.ReadBytes, prometheus.CounterValue)
	opt(smartWrittenBytesDesc, h.WrittenBytes, prometheus.CounterValue)
	opt(smartUnsafeShutdownsDesc, h.UnsafeShutdowns, prometheus.CounterValue)
	opt(smartErrLogDesc, h.ErrorLogEntries, prometheus.CounterValue)
	for k, v := range h.SCSIErrors {
		ms = append(ms, prometheus.MustNewConstMetric(smartSCSIErrorsDesc, prometheus.CounterValue, v, dev, k[0], k[1]))
	}
	if st := r.SelfTest; st != nil {
		for _, res := range smart.SelfTestResults {
			gauge(smartSelfTestDesc, smartBool(res == st.Result), st.Type, res)
		}
		opt(smartSelfTestAgeDesc, st.AgeSeconds, prometheus.GaugeValue)
		opt(smartSelfTestLBADesc, st.FailedLBA, prometheus.GaugeValue)
	}
	// A disk found asleep runs no test, whatever its last read said.
	if p := &r.Testing; p.Reported {
		running := p.InProgress && !d.Standby
		gauge(smartSelfTestInProgressDesc, smartBool(running))
		if running {
			opt(smartSelfTestRemainingDesc, p.RemainingRatio, prometheus.GaugeValue)
		}
	}
	for i := range r.Attributes {
		a := &r.Attributes[i]
		id := strconv.Itoa(a.ID)
		for _, m := range [...]struct {
			desc *prometheus.Desc
			v    *float64
		}{{smartAttrValueDesc, a.Value}, {smartAttrWorstDesc, a.Worst}, {smartAttrThreshDesc, a.Threshold}, {smartAttrRawDesc, a.Raw}} {
			if m.v != nil {
				gauge(m.desc, *m.v, id, a.Name)
			}
		}
	}
	return ms
}

func smartBool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
