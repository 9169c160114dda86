package rulegen

import (
	"fmt"
	"regexp"
	"strings"
)

// The shipped scrape configurations drop, at the scrape, the exporter's
// series no alert, rule, dashboard panel or variable reads: every stored
// series costs a fleet's Prometheus memory and ingestion on every node.
// They stay on each node's /metrics, which the runbooks read with
// dc_metrics. TestScrapeDropsAreUnread proves no expression reads a
// dropped series; the live-metrics test, that every family the exporter
// serves is either read or dropped here.

// ScrapeDrop is one metric_relabel_configs drop: series whose source
// labels, joined with ";", match Regex.
type ScrapeDrop struct {
	SourceLabels []string
	Regex        string
	Why          string
}

// ScrapeDrops are the drops, each with the reason nobody reads it.
var ScrapeDrops = []ScrapeDrop{
	{[]string{"__name__"}, `go_.+|process_.+`,
		"the Go runtime's and the process's own figures: no panel shows the exporter's memory or CPU (the bench measures them)"},
	{[]string{"__name__"}, `diskcanary_(fdatasync|read|write|disk_request)_duration_seconds_sum|diskcanary_(write|disk_request)_duration_seconds_count`,
		"histogram sums, and counts no sample floor reads: the rules and panels read buckets and the probes' fdatasync and read counts"},
	{[]string{"__name__", "op"}, `diskcanary_disk_request_duration_seconds_bucket;discard`,
		"discard requests' latency: no probe's latency is made of discards (attribution reads flush, write and read)"},
	{[]string{"__name__"}, `diskcanary_disk_(reads|writes|discards)_merged_total|diskcanary_disk_(discards_completed|discarded_bytes|discard_time_seconds)_total|diskcanary_disk_io_now`,
		"iostat's merge, discard and in-flight columns: diskcanary iostat reads them from the node, no panel does"},
	{[]string{"__name__"}, `diskcanary_collector_duration_seconds|diskcanary_blocklatency_(available|dropped_requests_total)|diskcanary_contention_(cgroups|last_pass_timestamp_seconds|malformed_lines_total|pass_duration_seconds|source_info|truncated_passes_total|vanished_cgroups_total)`,
		"the collectors' own diagnostics, for a person on the node"},
	{[]string{"__name__"}, `diskcanary_smartctl_(available|exit_status|exit_status_bit)|diskcanary_smart_(scan_success|scan_dropped_devices|selftest_in_progress|temperature_critical_celsius|power_on_seconds_total|power_cycles_total|unsafe_shutdowns_total|read_bytes_total|written_bytes_total|error_log_entries_total|selftest_failed_lba|selftest_last_age_seconds)|diskcanary_smart_attribute_(raw|value|worst|threshold)`,
		"SMART attributes and smartctl diagnostics no alert or panel reads: the health alerts read the named figures (reallocated, pending, wear...), not the ATA attribute table"},
	{[]string{"__name__"}, `diskcanary_pressure_(available|io_waiting_seconds_total|io_stalled_seconds_total)|diskcanary_hung_tasks_total|diskcanary_kernel_log_(records|suppressed)_total|diskcanary_filesystem_(first|last)_error_timestamp_seconds|diskcanary_probe_(inflight_seconds|read_bytes_total)`,
		"node diagnostics no alert or panel reads (the etcd verdict reads CPU pressure only; the errors alerts the error counters)"},
}

// dropped says whether a series of name with labels (name → value) is
// dropped by ScrapeDrops, as Prometheus would: the source labels' values
// joined with ";", the regex anchored.
func dropped(name string, labels map[string]string) bool {
	for _, d := range ScrapeDrops {
		var vals []string
		for _, l := range d.SourceLabels {
			if l == "__name__" {
				vals = append(vals, name)
			} else {
				vals = append(vals, labels[l])
			}
		}
		if regexp.MustCompile("^(?:" + d.Regex + ")$").MatchString(strings.Join(vals, ";")) {
			return true
		}
	}
	return false
}

// MetricRelabelConfigs renders ScrapeDrops as a plain Prometheus
// scrape_config's metric_relabel_configs, indented by indent spaces.
func MetricRelabelConfigs(indent int) string {
	return strings.Repeat(" ", indent) + "metric_relabel_configs:\n" + relabelList(indent+2, "source_labels")
}

// MetricRelabelings renders ScrapeDrops as the items of a Prometheus
// Operator endpoint's metricRelabelings, indented by indent spaces.
func MetricRelabelings(indent int) string {
	return relabelList(indent, "sourceLabels")
}

func relabelList(indent int, sourceKey string) string {
	pad := strings.Repeat(" ", indent)
	var b strings.Builder
	for _, d := range ScrapeDrops {
		fmt.Fprintf(&b, "%s# %s\n", pad, d.Why)
		fmt.Fprintf(&b, "%s- %s: [%s]\n", pad, sourceKey, strings.Join(d.SourceLabels, ", "))
		fmt.Fprintf(&b, "%s  regex: '%s'\n", pad, d.Regex)
		fmt.Fprintf(&b, "%s  action: drop\n", pad)
	}
	return b.String()
}

// ScrapeConfigPath is a plain Prometheus scrape_config for diskcanary with
// the drops: what prometheus.yml's scrape_configs take, and what the fleet
// bench scrapes with.
const ScrapeConfigPath = "deploy/prometheus/diskcanary-scrape.yml"

// ChartRelabelingsPath is the drops as the chart's ServiceMonitor takes
// them (serviceMonitor.dropUnread).
const ChartRelabelingsPath = ChartFilesDir + "/metric-relabelings.yaml"

func scrapeConfig() []byte {
	return []byte(header + `# diskcanary's scrape job for a plain prometheus.yml (scrape_configs), with
# the series no alert, rule or dashboard reads dropped at the scrape. Replace
# the targets with your service discovery; the Operator's ServiceMonitor
# and PodMonitor (deploy/kubernetes, the Helm chart) carry the same drops.
scrape_configs:
  - job_name: diskcanary
    scrape_interval: 30s
    scrape_timeout: 10s
    static_configs:
      - targets: ['localhost:9742']
` + MetricRelabelConfigs(4))
}
