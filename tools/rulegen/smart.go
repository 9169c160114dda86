package rulegen

import (
	"fmt"
	"time"
)

// SMART: the alerts on what a drive says of its own health, the wear-out
// forecast, and their promtool cases.

// ruleWearForecast is the wear-out forecast in days, per device.
const ruleWearForecast = "device:diskcanary_smart_wear_used_ratio:days_to_worn_out"

// wearForecast is the days until diskcanary_smart_wear_used_ratio reaches
// 1 at its rate over WearForecastWindow: the remaining share over the
// window's increase, times the window. Only a drive that wore during the
// window has one (wear in whole percent moves in steps; a window of a
// month smooths them).
func (p Params) wearForecast() string {
	w := promDuration(p.WearForecastWindow)
	return fmt.Sprintf("(1 - diskcanary_smart_wear_used_ratio)\n/ ((diskcanary_smart_wear_used_ratio - diskcanary_smart_wear_used_ratio offset %s) > 0)\n* %s",
		w, num(p.WearForecastWindow.Hours()/24))
}

func smartRecording(p Params) Group {
	return Group{Name: "diskcanary.smart.recording", Rules: []Rule{{Record: ruleWearForecast, Expr: p.wearForecast()}}}
}

func smartAlerts(p Params) Group {
	g := Group{Name: "diskcanary.smart.alerts"}
	w := promDuration(p.SmartGrowthWindow)
	on := "{{ $labels.device }} on {{ $labels.instance }}"
	grow := func(name, metric, what string) Rule {
		// Growth of a gauge: now above its lowest value in the window
		// (a shrinking count, e.g. pending sectors remapped, never alerts).
		return p.alert(name, "warning",
			fmt.Sprintf("%s > min_over_time(%s[%s])", metric, metric, w), 0,
			what+" growing",
			what+" of "+on+" grew in the last "+w+", to {{ $value | printf \"%.0f\" }}.")
	}
	g.Rules = append(g.Rules,
		p.alert("DiskcanarySmartUnhealthy", "critical",
			"diskcanary_smart_healthy == 0", 0,
			"SMART overall health says the disk is failing",
			"The SMART overall-health self-assessment of "+on+" failed."),
		p.alert("DiskcanarySmartMediaErrors", "warning",
			fmt.Sprintf("increase(diskcanary_smart_media_errors_total[%s]) > 0", w), 0,
			"media errors growing",
			on+" logged {{ $value | printf \"%.0f\" }} new media errors in the last "+w+"."),
		p.alert("DiskcanarySmartSelfTestFailed", "warning",
			`diskcanary_smart_selftest_last_result{result="failed"} == 1`, 0,
			"the disk failed its last self-test",
			"The newest self-test in the log of "+on+" ({{ $labels.type }}) failed: the drive found a fault in its own media or electronics. diskcanary_smart_selftest_failed_lba has the first failing LBA where the drive reports one."),
		grow("DiskcanarySmartReallocatedSectors", "diskcanary_smart_reallocated_sectors", "Reallocated sectors"),
		grow("DiskcanarySmartPendingSectors", "diskcanary_smart_pending_sectors", "Pending (unreadable) sectors"),
		grow("DiskcanarySmartOfflineUncorrectable", "diskcanary_smart_offline_uncorrectable_sectors", "Offline uncorrectable sectors"),
		// Attribute 188, one of Backblaze's failure predictors: commands
		// the drive did not complete in time, counted by the drive itself.
		p.alert("DiskcanarySmartCommandTimeouts", "warning",
			fmt.Sprintf("increase(diskcanary_smart_command_timeouts_total[%s]) > 0", w), 0,
			"the drive counts command timeouts",
			on+" counted {{ $value | printf \"%.0f\" }} command timeouts of its own (attribute 188) in the last "+w+": commands it did not complete in time stall I/O."),
		p.alert("DiskcanarySmartCriticalWarning", "critical",
			"diskcanary_smart_critical_warning > 0", 0,
			"NVMe critical warning {{ $labels.flag }}",
			"The NVMe controller of "+on+" raised critical warning {{ $labels.flag }}."),
		p.alert("DiskcanarySmartSpareLow", "critical",
			"diskcanary_smart_available_spare_ratio < diskcanary_smart_available_spare_threshold_ratio", 0,
			"available spare below the vendor threshold",
			"The available spare of "+on+" is {{ $value | humanizePercentage }}, below the threshold its vendor set{{ with printf \"diskcanary_smart_available_spare_threshold_ratio{instance=%q,device=%q}\" $labels.instance $labels.device | query }} ({{ . | first | value | humanizePercentage }}){{ end }}."),
		p.alert("DiskcanarySmartWearHigh", "warning",
			fmt.Sprintf("diskcanary_smart_wear_used_ratio > %s", num(p.WearWarning)), 0,
			fmt.Sprintf("SSD wear above %g %%", p.WearWarning*100),
			fmt.Sprintf("%s has used %s of its rated endurance, more than %g %%.", on, valuePercent, p.WearWarning*100)),
		p.alert("DiskcanarySmartWearCritical", "critical",
			fmt.Sprintf("diskcanary_smart_wear_used_ratio > %s", num(p.WearCritical)), 0,
			fmt.Sprintf("SSD wear above %g %%", p.WearCritical*100),
			fmt.Sprintf("%s has used %s of its rated endurance, more than %g %%: plan the replacement now.", on, valuePercent, p.WearCritical*100)),
		p.alert("DiskcanarySmartWearOutSoon", "warning",
			p.wearForecast()+fmt.Sprintf(" < %s", num(p.WearForecastDays)), time.Hour,
			"SSD reaches its rated endurance within "+fmt.Sprintf("%g", p.WearForecastDays/7)+" weeks",
			fmt.Sprintf(`At its wear rate of the last %g days, %s reaches its rated endurance (100 %% used) in {{ $value | printf "%%.0f" }} days: order the replacement.`, p.WearForecastWindow.Hours()/24, on)),
		// The drive's own operating limit where it states one (NVMe
		// WCTEMP, ATA SCT): one fixed number is too lax for many HDDs and
		// too strict for NVMe drives rated to 70-85 °C.
		p.alert("DiskcanarySmartTemperatureHigh", "warning",
			fmt.Sprintf("diskcanary_smart_temperature_celsius > on ("+p.deviceLabels()+") diskcanary_smart_temperature_max_operating_celsius\nor\n(diskcanary_smart_temperature_celsius > %s unless on ("+p.deviceLabels()+") diskcanary_smart_temperature_max_operating_celsius)", num(p.SmartTemperatureCelsius)), p.SmartTemperatureFor,
			"disk temperature above its operating limit",
			fmt.Sprintf(`%s is at {{ $value | printf "%%.0f" }} °C and has been above {{ with printf "diskcanary_smart_temperature_max_operating_celsius{instance=%%q,device=%%q}" $labels.instance $labels.device | query }}{{ . | first | value }} °C, its own operating limit,{{ else }}%g °C (it states no limit of its own){{ end }} for %s.`, on, p.SmartTemperatureCelsius, promDuration(p.SmartTemperatureFor))),
	)
	return p.linkDashboard(g, dashboardNode, "job", "instance", "disk=device")
}

func smartCases() []alertCase {
	const sda = `job="diskcanary", instance="n1:9742", device="sda"`
	const nvme = `job="diskcanary", instance="n1:9742", device="nvme0n1"`
	return []alertCase{
		{name: "SMART failed", input: s("diskcanary_smart_healthy{"+sda+"}", "0x5"), at: "3m", alert: "DiskcanarySmartUnhealthy", fire: []string{sda}},
		{name: "SMART passed", input: s("diskcanary_smart_healthy{"+sda+"}", "1x5"), at: "3m", alert: "DiskcanarySmartUnhealthy"},
		{name: "one new media error", input: s("diskcanary_smart_media_errors_total{"+nvme+"}", "0x30 1x30"), at: "40m", alert: "DiskcanarySmartMediaErrors", fire: []string{nvme}, values: []string{"1"}},
		{name: "old media errors, none new", input: s("diskcanary_smart_media_errors_total{"+nvme+"}", "3x60"), at: "40m", alert: "DiskcanarySmartMediaErrors"},
		{name: "new media error over an hour ago", input: s("diskcanary_smart_media_errors_total{"+nvme+"}", "0x10 1x100"), at: "100m", alert: "DiskcanarySmartMediaErrors"},
		{name: "the newest self-test failed", input: concat(
			s(`diskcanary_smart_selftest_last_result{`+sda+`, type="Extended offline", result="failed"}`, "1x5"),
			s(`diskcanary_smart_selftest_last_result{`+sda+`, type="Extended offline", result="passed"}`, "0x5")),
			at: "3m", alert: "DiskcanarySmartSelfTestFailed", fire: []string{sda + `, type="Extended offline", result="failed"`}},
		{name: "the newest self-test passed after an older failure: silent", input: concat(
			s(`diskcanary_smart_selftest_last_result{`+sda+`, type="Short offline", result="failed"}`, "0x5"),
			s(`diskcanary_smart_selftest_last_result{`+sda+`, type="Short offline", result="passed"}`, "1x5"),
			s(`diskcanary_smart_selftest_failed_lba{`+sda+`}`, "104870168x5")),
			at: "3m", alert: "DiskcanarySmartSelfTestFailed"},
		{name: "reallocated 8 → 10", input: s("diskcanary_smart_reallocated_sectors{"+sda+"}", "8x30 10x30"), at: "40m", alert: "DiskcanarySmartReallocatedSectors", fire: []string{sda}, values: []string{"10"}},
		{name: "reallocated steady at 10", input: s("diskcanary_smart_reallocated_sectors{"+sda+"}", "10x60"), at: "40m", alert: "DiskcanarySmartReallocatedSectors"},
		{name: "pending 0 → 2", input: s("diskcanary_smart_pending_sectors{"+sda+"}", "0x30 2x30"), at: "40m", alert: "DiskcanarySmartPendingSectors", fire: []string{sda}, values: []string{"2"}},
		{name: "pending 5 → 3 (remapped): silent", input: s("diskcanary_smart_pending_sectors{"+sda+"}", "5x30 3x30"), at: "40m", alert: "DiskcanarySmartPendingSectors"},
		{name: "offline uncorrectable 0 → 3", input: s("diskcanary_smart_offline_uncorrectable_sectors{"+sda+"}", "0x30 3x30"), at: "40m", alert: "DiskcanarySmartOfflineUncorrectable", fire: []string{sda}, values: []string{"3"}},
		{name: "offline uncorrectable steady at 1: silent", input: s("diskcanary_smart_offline_uncorrectable_sectors{"+sda+"}", "1x60"), at: "40m", alert: "DiskcanarySmartOfflineUncorrectable"},
		{name: "two command timeouts in the hour", input: s("diskcanary_smart_command_timeouts_total{"+sda+"}", "4x30 6x30"), at: "40m", alert: "DiskcanarySmartCommandTimeouts", fire: []string{sda}, values: []string{"2"}},
		{name: "command timeouts from long ago: silent", input: s("diskcanary_smart_command_timeouts_total{"+sda+"}", "4x100"), at: "90m", alert: "DiskcanarySmartCommandTimeouts"},
		{name: "NVMe spare flag", input: concat(s(`diskcanary_smart_critical_warning{`+nvme+`, flag="available_spare"}`, "1x5"), s(`diskcanary_smart_critical_warning{`+nvme+`, flag="temperature"}`, "0x5")),
			at: "3m", alert: "DiskcanarySmartCriticalWarning", fire: []string{nvme + `, flag="available_spare"`}},
		{name: "no NVMe flag", input: s(`diskcanary_smart_critical_warning{`+nvme+`, flag="temperature"}`, "0x5"), at: "3m", alert: "DiskcanarySmartCriticalWarning"},
		{name: "spare 5 % < threshold 10 %", input: concat(s("diskcanary_smart_available_spare_ratio{"+nvme+"}", "0.05x5"), s("diskcanary_smart_available_spare_threshold_ratio{"+nvme+"}", "0.1x5")),
			at: "3m", alert: "DiskcanarySmartSpareLow", fire: []string{nvme},
			description: "The available spare of nvme0n1 on n1:9742 is 5%, below the threshold its vendor set (10%)."},
		{name: "spare at threshold: silent", input: concat(s("diskcanary_smart_available_spare_ratio{"+nvme+"}", "0.1x5"), s("diskcanary_smart_available_spare_threshold_ratio{"+nvme+"}", "0.1x5")),
			at: "3m", alert: "DiskcanarySmartSpareLow"},
		{name: "wear 85 %: warning", input: s("diskcanary_smart_wear_used_ratio{"+nvme+"}", "0.85x5"), at: "3m", alert: "DiskcanarySmartWearHigh", fire: []string{nvme}, values: []string{"85%"}},
		{name: "wear 80 %: silent", input: s("diskcanary_smart_wear_used_ratio{"+nvme+"}", "0.8x5"), at: "3m", alert: "DiskcanarySmartWearHigh"},
		{name: "wear 95 %: critical", input: s("diskcanary_smart_wear_used_ratio{"+nvme+"}", "0.95x5"), at: "3m", alert: "DiskcanarySmartWearCritical", fire: []string{nvme}, values: []string{"95%"}},
		{name: "wear 85 %: not critical", input: s("diskcanary_smart_wear_used_ratio{"+nvme+"}", "0.85x5"), at: "3m", alert: "DiskcanarySmartWearCritical"},
		{name: "70 °C for 20 m, no limit of its own", input: s("diskcanary_smart_temperature_celsius{"+sda+"}", "70x30"), at: "20m", alert: "DiskcanarySmartTemperatureHigh", fire: []string{sda},
			values:      []string{"70"},
			description: "sda on n1:9742 is at 70 °C and has been above 65 °C (it states no limit of its own) for 15m."},
		{name: "NVMe at 80 °C, its own limit 100 °C: silent", input: concat(s("diskcanary_smart_temperature_celsius{"+nvme+"}", "80x30"), s("diskcanary_smart_temperature_max_operating_celsius{"+nvme+"}", "100x30")),
			at: "20m", alert: "DiskcanarySmartTemperatureHigh"},
		{name: "SSD at 72 °C over its own limit of 70 °C", input: concat(s("diskcanary_smart_temperature_celsius{"+sda+"}", "72x30"), s("diskcanary_smart_temperature_max_operating_celsius{"+sda+"}", "70x30")),
			values: []string{"72"},
			at:     "20m", alert: "DiskcanarySmartTemperatureHigh", fire: []string{sda},
			description: "sda on n1:9742 is at 72 °C and has been above 70 °C, its own operating limit, for 15m."},
		{name: "65 °C: silent", input: s("diskcanary_smart_temperature_celsius{"+sda+"}", "65x30"), at: "20m", alert: "DiskcanarySmartTemperatureHigh"},
		{name: "70 °C with a dip 9 m ago: not yet", input: s("diskcanary_smart_temperature_celsius{"+sda+"}", "70x10 60 70x20"), at: "20m", alert: "DiskcanarySmartTemperatureHigh"},
	}
}

// wearForecastCases: wear in whole percent, hourly, over 31 days; one
// promtool test, three devices (promtool evaluates every rule hourly from
// zero for each test: a month of history once, not three times). Before
// the wear moves, nothing fires.
func wearForecastCases() []alertCase {
	dev := func(d string) string { return `job="diskcanary", instance="n1:9742", device="` + d + `"` }
	wear := func(d, values string) series {
		return series{"diskcanary_smart_wear_used_ratio{" + dev(d) + "}", values}
	}
	return []alertCase{
		{name: "80 → 90 % in a month: worn out in 30 days; 50 → 51 %: silent; no wear: no forecast", at: "744h", interv: "1h",
			input: []series{
				// 80 % used a month ago, 90 % now: 10 points left at 10 a month.
				wear("nvme0n1", "0.8x360 0.9x400"),
				// 50 → 51 %: 49 points left at 1 a month, about four years.
				wear("nvme1n1", "0.5x360 0.51x400"),
				wear("nvme2n1", "0.95x760"),
			},
			alert: "DiskcanarySmartWearOutSoon", fire: []string{dev("nvme0n1")}, silentAt: []string{"300h"},
			description: "At its wear rate of the last 30 days, nvme0n1 on n1:9742 reaches its rated endurance (100 % used) in 30 days: order the replacement.",
			expr: []exprTest{near(ruleWearForecast+`{device="nvme0n1"}`, "744h", dev("nvme0n1"), 30),
				near(ruleWearForecast+`{device="nvme1n1"}`, "744h", dev("nvme1n1"), 1470),
				{Expr: ruleWearForecast + `{device="nvme2n1"}`, EvalTime: "744h"}}},
	}
}
