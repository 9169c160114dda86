package rulegen

import (
	"fmt"
	"time"
)

// Collection: the alerts that say diskcanary cannot see (SMART unreadable
// or stale, a collector failing, the kernel log unread, the exporter down),
// and their promtool cases.

func collectionAlerts(p Params) Group {
	g := Group{Name: "diskcanary.collection.alerts"}
	on := "{{ $labels.device }} on {{ $labels.instance }}"
	g.Rules = append(g.Rules,
		p.alert("DiskcanarySmartCollectionFailing", "warning",
			"diskcanary_smart_collect_success == 0", p.SmartFailingFor,
			"SMART cannot be read",
			"Reading SMART from "+on+" has failed for "+promDuration(p.SmartFailingFor)+" (smartctl exit status in diskcanary_smartctl_exit_status)."),
		p.alert("DiskcanarySmartStale", "warning",
			fmt.Sprintf("time() - diskcanary_smart_last_success_timestamp_seconds > %s\nunless on ("+p.deviceLabels()+")\ndiskcanary_smart_standby == 1", seconds(p.SmartStaleAfter)), 5*time.Minute,
			"SMART data is stale",
			"The last successful SMART read of "+on+" is "+valueDuration+" old (alerting after "+promDuration(p.SmartStaleAfter)+")."),
		p.alert("DiskcanarySmartctlTimeouts", "warning",
			fmt.Sprintf("increase(diskcanary_smartctl_timeouts_total[%s]) > 0", promDuration(p.SmartGrowthWindow)), 0,
			"smartctl is timing out",
			"smartctl timed out on "+on+" in the last "+promDuration(p.SmartGrowthWindow)+"; a device that hangs smartctl often hangs I/O too."),
		p.alert("DiskcanarySmartQuarantined", "warning",
			"diskcanary_smart_quarantined == 1", 0,
			"a device is quarantined from SMART reads",
			on+" is quarantined after repeated smartctl timeouts: its SMART data is not refreshed."),
		p.alert("DiskcanaryCollectorFailing", "warning",
			"diskcanary_collector_success == 0", p.CollectorFailingFor,
			"a diskcanary collector is failing",
			"The {{ $labels.collector }} collector of {{ $labels.instance }} has failed every scrape for "+promDuration(p.CollectorFailingFor)+"."),
		p.alert("DiskcanaryKernelLogUnread", "info",
			fmt.Sprintf("diskcanary_kernel_log_available == 0\nor\nincrease(diskcanary_kernel_log_lost_records_total[%s]) > 0", promDuration(p.ErrorWindow)), p.CollectorFailingFor,
			"kernel storage errors are not all counted",
			"diskcanary on {{ $labels.instance }} does not read the kernel log (diskcanary_kernel_log_unavailable_info says why: CAP_SYSLOG, /dev/kmsg) or lost records to a wrapping ring buffer: disk and filesystem error alerts may stay silent."),
		p.alert("DiskcanaryExporterDown", "warning",
			fmt.Sprintf("up{%s} == 0", p.JobSelector), p.ExporterDownFor,
			"diskcanary is down",
			"Prometheus cannot scrape diskcanary on {{ $labels.instance }}: nothing on this node's disks is measured."),
	)
	return p.linkDashboard(g, dashboardNode, "job", "instance", "disk=device")
}

func collectionCases() []alertCase {
	const sda = `job="diskcanary", instance="n1:9742", device="sda"`
	const inst = `job="diskcanary", instance="n1:9742"`
	return []alertCase{
		{name: "SMART read failing 35 m", input: s("diskcanary_smart_collect_success{"+sda+"}", "0x40"), at: "35m", alert: "DiskcanarySmartCollectionFailing", fire: []string{sda}},
		{name: "SMART read failing 14 m", input: s("diskcanary_smart_collect_success{"+sda+"}", "0x20 1 0x20"), at: "35m", alert: "DiskcanarySmartCollectionFailing"},
		{name: "SMART last success at t=0, now 70 m", input: s("diskcanary_smart_last_success_timestamp_seconds{"+sda+"}", "0x100"), at: "70m", alert: "DiskcanarySmartStale", fire: []string{sda}, values: []string{"1h 10m 0s"}},
		{name: "SMART stale but the disk sleeps", input: concat(s("diskcanary_smart_last_success_timestamp_seconds{"+sda+"}", "0x100"), s("diskcanary_smart_standby{"+sda+"}", "1x100")), at: "70m", alert: "DiskcanarySmartStale"},
		{name: "SMART fresh", input: s("diskcanary_smart_last_success_timestamp_seconds{"+sda+"}", "0+60x100"), at: "70m", alert: "DiskcanarySmartStale"},
		{name: "a smartctl timeout", input: s("diskcanary_smartctl_timeouts_total{"+sda+"}", "0x30 1x30"), at: "40m", alert: "DiskcanarySmartctlTimeouts", fire: []string{sda}},
		{name: "old smartctl timeouts", input: s("diskcanary_smartctl_timeouts_total{"+sda+"}", "2x60"), at: "40m", alert: "DiskcanarySmartctlTimeouts"},
		{name: "quarantined", input: s("diskcanary_smart_quarantined{"+sda+"}", "1x5"), at: "3m", alert: "DiskcanarySmartQuarantined", fire: []string{sda}},
		{name: "not quarantined", input: s("diskcanary_smart_quarantined{"+sda+"}", "0x5"), at: "3m", alert: "DiskcanarySmartQuarantined"},
		{name: "smart collector failing 20 m", input: s(`diskcanary_collector_success{`+inst+`, collector="smart"}`, "0x20"), at: "20m", alert: "DiskcanaryCollectorFailing", fire: []string{inst + `, collector="smart"`}},
		{name: "collector fine", input: s(`diskcanary_collector_success{`+inst+`, collector="smart"}`, "1x20"), at: "20m", alert: "DiskcanaryCollectorFailing"},
		{name: "no kernel log for 15 minutes", alert: "DiskcanaryKernelLogUnread", at: "20m",
			input: s(`diskcanary_kernel_log_available{`+inst+`}`, "0x30"),
			fire:  []string{inst}},
		{name: "kernel log read, nothing lost: silent", alert: "DiskcanaryKernelLogUnread", at: "20m",
			input: concat(s(`diskcanary_kernel_log_available{`+inst+`}`, "1x30"),
				s(`diskcanary_kernel_log_lost_records_total{`+inst+`, reason="overwritten"}`, "0x30"))},
		{name: "exporter down 8 m", input: s(`up{`+inst+`}`, "0x10"), at: "8m", alert: "DiskcanaryExporterDown", fire: []string{inst}},
		{name: "exporter up; another job down", input: concat(s(`up{`+inst+`}`, "1x10"), s(`up{job="node", instance="n1:9100"}`, "0x10")), at: "8m", alert: "DiskcanaryExporterDown"},
	}
}
