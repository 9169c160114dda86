// Package collector turns diskcanary's collectors (probe results, diskstats,
// SMART, eBPF block latency, kernel errors, per-cgroup I/O, pressure) into
// one prometheus.Collector. Each collector is
// registered once in the collectors table below, which is also where its
// --[no-]collector.NAME flag and default come from. Every collector runs concurrently on each scrape, and its
// success and duration are exported, so one failing collector never fails the
// scrape.
package collector

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
)

const namespace = "diskcanary"

// deviceFilter is the diskstats device filter (include/exclude regexes),
// which every collector that exports per-disk series honours.
type deviceFilter struct {
	include, exclude *regexp.Regexp
}

func newDeviceFilter(c *config.Config) (deviceFilter, error) {
	include, exclude, err := c.Diskstats.DeviceFilter()
	return deviceFilter{include, exclude}, err
}

// included reports whether the device name passes the filter: include
// replaces the default exclude when set.
func (f deviceFilter) included(name string) bool {
	if f.include != nil {
		return f.include.MatchString(name)
	}
	return !f.exclude.MatchString(name)
}

// Collector is one source of metrics. Update must answer from memory or from
// kernel pseudo-files: anything that can hang on a disk (probes, smartctl)
// runs in Run and Update only reads its last results.
type Collector interface {
	Update(ch chan<- prometheus.Metric) error
}

// TextCollector is implemented by collectors whose series are many and
// plain (diskstats: about twenty a device). For a text-format scrape the
// collector snapshots what it exports and writes it itself, with no
// client_golang metric per series; Update still serves the protobuf format.
type TextCollector interface {
	Collector
	Snapshot() (TextSeries, error)
}

// TextSeries is a TextCollector's snapshot. WriteText writes the families
// want accepts in the text exposition format, HELP and TYPE included.
type TextSeries interface {
	WriteText(w *bufio.Writer, want func(family string) bool) error
}

// Background is implemented by collectors that work on their own schedule.
// Run returns when ctx is cancelled.
type Background interface {
	Run(ctx context.Context)
}

// Warmer is implemented by collectors with a cache that the first scrape
// would otherwise fill (diskstats' sysfs attributes): Warm fills it before
// the listener opens, so no scrape, the first included, pays for it.
type Warmer interface {
	Warm()
}

// Options is what a collector's constructor gets.
type Options struct {
	Config *config.Config
	// Paths are the host's /proc and /sys (--path.procfs, --path.sysfs);
	// they are not in Config because the file never sets them.
	Paths  hostpath.Paths
	Logger *slog.Logger
	// Contention is the contention collector's settings, from its flags.
	Contention ContentionConfig
}

// CollectorInfo is one row of the collectors table.
type CollectorInfo struct {
	Name           string
	EnabledDefault bool
	// FileEnabled is the collector's `enabled:` key in the config file, for the
	// collectors that have a section there; nil for the others.
	FileEnabled func(*config.Config) bool
	Help        string
	New         func(Options) (Collector, error)
}

// Collectors is the table of every collector diskcanary has. cmd/diskcanary derives
// the --[no-]collector.NAME flags from it, and Enabled the set that runs.
var Collectors = []CollectorInfo{
	{Name: "probes", EnabledDefault: true, FileEnabled: func(c *config.Config) bool { return c.Probes.Enabled },
		Help: "canary probes (etcd-WAL fdatasync, O_DIRECT random read)", New: newProbesCollector},
	{Name: "diskstats", EnabledDefault: true, FileEnabled: func(c *config.Config) bool { return c.Diskstats.Enabled },
		Help: "/proc/diskstats with node_exporter semantics, disk info and the device -> disk join", New: newDiskstatsCollector},
	{Name: "smart", EnabledDefault: true, FileEnabled: func(c *config.Config) bool { return c.Smart.Enabled },
		Help: "SMART health through smartctl --json, on its own schedule (never inside a scrape)", New: newSmartCollector},
	{Name: "blocklatency", EnabledDefault: true, Help: "per-disk block request latency histograms from eBPF, counted in the kernel (needs root or CAP_BPF+CAP_PERFMON; off with a reason otherwise)", New: newBlocklatencyCollector},
	{Name: "errors", EnabledDefault: true, Help: "storage errors as the kernel reports them: /dev/kmsg classified per disk and filesystem (needs CAP_SYSLOG where kernel.dmesg_restrict=1; off with a reason otherwise), SCSI and filesystem error counters from sysfs, filesystems the kernel made read-only", New: newErrorsCollector},
	{Name: "contention", EnabledDefault: true, Help: "who did I/O on each block device: per-cgroup bytes and operations from cgroup v2 io.stat or v1 blkio, the top cgroups per device by recent I/O named (Kubernetes pod/container, systemd unit), the rest as other; read on its own schedule", New: newContentionCollector},
	{Name: "pressure", EnabledDefault: true, Help: "the kernel's pressure stall information for CPU and I/O (/proc/pressure), node_exporter's semantics; the etcd verdict's CPU witness", New: newPressureCollector},
}

var (
	successDesc = prometheus.NewDesc(namespace+"_collector_success",
		"Whether the collector succeeded on this scrape (1) or failed (0).", []string{"collector"}, nil)
	durationDesc = prometheus.NewDesc(namespace+"_collector_duration_seconds",
		"How long the collector took on this scrape.", []string{"collector"}, nil)
)

// NodeCollector runs the enabled collectors on every scrape.
type NodeCollector struct {
	collectors map[string]Collector
	logger     *slog.Logger
}

// Enabled says which collectors run, by name: a --[no-]collector.NAME flag the
// user gave (in flags) beats the file's enabled key, which beats the collector's
// default.
func Enabled(c *config.Config, flags map[string]bool) map[string]bool {
	enabled := map[string]bool{}
	for _, info := range Collectors {
		on, ok := flags[info.Name]
		switch {
		case ok:
		case info.FileEnabled != nil:
			on = info.FileEnabled(c)
		default:
			on = info.EnabledDefault
		}
		enabled[info.Name] = on
	}
	return enabled
}

// New builds the collectors enabled maps to true (see Enabled).
func New(opts Options, enabled map[string]bool) (*NodeCollector, error) {
	c := &NodeCollector{collectors: map[string]Collector{}, logger: opts.Logger}
	for _, info := range Collectors {
		if !enabled[info.Name] {
			continue
		}
		p, err := info.New(opts)
		if err != nil {
			return nil, fmt.Errorf("collector %s: %w", info.Name, err)
		}
		c.collectors[info.Name] = p
	}
	return c, nil
}

// Warm fills every enabled collector's cache that the first scrape would
// otherwise fill (Warmer), in turn; failures are left to the scrapes.
func (c *NodeCollector) Warm() {
	for _, p := range c.collectors {
		if w, ok := p.(Warmer); ok {
			w.Warm()
		}
	}
}

// Collector returns an enabled collector by name (nil if disabled).
func (c *NodeCollector) Collector(name string) Collector { return c.collectors[name] }

// Run starts the background work of every collector and returns when ctx is done
// and all of it has stopped.
func (c *NodeCollector) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, p := range c.collectors {
		if b, ok := p.(Background); ok {
			wg.Add(1)
			go func() { defer wg.Done(); b.Run(ctx) }()
		}
	}
	wg.Wait()
}

// Describe sends nothing: this is an unchecked collector, because the collectors'
// series depend on what the host has.
func (c *NodeCollector) Describe(ch chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector: every collector's series
// through ch.
func (c *NodeCollector) Collect(ch chan<- prometheus.Metric) {
	c.Scrape(false).Collect(ch)
}

// Scrape is one scrape of the enabled collectors, as a prometheus.Collector.
// With text set, TextCollectors snapshot their series instead of sending
// them; WriteText writes those after the registry's families.
func (c *NodeCollector) Scrape(text bool) *Scrape {
	return &Scrape{node: c, text: text}
}

// Scrape is what NodeCollector.Scrape returns; it is used once.
type Scrape struct {
	node *NodeCollector
	text bool

	mu     sync.Mutex
	series []TextSeries
}

// Describe sends nothing: the collectors' series depend on the host.
func (s *Scrape) Describe(ch chan<- *prometheus.Desc) {}

// Collect runs every enabled collector concurrently and sends each one's
// duration and success.
func (s *Scrape) Collect(ch chan<- prometheus.Metric) {
	var wg sync.WaitGroup
	for name, p := range s.node.collectors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			var err error
			if tc, ok := p.(TextCollector); ok && s.text {
				var ts TextSeries
				if ts, err = tc.Snapshot(); err == nil {
					s.mu.Lock()
					s.series = append(s.series, ts)
					s.mu.Unlock()
				}
			} else {
				err = p.Update(ch)
			}
			ok := 1.0
			if err != nil {
				ok = 0
				s.node.logger.Error("collector failed", "collector", name, "err", err)
			}
			ch <- prometheus.MustNewConstMetric(durationDesc, prometheus.GaugeValue, time.Since(start).Seconds(), name)
			ch <- prometheus.MustNewConstMetric(successDesc, prometheus.GaugeValue, ok, name)
		}()
	}
	wg.Wait()
}

// WriteText writes the snapshots Collect took, the families want accepts.
func (s *Scrape) WriteText(w *bufio.Writer, want func(family string) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ts := range s.series {
		if err := ts.WriteText(w, want); err != nil {
			return err
		}
	}
	return nil
}
