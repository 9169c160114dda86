package collector

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/diskcanary/diskcanary/internal/cgroupio"
	"github.com/diskcanary/diskcanary/internal/hostpath"
)

// ContentionConfig is the contention collector's settings (flags
// --collector.contention.*); zero fields take the defaults.
type ContentionConfig struct {
	// Interval between passes over the cgroup tree.
	Interval time.Duration
	// Top is how many cgroups per device are named; the rest are "other".
	Top int
	// MaxCgroups and Budget bound one pass (cgroupio.Limits).
	MaxCgroups int
	Budget     time.Duration
	// Root is the cgroup hierarchy to read; "" finds it under sysfs.
	Root string
}

// DefaultContentionInterval is the time between two passes: a rate over
// a minute has a dozen points, and a pass is cheap (BenchmarkContentionPass1000).
const DefaultContentionInterval = 5 * time.Second

func (c ContentionConfig) withDefaults() ContentionConfig {
	if c.Interval <= 0 {
		c.Interval = DefaultContentionInterval
	}
	if c.Top <= 0 {
		c.Top = cgroupio.DefaultTop
	}
	if c.MaxCgroups <= 0 {
		c.MaxCgroups = cgroupio.DefaultMaxCgroups
	}
	if c.Budget <= 0 {
		c.Budget = cgroupio.DefaultBudget
	}
	return c
}

// contentionCollector exports who did I/O on each block device, by cgroup:
// the top N per device by recent bytes, the daemon's own cgroup as
// "diskcanary", the rest as "other". A goroutine walks the cgroup tree
// every Interval; a scrape sends the last pass's metrics, so a slow or
// enormous cgroupfs never holds one up.
type contentionCollector struct {
	cfg    ContentionConfig
	paths  hostpath.Paths
	logger *slog.Logger
	filter deviceFilter

	// Set at construction; when srcErr is set nothing is read.
	src    cgroupio.Source
	srcErr error

	// The background pass's own state.
	reader   *cgroupio.Reader
	tracker  *cgroupio.Tracker
	pass     cgroupio.Pass
	names    map[cgroupio.Dev]cgroupio.DeviceName
	warned   map[cgroupio.Dev]bool
	lastBad  int
	lastTrim string

	mu        sync.Mutex
	metrics   []prometheus.Metric
	malformed float64
	vanished  float64
	truncated float64
}

var (
	cgroupIOLabels      = []string{"device", "workload", "cgroup", "op"}
	cgroupIOBytesDesc   = prometheus.NewDesc(namespace+"_cgroup_io_bytes_total", "Bytes a cgroup moved on a block device (op: read, write, discard), as the kernel's cgroup I/O accounting counts them; per device the top cgroups by recent I/O are named (workload: Kubernetes pod/container, systemd unit, or the cgroup path), the daemon's own is workload=\"diskcanary\" and the rest are summed as workload=\"other\" (cgroup=\"\").", cgroupIOLabels, nil)
	cgroupIOOpsDesc     = prometheus.NewDesc(namespace+"_cgroup_io_ops_total", "I/O operations a cgroup issued on a block device (op: read, write, discard); series as diskcanary_cgroup_io_bytes_total.", cgroupIOLabels, nil)
	cgroupIOWaitDesc    = prometheus.NewDesc(namespace+"_cgroup_io_wait_seconds_total", "Time a cgroup's I/O on a block device waited in the io.cost controller (cgroup v2 io.stat cost.wait; only where iocost is enabled).", []string{"device", "workload", "cgroup"}, nil)
	cgroupPSIWaitDesc   = prometheus.NewDesc(namespace+"_cgroup_io_pressure_waiting_seconds_total", "Time at least one task of a named cgroup waited for I/O (cgroup v2 io.pressure some), on any device.", []string{"workload", "cgroup"}, nil)
	cgroupPSIStallDesc  = prometheus.NewDesc(namespace+"_cgroup_io_pressure_stalled_seconds_total", "Time every non-idle task of a named cgroup waited for I/O at once (cgroup v2 io.pressure full), on any device.", []string{"workload", "cgroup"}, nil)
	contentionAvailDesc = prometheus.NewDesc(namespace+"_contention_available", "Whether a cgroup hierarchy that accounts block I/O was found (1) or not (0: no cgroup v2 io controller, no v1 blkio).", nil, nil)
	contentionInfoDesc  = prometheus.NewDesc(namespace+"_contention_source_info", "The cgroup hierarchy the contention collector reads: cgroup_version 1 (blkio) or 2 (io), and its root.", []string{"cgroup_version", "root"}, nil)
	contentionWalked    = prometheus.NewDesc(namespace+"_contention_cgroups", "Cgroups the last pass visited.", nil, nil)
	contentionTruncDesc = prometheus.NewDesc(namespace+"_contention_truncated", "Whether the last pass stopped before the end of the cgroup tree (1), at --collector.contention.max-cgroups or the time budget: cgroups it did not reach keep their last counters for a while, and their new I/O is missing.", nil, nil)
	contentionTruncs    = prometheus.NewDesc(namespace+"_contention_truncated_passes_total", "Passes that stopped before the end of the cgroup tree.", nil, nil)
	contentionBadDesc   = prometheus.NewDesc(namespace+"_contention_malformed_lines_total", "Lines of cgroup I/O stat files that could not be read (left out of the counts).", nil, nil)
	contentionGoneDesc  = prometheus.NewDesc(namespace+"_contention_vanished_cgroups_total", "Cgroups that disappeared (or could not be read) while a pass walked the tree.", nil, nil)
	contentionLastDesc  = prometheus.NewDesc(namespace+"_contention_last_pass_timestamp_seconds", "When the last pass over the cgroup tree ended.", nil, nil)
	contentionDurDesc   = prometheus.NewDesc(namespace+"_contention_pass_duration_seconds", "How long the last pass over the cgroup tree took.", nil, nil)
)

func newContentionCollector(o Options) (Collector, error) {
	filter, err := newDeviceFilter(o.Config)
	if err != nil {
		return nil, err
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg := o.Contention.withDefaults()
	c := &contentionCollector{cfg: cfg, paths: o.Paths, logger: logger, filter: filter, warned: map[cgroupio.Dev]bool{}}
	c.src, c.srcErr = cgroupio.Detect(o.Paths, cfg.Root)
	if c.srcErr != nil {
		if cfg.Root != "" {
			return nil, fmt.Errorf("--collector.contention.root: %w", c.srcErr)
		}
		logger.Warn("contention: no per-cgroup I/O to read; diskcanary_contention_available is 0", "err", c.srcErr)
		return c, nil
	}
	self := cgroupio.SelfCgroup(o.Paths, c.src.Version)
	if self == "/" || self == "" {
		logger.Info("contention: diskcanary runs in the root cgroup, which it shares with every process not in a cgroup: its own I/O is not told apart", "cgroup_version", c.src.Version)
	}
	c.reader = cgroupio.NewReader(c.src, cgroupio.Limits{MaxCgroups: cfg.MaxCgroups, Budget: cfg.Budget})
	// A score halving each pass: the ranking follows the last few
	// passes, so a workload's place does not flap on one quiet pass.
	c.tracker = cgroupio.NewTracker(cgroupio.TrackerConfig{Version: c.src.Version, Top: cfg.Top, Decay: 0.5, SelfPath: self})
	return c, nil
}

// Run makes a pass at once and then every Interval until ctx is done.
func (c *contentionCollector) Run(ctx context.Context) {
	if c.srcErr != nil {
		return
	}
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		c.collect(time.Now)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// collect makes one pass and replaces the metrics a scrape sends.
func (c *contentionCollector) collect(now func() time.Time) {
	if err := c.reader.Read(&c.pass); err != nil {
		c.logger.Error("contention: cannot read the cgroup tree", "root", c.src.Root, "err", err)
		return
	}
	var err error
	if c.names, err = cgroupio.DeviceNames(c.paths, c.names); err != nil {
		c.logger.Debug("contention: no /proc/diskstats: devices keep their numbers", "err", err)
	}
	snap := c.tracker.Observe(&c.pass, now())
	c.logPass(&snap)
	ms := c.build(&snap)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.malformed += float64(c.pass.Malformed)
	c.vanished += float64(c.pass.Vanished)
	if c.pass.Truncated != "" {
		c.truncated++
	}
	trunc := 0.0
	if c.pass.Truncated != "" {
		trunc = 1
	}
	ms = append(ms,
		prometheus.MustNewConstMetric(contentionWalked, prometheus.GaugeValue, float64(c.pass.Walked)),
		prometheus.MustNewConstMetric(contentionTruncDesc, prometheus.GaugeValue, trunc),
		prometheus.MustNewConstMetric(contentionLastDesc, prometheus.GaugeValue, float64(snap.Time.UnixNano())/1e9),
		prometheus.MustNewConstMetric(contentionDurDesc, prometheus.GaugeValue, c.pass.Duration.Seconds()),
	)
	c.metrics = ms
}

// logPass says once what a pass could not do: malformed lines (again when
// their number changes), truncation (when it starts and ends), and on v1
// the devices the kernel does not account.
func (c *contentionCollector) logPass(snap *cgroupio.Snapshot) {
	p := &c.pass
	if p.Malformed > 0 && p.Malformed != c.lastBad {
		c.logger.Warn("contention: cgroup I/O stat lines that cannot be read were left out", "lines", p.Malformed, "root", c.src.Root)
	}
	c.lastBad = p.Malformed
	if p.Truncated != c.lastTrim {
		if p.Truncated != "" {
			c.logger.Warn("contention: the pass stopped before the end of the cgroup tree; raise --collector.contention.max-cgroups or find what makes so many cgroups",
				"reason", p.Truncated, "cgroups", p.Walked, "took", p.Duration)
		} else {
			c.logger.Info("contention: the pass walks the whole cgroup tree again", "cgroups", p.Walked)
		}
	}
	c.lastTrim = p.Truncated
	if c.src.Version != 1 || p.Truncated != "" {
		return
	}
	// cgroup v1 counts a device's I/O per cgroup only once blk-throttle is
	// active on it (a throttle rule was ever set): a device with I/O that
	// no cgroup has a line for is such a device.
	counted := map[cgroupio.Dev]bool{}
	for _, cg := range p.Cgroups {
		for _, s := range cg.Stats {
			counted[s.Dev] = true
		}
	}
	var missing []string
	for dev, n := range c.names {
		if n.Active && !counted[dev] && !c.warned[dev] && c.filter.included(n.Name) {
			c.warned[dev] = true
			missing = append(missing, n.Name+"="+dev.String())
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		c.logger.Warn("contention: cgroup v1 blkio counts no I/O on these devices: the kernel accounts a device only once blk-throttle is active on it; `echo MAJ:MIN 0 > "+
			c.src.Root+"/blkio.throttle.read_bps_device` activates it without setting a limit (docs/metrics.md)", "devices", strings.Join(missing, ","))
	}
}

// build turns a snapshot into const metrics, leaving out devices the
// device filter drops.
func (c *contentionCollector) build(snap *cgroupio.Snapshot) []prometheus.Metric {
	var ms []prometheus.Metric
	psi := map[string]bool{}
	for _, r := range snap.Devices {
		name := r.Dev.String()
		if n, ok := c.names[r.Dev]; ok {
			name = n.Name
		}
		if !c.filter.included(name) {
			continue
		}
		for i, row := range r.Rows {
			// A cgroup's name is the user's: bytes that are not UTF-8
			// would make the const metric panic.
			row.Workload, row.Cgroup = strings.ToValidUTF8(row.Workload, "\uFFFD"), strings.ToValidUTF8(row.Cgroup, "\uFFFD")
			t := &row.Total
			emit := func(d *prometheus.Desc, v uint64, op string) {
				ms = append(ms, prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), name, row.Workload, row.Cgroup, op))
			}
			emit(cgroupIOBytesDesc, t.ReadBytes, "read")
			emit(cgroupIOBytesDesc, t.WriteBytes, "write")
			emit(cgroupIOOpsDesc, t.ReadOps, "read")
			emit(cgroupIOOpsDesc, t.WriteOps, "write")
			if t.DiscardOps > 0 || t.DiscardBytes > 0 {
				emit(cgroupIOBytesDesc, t.DiscardBytes, "discard")
				emit(cgroupIOOpsDesc, t.DiscardOps, "discard")
			}
			if t.HasWait {
				ms = append(ms, prometheus.MustNewConstMetric(cgroupIOWaitDesc, prometheus.CounterValue, float64(t.WaitUsec)/1e6, name, row.Workload, row.Cgroup))
			}
			if row.Cgroup != "" && !psi[row.Cgroup] {
				psi[row.Cgroup] = true
				if some, full, ok := c.reader.Pressure(r.Rows[i].Cgroup); ok {
					ms = append(ms,
						prometheus.MustNewConstMetric(cgroupPSIWaitDesc, prometheus.CounterValue, float64(some)/1e6, row.Workload, row.Cgroup),
						prometheus.MustNewConstMetric(cgroupPSIStallDesc, prometheus.CounterValue, float64(full)/1e6, row.Workload, row.Cgroup))
				}
			}
		}
	}
	return ms
}

func (c *contentionCollector) Update(ch chan<- prometheus.Metric) error {
	if c.srcErr != nil {
		ch <- prometheus.MustNewConstMetric(contentionAvailDesc, prometheus.GaugeValue, 0)
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(contentionAvailDesc, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(contentionInfoDesc, prometheus.GaugeValue, 1, fmt.Sprint(c.src.Version), c.src.Root)
	ch <- prometheus.MustNewConstMetric(contentionTruncs, prometheus.CounterValue, c.truncated)
	ch <- prometheus.MustNewConstMetric(contentionBadDesc, prometheus.CounterValue, c.malformed)
	ch <- prometheus.MustNewConstMetric(contentionGoneDesc, prometheus.CounterValue, c.vanished)
	for _, m := range c.metrics {
		ch <- m
	}
	return nil
}
