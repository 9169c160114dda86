// Package rulegen owns diskcanary's Prometheus rules and Grafana dashboards:
// it generates alerts/diskcanary-rules.yml (recording and alert rules),
// alerts/tests/*.yml (promtool unit tests) and dashboards/*.json from Go
// code, so every threshold is a parameter and every PromQL expression is
// written once. tools/rulegen/cmd/rulegen is the command; a test proves the committed
// files equal what this package generates with the default parameters.
package rulegen

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// Params are the generator's knobs. Latency thresholds are classic-bucket
// edges on purpose (see buckets.Latency): histogram_quantile only
// interpolates inside a bucket, so a threshold on an edge means "more than
// 1 % of samples are above it", never an interpolation artefact
// (TestQuantileThresholdsAreBucketEdges).
type Params struct {
	// etcd guidance: WAL fdatasync p99 under 10 ms (health tier).
	FdatasyncSlow    time.Duration
	FdatasyncSlowFor time.Duration
	// etcd-mixin incident levels (etcdHighFsyncDurations): 0.5 s / 1 s.
	FdatasyncIncidentWarning  time.Duration
	FdatasyncIncidentCritical time.Duration
	FdatasyncIncidentFor      time.Duration
	ReadSlow                  time.Duration
	ReadSlowFor               time.Duration

	// MinSamples is the sample floor behind a 15 m / 1 h p99: under the
	// default probe's config.Probe.SamplesPer(15 m), since a window's count
	// steps by a burst (docs/contract.md, measurement rule 1).
	MinSamples int
	// MinIncidentSamples is the floor behind a 5 m p99 at incident levels:
	// a disk that slow yields few samples, and the stall alert covers none.
	MinIncidentSamples int

	StallFor        time.Duration
	ProbeFailingFor time.Duration
	ProbeStaleAfter time.Duration

	SmartTemperatureCelsius float64
	SmartTemperatureFor     time.Duration
	WearWarning             float64
	WearCritical            float64
	// Wear-out forecast: days until wear_used_ratio reaches 1 at its rate
	// over WearForecastWindow; alert below WearForecastDays (Ceph's
	// devicehealth warns 6 weeks ahead).
	WearForecastWindow  time.Duration
	WearForecastDays    float64
	SmartGrowthWindow   time.Duration
	SmartStaleAfter     time.Duration
	SmartFailingFor     time.Duration
	CollectorFailingFor time.Duration
	ExporterDownFor     time.Duration

	// Fleet drift: p99 over DriftFactor × the cohort median and over
	// DriftFloor, with at least DriftMinCohort members, for DriftFor.
	DriftFactor    float64
	DriftFloor     time.Duration
	DriftMinCohort int
	DriftFor       time.Duration
	// A target whose disk was busy at least DriftBusyUtilization of the
	// window and DriftBusyFactor × its cohort's median is not compared:
	// load raises a healthy disk's p99 (Perseus, FAST '23).
	DriftBusyUtilization float64
	DriftBusyFactor      float64
	// Self drift: 1 h p99 over SelfDriftFactor × the same hour last week.
	SelfDriftFactor float64
	SelfDriftFloor  time.Duration
	SelfDriftFor    time.Duration

	IostatWindow time.Duration
	// The evaluation intervals of the groups over 15-minute windows and
	// over an hour (and last week's hour); 0 leaves a group at the global
	// evaluation_interval. A window moves little in either, and the alerts
	// read their results at most an interval old, so both stay under the
	// 5 m lookback. A group's first evaluation comes up to an interval
	// after the rules load. At 5,000 nodes on 2 CPUs the attribution
	// group took up to 34 s, 28 % of a 2-minute interval (go run ./bench
	// fleet-scale): every 3 minutes keeps it under a quarter.
	Interval15m, Interval1h time.Duration
	// Interval is every other group's: the alerts and the 5-minute
	// windows. A minute, Prometheus's own default, not the 30 s a fleet's
	// scrapes may use: at 5,000 nodes those groups were two thirds of one
	// Prometheus's rule work, and an alert's for: is minutes (go run
	// ./bench fleet-scale). 0: the global one.
	Interval time.Duration
	// Kernel errors (the errors collector): a storm is ErrorStormCount or
	// more timeouts, aborts, resets or link losses on one disk within
	// ErrorStormWindow (one retried command is routine; a run of them
	// stalls I/O for seconds); any other error alerts when it appeared
	// within ErrorWindow, which is also the look-back of the latency
	// alerts' "kernel errors on this disk" sentence.
	ErrorStormCount  int
	ErrorStormWindow time.Duration
	ErrorWindow      time.Duration
	// AttributionDeviceShare: a slow probe target is blamed on its device
	// when the device's own latency for the matching requests is at least
	// this share of the probe's p99, else on the stack above the device.
	// An fdatasync is two or three device round trips in series
	// (docs/findings.md), so a slow device makes each one a third or more
	// of it; a throttle or a filesystem above the device leaves its
	// requests at their usual microseconds.
	AttributionDeviceShare float64
	// The etcd verdict (etcd.go): etcd's metrics, selected by
	// EtcdSelector, meet the canary's on EtcdJoinLabels (the node; both
	// scrape jobs must carry it). A member is slow on disk when its WAL
	// fsync p99 is over FdatasyncSlow or its backend commit p99 over
	// EtcdCommitSlow (OpenShift's guidance: 10 ms, 25 ms), on the network
	// when a peer's round-trip p99 is over EtcdPeerRTTSlow (50 ms, the
	// same guidance), all over EtcdWindow. A slow disk is contention when
	// the canary's disk was busy EtcdBusyUtilization of the window; the
	// node is short of CPU when some task waited for one
	// EtcdCPUPressure of the time (PSI).
	EtcdSelector        string
	EtcdJoinLabels      []string
	EtcdWindow          time.Duration
	EtcdCommitSlow      time.Duration
	EtcdPeerRTTSlow     time.Duration
	EtcdBusyUtilization float64
	EtcdCPUPressure     float64
	EtcdDegradedFor     time.Duration
	// A p99 of etcd's or the canary's reads slow on EtcdSlowSamples in the
	// window, fine only on MinIncidentSamples: a disk too slow to complete
	// many fsyncs still gets a verdict.
	EtcdSlowSamples int
	// A slow round trip is the network's fault when it is over
	// EtcdPeerRTTFactor × its median over EtcdPeerRTTBaselineWindow (new)
	// or peer messages fail: a cross-zone cluster's steady round trip is
	// neither.
	EtcdPeerRTTFactor         float64
	EtcdPeerRTTBaselineWindow time.Duration
	// etcd is in trouble at EtcdSlowApplyRate slow applies a second (each
	// over 100 ms: one a minute is routine on a large cluster) held over
	// the window, EtcdLeaderChanges leader changes within
	// EtcdLeaderChangesWindow (a planned transfer or a rolling restart is
	// fewer; etcd's usual alert wants more than 3, over an hour), or any
	// heartbeat sent late.
	EtcdSlowApplyRate       float64
	EtcdLeaderChanges       int
	EtcdLeaderChangesWindow time.Duration
	// A busy disk under etcd is a noisy neighbour's when one workload
	// moved more than EtcdNeighbourShare of its bytes over the window.
	// EtcdWorkload (a regex on the contention part's workload label) is
	// etcd itself, never its own neighbour; on Kubernetes its workload is
	// its pod's UID, which a regex cannot know in advance.
	EtcdNeighbourShare float64
	EtcdWorkload       string
	// JobSelector selects the exporters' scrape job in up{} (exporter-down alert).
	JobSelector string
	// TargetLabels identify one probe target and are kept on every
	// per-target rule and alert. "node" is what deploy/kubernetes relabels
	// the pod's node name into; a label absent from the series is harmless.
	// Add others a scrape config attaches (cluster, rack...).
	TargetLabels []string
	// ClusterLabel names the cluster a series comes from, where the scrape
	// config or the remote-write pipeline attaches one (kube-prometheus's
	// external labels, Thanos, Mimir): every aggregation and join keeps it,
	// so the same rules run in one Prometheus and in a global ruler over
	// many clusters whose node and instance names repeat. Absent from the
	// series, it is harmless; "" leaves it out.
	ClusterLabel string
	// CohortLabel, when present on the scrape target, names the cohort
	// (instance type, volume type); otherwise the disk model is the cohort.
	CohortLabel string
	RunbookBase string
	// GrafanaURL is where the dashboards are served: every alert's
	// dashboard_url opens the dashboard on-call reads it on, its
	// variables set from the alert's labels.
	GrafanaURL string
}

// Defaults are the parameters of the committed files.
func Defaults() Params {
	return Params{
		FdatasyncSlow:             10 * time.Millisecond,
		FdatasyncSlowFor:          15 * time.Minute,
		FdatasyncIncidentWarning:  500 * time.Millisecond,
		FdatasyncIncidentCritical: time.Second,
		FdatasyncIncidentFor:      10 * time.Minute,
		ReadSlow:                  25 * time.Millisecond,
		ReadSlowFor:               15 * time.Minute,
		MinSamples:                900,
		MinIncidentSamples:        20,
		StallFor:                  time.Minute,
		ProbeFailingFor:           15 * time.Minute,
		ProbeStaleAfter:           10 * time.Minute,
		SmartTemperatureCelsius:   65,
		SmartTemperatureFor:       15 * time.Minute,
		WearWarning:               0.8,
		WearCritical:              0.9,
		WearForecastWindow:        30 * 24 * time.Hour,
		WearForecastDays:          42,
		SmartGrowthWindow:         time.Hour,
		SmartStaleAfter:           time.Hour,
		SmartFailingFor:           30 * time.Minute,
		CollectorFailingFor:       15 * time.Minute,
		ExporterDownFor:           5 * time.Minute,
		DriftFactor:               3,
		DriftFloor:                2 * time.Millisecond,
		DriftMinCohort:            5,
		DriftFor:                  30 * time.Minute,
		DriftBusyUtilization:      0.5,
		DriftBusyFactor:           2,
		SelfDriftFactor:           2,
		SelfDriftFloor:            2 * time.Millisecond,
		SelfDriftFor:              time.Hour,
		IostatWindow:              5 * time.Minute,
		Interval15m:               3 * time.Minute,
		Interval1h:                4 * time.Minute,
		Interval:                  time.Minute,
		ErrorStormCount:           3,
		ErrorStormWindow:          10 * time.Minute,
		ErrorWindow:               time.Hour,
		AttributionDeviceShare:    0.2,
		EtcdSelector:              `job=~".*etcd.*"`,
		EtcdJoinLabels:            []string{"node"},
		EtcdWindow:                5 * time.Minute,
		EtcdCommitSlow:            25 * time.Millisecond,
		EtcdPeerRTTSlow:           50 * time.Millisecond,
		EtcdBusyUtilization:       0.5,
		EtcdCPUPressure:           0.2,
		EtcdDegradedFor:           5 * time.Minute,
		EtcdSlowSamples:           5,
		EtcdPeerRTTFactor:         2,
		EtcdPeerRTTBaselineWindow: 24 * time.Hour,
		EtcdSlowApplyRate:         0.1,
		EtcdLeaderChanges:         4,
		EtcdLeaderChangesWindow:   15 * time.Minute,
		EtcdNeighbourShare:        0.5,
		EtcdWorkload:              ".*etcd.*",
		JobSelector:               `job="diskcanary"`,
		TargetLabels:              []string{"job", "instance", "node", "probe", "path", "device"},
		ClusterLabel:              "cluster",
		CohortLabel:               "cohort",
		RunbookBase:               "https://github.com/diskcanary/diskcanary/blob/main/docs/runbooks.md",
		GrafanaURL:                "http://localhost:3000",
	}
}

type stringList struct{ p *[]string }

func (s stringList) String() string {
	if s.p == nil {
		return ""
	}
	return strings.Join(*s.p, ",")
}
func (s stringList) Set(v string) error { *s.p = strings.Split(v, ","); return nil }

// RegisterFlags binds every parameter to a flag, defaulting to p's values.
func (p *Params) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&p.FdatasyncSlow, "fdatasync.slow", p.FdatasyncSlow, "fdatasync p99 (15 m) warning threshold, the etcd guidance")
	fs.DurationVar(&p.FdatasyncSlowFor, "fdatasync.slow-for", p.FdatasyncSlowFor, "for: of the fdatasync warning")
	fs.DurationVar(&p.FdatasyncIncidentWarning, "fdatasync.incident-warning", p.FdatasyncIncidentWarning, "fdatasync p99 (5 m) incident warning (etcd-mixin)")
	fs.DurationVar(&p.FdatasyncIncidentCritical, "fdatasync.incident-critical", p.FdatasyncIncidentCritical, "fdatasync p99 (5 m) incident critical (etcd-mixin)")
	fs.DurationVar(&p.FdatasyncIncidentFor, "fdatasync.incident-for", p.FdatasyncIncidentFor, "for: of the incident alerts")
	fs.DurationVar(&p.ReadSlow, "read.slow", p.ReadSlow, "random-read p99 (15 m) warning threshold")
	fs.DurationVar(&p.ReadSlowFor, "read.slow-for", p.ReadSlowFor, "for: of the read warning")
	fs.DurationVar(&p.Interval15m, "interval.15m", p.Interval15m, "evaluation interval of the groups over 15-minute windows, under the 5 m lookback (0: the global one)")
	fs.DurationVar(&p.Interval, "interval", p.Interval, "evaluation interval of every other group: the alerts and the 5-minute windows (0: the global one)")
	fs.DurationVar(&p.Interval1h, "interval.1h", p.Interval1h, "evaluation interval of the groups over an hour and last week's hour, under the 5 m lookback (0: the global one)")
	fs.IntVar(&p.MinSamples, "min-samples", p.MinSamples, "samples needed behind a 15 m or 1 h p99")
	fs.IntVar(&p.MinIncidentSamples, "min-incident-samples", p.MinIncidentSamples, "samples needed behind a 5 m p99 at incident levels")
	fs.DurationVar(&p.StallFor, "stall-for", p.StallFor, "for: of the stalled-probe page")
	fs.DurationVar(&p.ProbeFailingFor, "probe.failing-for", p.ProbeFailingFor, "for: of the probe-failing alert")
	fs.DurationVar(&p.ProbeStaleAfter, "probe.stale-after", p.ProbeStaleAfter, "a probe without a completed cycle for this long is missing data")
	fs.Float64Var(&p.SmartTemperatureCelsius, "smart.temperature", p.SmartTemperatureCelsius, "SMART temperature warning, °C")
	fs.DurationVar(&p.SmartTemperatureFor, "smart.temperature-for", p.SmartTemperatureFor, "for: of the temperature alert")
	fs.Float64Var(&p.WearWarning, "smart.wear-warning", p.WearWarning, "wear used ratio warning")
	fs.Float64Var(&p.WearCritical, "smart.wear-critical", p.WearCritical, "wear used ratio critical")
	fs.DurationVar(&p.WearForecastWindow, "smart.wear-forecast-window", p.WearForecastWindow, "window over which the wear rate of the wear-out forecast is measured")
	fs.Float64Var(&p.WearForecastDays, "smart.wear-forecast-days", p.WearForecastDays, "warn when the forecast says the drive reaches its rated endurance within this many days")
	fs.DurationVar(&p.SmartGrowthWindow, "smart.growth-window", p.SmartGrowthWindow, "window in which growing error counters alert")
	fs.DurationVar(&p.SmartStaleAfter, "smart.stale-after", p.SmartStaleAfter, "SMART data older than this is stale")
	fs.DurationVar(&p.SmartFailingFor, "smart.failing-for", p.SmartFailingFor, "for: of the SMART collection failing alert")
	fs.DurationVar(&p.CollectorFailingFor, "collector.failing-for", p.CollectorFailingFor, "for: of the collector failing alert")
	fs.DurationVar(&p.ExporterDownFor, "exporter.down-for", p.ExporterDownFor, "for: of the exporter down alert")
	fs.Float64Var(&p.DriftFactor, "drift.factor", p.DriftFactor, "fleet drift: p99 above this many times the cohort median")
	fs.DurationVar(&p.DriftFloor, "drift.floor", p.DriftFloor, "fleet drift: and above this absolute p99")
	fs.IntVar(&p.DriftMinCohort, "drift.min-cohort", p.DriftMinCohort, "fleet drift: cohorts smaller than this never alert")
	fs.Float64Var(&p.AttributionDeviceShare, "attribution.device-share", p.AttributionDeviceShare, "a slow probe is the device's fault when the device's request latency is at least this share of the probe's p99, else the stack's")
	fs.DurationVar(&p.DriftFor, "drift.for", p.DriftFor, "for: of the fleet drift alerts")
	fs.Float64Var(&p.DriftBusyUtilization, "drift.busy-utilization", p.DriftBusyUtilization, "fleet drift: a target whose disk was busier than this share of the window (and drift.busy-factor × its cohort's median) is not compared")
	fs.Float64Var(&p.DriftBusyFactor, "drift.busy-factor", p.DriftBusyFactor, "fleet drift: see drift.busy-utilization")
	fs.Float64Var(&p.SelfDriftFactor, "self-drift.factor", p.SelfDriftFactor, "self drift: 1 h p99 above this many times the same hour last week")
	fs.DurationVar(&p.SelfDriftFloor, "self-drift.floor", p.SelfDriftFloor, "self drift: and above this absolute p99")
	fs.DurationVar(&p.SelfDriftFor, "self-drift.for", p.SelfDriftFor, "for: of the self drift alerts")
	fs.DurationVar(&p.IostatWindow, "iostat.window", p.IostatWindow, "rate window of the iostat recording rules")
	fs.IntVar(&p.ErrorStormCount, "errors.storm-count", p.ErrorStormCount, "timeouts, aborts, resets or link losses on one disk within errors.storm-window that page")
	fs.DurationVar(&p.ErrorStormWindow, "errors.storm-window", p.ErrorStormWindow, "window of the kernel error storm alert")
	fs.DurationVar(&p.ErrorWindow, "errors.window", p.ErrorWindow, "window in which any other kernel storage error alerts, and the latency alerts' look-back for errors on the same disk")
	fs.StringVar(&p.EtcdSelector, "etcd.selector", p.EtcdSelector, "label matchers selecting etcd's own series (the etcd verdict)")
	fs.Var(stringList{&p.EtcdJoinLabels}, "etcd.join-labels", "comma-separated labels naming the node on both etcd's and diskcanary's series")
	fs.DurationVar(&p.EtcdWindow, "etcd.window", p.EtcdWindow, "window of the etcd verdict's rates and quantiles")
	fs.DurationVar(&p.EtcdCommitSlow, "etcd.commit-slow", p.EtcdCommitSlow, "etcd backend commit p99 above which its disk is slow")
	fs.DurationVar(&p.EtcdPeerRTTSlow, "etcd.peer-rtt-slow", p.EtcdPeerRTTSlow, "etcd peer round-trip p99 above which the network is slow")
	fs.Float64Var(&p.EtcdBusyUtilization, "etcd.busy-utilization", p.EtcdBusyUtilization, "utilisation of the canary's disk at which a slow disk is contention")
	fs.Float64Var(&p.EtcdCPUPressure, "etcd.cpu-pressure", p.EtcdCPUPressure, "share of time some task waits for a CPU (PSI) at which the node is short of CPU")
	fs.DurationVar(&p.EtcdDegradedFor, "etcd.degraded-for", p.EtcdDegradedFor, "for: of the etcd degraded alert")
	fs.IntVar(&p.EtcdSlowSamples, "etcd.slow-samples", p.EtcdSlowSamples, "samples enough for an etcd or canary p99 of the etcd verdict to read slow (min-incident-samples to read fine)")
	fs.Float64Var(&p.EtcdPeerRTTFactor, "etcd.peer-rtt-factor", p.EtcdPeerRTTFactor, "a slow peer round trip is the network's fault over this many times its median (or with peer messages failing)")
	fs.DurationVar(&p.EtcdPeerRTTBaselineWindow, "etcd.peer-rtt-baseline-window", p.EtcdPeerRTTBaselineWindow, "window of the peer round trip's median")
	fs.Float64Var(&p.EtcdSlowApplyRate, "etcd.slow-apply-rate", p.EtcdSlowApplyRate, "slow applies a second (over the etcd window) at which etcd is in trouble")
	fs.IntVar(&p.EtcdLeaderChanges, "etcd.leader-changes", p.EtcdLeaderChanges, "leader changes within etcd.leader-changes-window at which etcd is in trouble")
	fs.DurationVar(&p.EtcdLeaderChangesWindow, "etcd.leader-changes-window", p.EtcdLeaderChangesWindow, "window of etcd.leader-changes")
	fs.Float64Var(&p.EtcdNeighbourShare, "etcd.neighbour-share", p.EtcdNeighbourShare, "share of the bytes on etcd's busy disk above which one workload is the noisy neighbour the verdict names")
	fs.StringVar(&p.EtcdWorkload, "etcd.workload", p.EtcdWorkload, "regex on the contention workload label matching etcd itself (never named as its own noisy neighbour)")
	fs.StringVar(&p.JobSelector, "job-selector", p.JobSelector, "label matchers selecting the diskcanary scrape job in up{}")
	fs.Var(stringList{&p.TargetLabels}, "target-labels", "comma-separated labels that identify one probe target")
	fs.StringVar(&p.ClusterLabel, "cluster-label", p.ClusterLabel, "label naming the cluster, kept through every aggregation and join (\"\": none)")
	fs.StringVar(&p.CohortLabel, "cohort-label", p.CohortLabel, "target label naming a user-defined cohort (else: disk model)")
	fs.StringVar(&p.RunbookBase, "runbook-base", p.RunbookBase, "URL of docs/runbooks.md; alerts link to #alertname")
	fs.StringVar(&p.GrafanaURL, "grafana-url", p.GrafanaURL, "Grafana's URL; alerts' dashboard_url links to the dashboards there")
}

// seconds renders a duration as a PromQL float of seconds.
func seconds(d time.Duration) string { return num(d.Seconds()) }

func num(f float64) string { return fmt.Sprintf("%g", f) }

// promDuration renders a duration the way Prometheus writes it (15m, 1h, 30s).
// interval is a group's interval field: empty for 0.
func interval(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return promDuration(d)
}

func promDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%(7*24*time.Hour) == 0:
		return fmt.Sprintf("%dw", d/(7*24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	default:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	}
}

// human renders a threshold for people: 10ms, 0.5s, 2ms.
func human(d time.Duration) string {
	if d < time.Second {
		return num(float64(d)/float64(time.Millisecond)) + " ms"
	}
	return num(d.Seconds()) + " s"
}
