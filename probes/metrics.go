package probes

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/diskcanary/diskcanary/internal/buckets"
)

// Metrics are the probe series. They are stateful: probe goroutines observe
// into them and a scrape only reads them (lock-free for histograms).
type Metrics struct {
	fdatasync  *prometheus.HistogramVec
	write      *prometheus.HistogramVec
	read       *prometheus.HistogramVec
	success    *prometheus.GaugeVec
	lastRun    *prometheus.GaugeVec
	runs       *prometheus.CounterVec
	failures   *prometheus.CounterVec
	written    *prometheus.CounterVec
	readBytes  *prometheus.CounterVec
	targetInfo *prometheus.GaugeVec
	etcdDir    *prometheus.GaugeVec
	warning    *prometheus.GaugeVec
	stalled    *prometheus.Desc
	inflight   *prometheus.Desc

	capacityIOPS    *prometheus.GaugeVec
	capacityPartial *prometheus.GaugeVec
	capacitySuccess *prometheus.GaugeVec
	capacityLastRun *prometheus.GaugeVec
}

func latencyHistogram(name, help string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace:                       "diskcanary",
		Name:                            name,
		Help:                            help,
		Buckets:                         buckets.Latency,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: 0,
	}, []string{"probe", "path", "device"})
}

// NewMetrics builds the probe series.
func NewMetrics() *Metrics {
	probe := []string{"probe"}
	return &Metrics{
		fdatasync: latencyHistogram("fdatasync_duration_seconds",
			"Latency of the fdatasync after each sequential WAL-pattern write (what etcd_disk_wal_fsync_duration_seconds and fio's sync percentiles time)."),
		write: latencyHistogram("write_duration_seconds",
			"Latency of each WAL-pattern pwrite, timed apart from its fdatasync."),
		read: latencyHistogram("read_duration_seconds",
			"Latency of each O_DIRECT random read."),
		success: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "diskcanary", Name: "probe_success",
			Help: "Whether the probe's last cycle completed (1) or failed (0)."}, probe),
		lastRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "diskcanary", Name: "probe_last_run_timestamp_seconds",
			Help: "When the probe's last cycle ended, in Unix seconds."}, probe),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "diskcanary", Name: "probe_runs_total",
			Help: "Probe cycles run, failed or not."}, probe),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "diskcanary", Name: "probe_failures_total",
			Help: "Failed probe cycles by reason (" + strings.Join(failureReasons, ", ") + ")."},
			[]string{"probe", "reason"}),
		written: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "diskcanary", Name: "probe_written_bytes_total",
			Help: "Bytes the probe caused to be written, page-granular like the kernel's /proc/PID/io write_bytes."}, probe),
		readBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "diskcanary", Name: "probe_read_bytes_total",
			Help: "Bytes the probe read with O_DIRECT."}, probe),
		targetInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "diskcanary", Name: "probe_target_info",
			Help: "What a probe measures: its path, the kernel block device and filesystem under it, and for a WAL probe its layout and the gap between its ops (the write rate its histogram predicts etcd's fsyncs at)."},
			[]string{"probe", "kind", "layout", "gap_seconds", "path", "device", "fstype", "mountpoint"}),
		etcdDir: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "diskcanary", Name: "probe_etcd_data_dir_info",
			Help: "The etcd data directory a WAL probe stands in for (its etcd_data_dir) and the block device under it; device is empty when it cannot be resolved. A device other than the probe's own (diskcanary_probe_target_info) means the canary measures another disk than etcd's."},
			[]string{"probe", "etcd_data_dir", "device"}),
		warning: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "diskcanary", Name: "probe_target_warning",
			Help: "1 when the probe's target cannot be trusted for this reason (" + strings.Join(fsWarnings(), ", ") + ", odirect_refused, flush_not_reaching_device)."},
			[]string{"probe", "warning"}),
		stalled: prometheus.NewDesc("diskcanary_probe_stalled",
			"1 while the probe has an I/O in flight for longer than its stall threshold.", probe, nil),
		inflight: prometheus.NewDesc("diskcanary_probe_inflight_seconds",
			"How long the probe's current I/O has been in flight (0 when idle).", probe, nil),
		capacityIOPS: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "diskcanary", Name: "capacity_iops",
			Help: "A capacity probe's last sweep: the IOPS achieved at the highest step whose percentile latency stayed within bound seconds (0: even the first step broke it)."},
			[]string{"probe", "device", "pattern", "percentile", "bound"}),
		capacityPartial: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "diskcanary", Name: "capacity_partial",
			Help: "1 when a capacity probe's last sweep stopped before a step broke the bound (write budget, rates run out, timeout, failure): its IOPS is a floor."}, probe),
		capacitySuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "diskcanary", Name: "capacity_success",
			Help: "Whether a capacity probe's last sweep measured the disk (1) or failed (0)."}, probe),
		capacityLastRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "diskcanary", Name: "capacity_last_run_timestamp_seconds",
			Help: "When a capacity probe's last sweep ended, in Unix seconds."}, probe),
	}
}

func (m *Metrics) vecs() []prometheus.Collector {
	return []prometheus.Collector{m.fdatasync, m.write, m.read, m.success, m.lastRun, m.runs,
		m.failures, m.written, m.readBytes, m.targetInfo, m.etcdDir, m.warning,
		m.capacityIOPS, m.capacityPartial, m.capacitySuccess, m.capacityLastRun}
}
