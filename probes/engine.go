package probes

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
)

// shutdownGrace bounds how long Run waits for probes after ctx is done: a
// probe stuck in an uninterruptible fdatasync must not stop the daemon
// from exiting.
const shutdownGrace = 5 * time.Second

// Engine runs the configured probes, each in its own goroutine with one op
// in flight at a time (a capacity probe: its sweep, holding the device),
// and exposes their metrics.
type Engine struct {
	probes   []*probe
	capacity []*capacityProbe
	m        *Metrics
	log      *slog.Logger

	mu      sync.Mutex
	budgets map[uint64]*budget       // per filesystem (st_dev): probes on one filesystem share its budget
	gates   map[uint64]chan struct{} // per block device: one burst at a time (probe.cycle)
}

// NewEngine builds the probes of cfgs (already validated by package config).
func NewEngine(cfgs []config.Probe, paths hostpath.Paths, logger *slog.Logger) *Engine {
	procfs, sysfs := paths.Proc(), paths.Sys()
	e := &Engine{m: NewMetrics(), log: logger, budgets: map[uint64]*budget{}, gates: map[uint64]chan struct{}{}}
	sweeping := make(chan struct{}, 1)
	for _, c := range cfgs {
		if c.Kind == config.KindCapacity {
			e.capacity = append(e.capacity, &capacityProbe{cfg: c, log: logger, m: e.m, paths: paths, gate: e.gateFor, sweeping: sweeping})
			continue
		}
		p := &probe{cfg: c, log: logger, m: e.m, procfs: procfs, sysfs: sysfs, fl: newInflight()}
		p.budget = func(dev uint64) *budget { return e.budgetFor(dev, int64(c.DailyWriteBudget)) }
		p.gate = e.gateFor
		// Series exist from the start, so a probe that never succeeds is
		// visible as 0 rather than absent.
		e.m.success.WithLabelValues(c.Name).Set(0)
		e.m.runs.WithLabelValues(c.Name)
		e.m.written.WithLabelValues(c.Name)
		for _, r := range failureReasons {
			e.m.failures.WithLabelValues(c.Name, r)
		}
		if c.Kind == config.KindRandRead {
			e.m.readBytes.WithLabelValues(c.Name)
		}
		e.probes = append(e.probes, p)
	}
	return e
}

// budgetFor returns the filesystem's shared budget. The WAL probes on one
// filesystem share it, and it is the smallest daily_write_budget among them
// (the probe is load on a production disk: the strictest setting wins, and
// the result does not depend on which probe happened to set up first).
func (e *Engine) budgetFor(dev uint64, daily int64) *budget {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, ok := e.budgets[dev]
	if !ok {
		b = newBudget(daily)
		e.budgets[dev] = b
	}
	b.lower(daily)
	return b
}

// gateFor returns the device's gate, a one-slot semaphore.
func (e *Engine) gateFor(dev uint64) chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	g, ok := e.gates[dev]
	if !ok {
		g = make(chan struct{}, 1)
		e.gates[dev] = g
	}
	return g
}

// Run runs every probe until ctx is done, plus the stall watchdog.
func (e *Engine) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, p := range e.probes {
		wg.Add(1)
		go func() { defer wg.Done(); p.loop(ctx) }()
	}
	for _, c := range e.capacity {
		wg.Add(1)
		go func() { defer wg.Done(); c.loop(ctx) }()
	}
	go e.watchdog(ctx)
	<-ctx.Done()
	for _, p := range e.probes {
		p.stop.Store(true)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(shutdownGrace):
		// The kernel finishes a process's exit only when every thread
		// has left the kernel: a thread in an uninterruptible I/O keeps
		// the process, and with it the probe directory's lock, alive
		// until the disk answers. Say so, rather than "stopped" alone.
		for _, p := range e.probes {
			if age := p.fl.age(); age > 0 {
				e.log.Error("a probe I/O is still in flight (disk hung?): the process exits, and releases the probe directory's lock, only when the kernel returns it",
					"probe", p.cfg.Name, "path", p.cfg.Dir+p.cfg.Device, "in_flight", age.Round(time.Millisecond))
			}
		}
	}
}

// watchdog logs stall transitions; the stalled gauge itself is computed at
// scrape time from the in-flight clock, so it is exact even between ticks.
func (e *Engine) watchdog(ctx context.Context) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, p := range e.probes {
			age := p.fl.age()
			stalled := age > p.cfg.StallThreshold
			if stalled && !p.stalled {
				e.log.Error("probe I/O stalled: no new cycle starts on this target until it returns",
					"probe", p.cfg.Name, "path", p.cfg.Dir+p.cfg.Device, "in_flight", age.Round(time.Millisecond), "threshold", p.cfg.StallThreshold)
			} else if !stalled && p.stalled {
				e.log.Info("probe I/O returned, stall over", "probe", p.cfg.Name)
			}
			p.stalled = stalled
		}
	}
}

// Collect sends the probe series. It never waits on I/O.
func (e *Engine) Collect(ch chan<- prometheus.Metric) {
	for _, c := range e.m.vecs() {
		c.Collect(ch)
	}
	for _, p := range e.probes {
		age := p.fl.age()
		s := 0.0
		if age > p.cfg.StallThreshold {
			s = 1
		}
		ch <- prometheus.MustNewConstMetric(e.m.stalled, prometheus.GaugeValue, s, p.cfg.Name)
		ch <- prometheus.MustNewConstMetric(e.m.inflight, prometheus.GaugeValue, age.Seconds(), p.cfg.Name)
	}
}

// journalPerSync is what the budget charges an fdatasync beyond its data
// pages: a ceiling for filesystems that commit their journal on every
// fdatasync (ext4 writing into unwritten extents); ext4 with a preallocated
// segment writes less (docs/findings.md, "Write cost").
const journalPerSync = 8 << 10

// WALWriteCost is what the budget charges a WAL probe: the pages its
// appends dirty plus journalPerSync per fdatasync, per timed sample and
// per day at its interval and ops. The pages are the ones the
// written_bytes counter counts (go run ./bench soak checks that count
// against the kernel's /proc/PID/io).
func WALWriteCost(c config.Probe) (perSample, perDay float64) {
	bs := int64(c.BlockSize)
	// Appends repeat their page alignment every pageSize/gcd(bs, pageSize) ops.
	period := pageSize / gcd(bs, pageSize)
	var dirtied int64
	for i := int64(0); i < period; i++ {
		dirtied += pagesDirtied(i*bs, bs)
	}
	perOp := float64(dirtied)/float64(period) + journalPerSync
	perDay = perOp * float64(c.Ops) * (24 * time.Hour).Seconds() / c.Interval.Seconds()
	return perDay / c.SamplesPer(24*time.Hour), perDay
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// budget is a token bucket over estimated physical bytes per filesystem
// (dirtied pages + journalPerSync per fdatasync): the daily
// budget refills continuously, and at most one hour's worth can be saved
// up, so a restart loop cannot burst a day's writes.
type budget struct {
	mu     sync.Mutex
	daily  float64
	tokens float64
	last   time.Time
}

func newBudget(daily int64) *budget {
	return &budget{daily: float64(daily), tokens: float64(daily) / 24, last: time.Now()}
}

// lower sets the daily rate to daily if that is smaller.
func (b *budget) lower(daily int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := float64(daily); d < b.daily {
		b.refill()
		b.daily = d
		b.tokens = min(b.tokens, d/24)
	}
}

func (b *budget) refill() {
	now := time.Now()
	b.tokens += b.daily * now.Sub(b.last).Seconds() / 86400
	if max := b.daily / 24; b.tokens > max {
		b.tokens = max
	}
	b.last = now
}

func (b *budget) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	return b.tokens > 0
}

func (b *budget) spend(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	b.tokens -= float64(n)
}
