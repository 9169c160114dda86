package probes

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/diskcanary/diskcanary/internal/blockdev"
	"github.com/diskcanary/diskcanary/internal/config"
)

// prober is one probe kind: how it opens on a site, lays out what it needs
// (setup I/O, under the device's gate) and runs a burst of timed ops. The
// daemon's loop and check drive the same probers.
type prober interface {
	open(s *site) error
	// prepare returns the bytes it wrote; it gives up between writes
	// once stop is set.
	prepare(fl *inflight, stop *atomic.Bool) (int64, error)
	burst(r *runner, ops int) (burstResult, error)
	close()
}

// kinds builds a kind's prober from its config; file is the name of the
// kind's file in the probe directory.
var kinds = map[string]func(c config.Probe, file string) prober{
	config.KindWAL:      func(c config.Probe, file string) prober { return newWALProbe(c, file) },
	config.KindRandRead: func(c config.Probe, file string) prober { return newReadProbe(c, file) },
}

// fileSuffix names each kind's file: .diskcanary-<probe>-<suffix>.
func fileSuffix(c config.Probe) string {
	switch {
	case c.Kind == config.KindRandRead:
		return "readset"
	case c.Layout == config.LayoutOverwrite:
		return "overwrite"
	}
	return "wal"
}

// probe is one configured probe in the daemon: the kind-agnostic loop that
// owns the schedule, the device gate, the write budget and the metrics.
// Only its own goroutine touches its fields, except fl and stop, which the
// scrape and shutdown read.
type probe struct {
	cfg    config.Probe
	log    *slog.Logger
	m      *Metrics
	procfs string
	sysfs  string
	fl     *inflight
	stop   atomic.Bool
	budget func(fsDev uint64) *budget
	gate   func(key uint64) chan struct{}

	// owned by the probe's goroutine
	done         <-chan struct{} // closed at shutdown
	kind         prober          // nil until opened
	site         *site
	devGate      chan struct{} // held for a whole cycle: probes never time each other
	prepared     bool
	obsWrite     prometheus.Observer
	obsSync      prometheus.Observer
	obsRead      prometheus.Observer
	stalled      bool // watchdog's last verdict, for logging transitions
	flushFlagged bool
	// failing is the last failure's error ("" when the last cycle
	// succeeded): a failure is logged when its error changes, not every
	// cycle, so a read-only filesystem is a line, not 8,640 a day.
	failing string
}

func (p *probe) recordWAL(w, s time.Duration) {
	p.obsWrite.Observe(w.Seconds())
	p.obsSync.Observe(s.Seconds())
}

func (p *probe) recordRead(d time.Duration) { p.obsRead.Observe(d.Seconds()) }

func (p *probe) file() string { return filePrefix + p.cfg.Name + "-" + fileSuffix(p.cfg) }

// loop runs cycles until ctx is done. Setup is retried every interval, so a
// directory that appears later, or a remount read-write, recovers by itself.
func (p *probe) loop(ctx context.Context) {
	p.done = ctx.Done()
	// The loop keeps one OS thread for its life, as fio's job does: a
	// goroutine that moves between threads reads slower than fio
	// (go run ./bench probes-vs-fio). It runs at normal priority, as etcd
	// does.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer p.teardown()
	onSchedule(ctx, p.cfg, p.runCycle)
}

// onSchedule runs cycle every cfg.Interval, each wait jittered by
// ±cfg.Jitter, until ctx ends. A random first delay within the jitter
// window spreads a fleet's probes, but metrics appear soon after start.
func onSchedule(ctx context.Context, cfg config.Probe, cycle func()) {
	wait := time.Duration(rand.Float64() * cfg.Jitter * float64(cfg.Interval))
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		cycle()
		j := 1 + cfg.Jitter*(2*rand.Float64()-1)
		wait = time.Duration(float64(cfg.Interval) * j)
	}
}

func (p *probe) runCycle() {
	err := p.cycle()
	name := p.cfg.Name
	p.m.runs.WithLabelValues(name).Inc()
	p.m.lastRun.WithLabelValues(name).Set(float64(time.Now().UnixNano()) / 1e9)
	if err != nil {
		reason := reasonOf(err)
		p.m.failures.WithLabelValues(name, reason).Inc()
		p.m.success.WithLabelValues(name).Set(0)
		switch {
		case reason == reasonInterrupted:
		case err.Error() != p.failing:
			p.log.Warn("probe cycle failed", "probe", name, "reason", reason, "err", err)
			p.failing = err.Error()
		default:
			p.log.Debug("probe cycle failed again", "probe", name, "reason", reason, "err", err)
		}
		// Re-resolve the target next time: the disk may have been remounted.
		if !errors.Is(err, errBudget) && !errors.Is(err, errLowSpace) {
			p.teardown()
		}
		return
	}
	if p.failing != "" {
		p.log.Info("probe cycle succeeded again", "probe", name)
		p.failing = ""
	}
	p.m.success.WithLabelValues(name).Set(1)
}

// cycle opens the target if needed, then, holding the device's gate, lays
// it out if needed and runs one burst: no probe ever times another's I/O,
// setup I/O included.
func (p *probe) cycle() error {
	if p.kind == nil {
		if err := p.open(); err != nil {
			return err
		}
	} else if p.site.dir != nil {
		// A directory deleted or renamed under the probe fails this cycle
		// (reason "missing"); runCycle's teardown releases its files and
		// lock, and the next cycle opens the path afresh, creating it as
		// at startup.
		if err := p.site.dir.gone(); err != nil {
			return err
		}
	}
	select {
	case p.devGate <- struct{}{}:
		defer func() { <-p.devGate }()
	case <-p.done:
		return errInterrupted
	}
	if !p.prepared {
		written, err := p.kind.prepare(p.fl, &p.stop)
		p.m.written.WithLabelValues(p.cfg.Name).Add(float64(written))
		if err != nil {
			return err
		}
		p.prepared = true
	}
	res, err := p.kind.burst(&runner{rec: p, fl: p.fl, stop: &p.stop}, p.cfg.Ops)
	p.m.written.WithLabelValues(p.cfg.Name).Add(float64(res.written))
	if res.read > 0 {
		p.m.readBytes.WithLabelValues(p.cfg.Name).Add(float64(res.read))
	}
	if err != nil {
		return err
	}
	if p.cfg.Kind == config.KindWAL {
		p.flagFlush(res.flushLies)
	}
	return nil
}

// open opens the site and the kind on it, and publishes what it measures.
func (p *probe) open() error {
	p.teardown()
	var s *site
	var err error
	if p.cfg.Device != "" {
		s, err = openDeviceSite(p.cfg.Device, int64(p.cfg.BlockSize), p.procfs, p.sysfs, p.log)
	} else {
		s, err = openDirSite(p.cfg.Dir, p.procfs, p.sysfs, p.log)
	}
	if err != nil {
		return err
	}
	k := kinds[p.cfg.Kind](p.cfg, p.file())
	if err := k.open(s); err != nil {
		k.close()
		s.close()
		return err
	}
	if w, ok := k.(*walProbe); ok {
		// Only WAL bursts spend the budget; the read working set is
		// written once and then only read.
		w.bud = p.budget(s.fsDev)
	}
	p.site, p.kind = s, k
	p.devGate = p.gate(s.gateKey)
	t := s.backing
	switch p.cfg.Kind {
	case config.KindWAL:
		p.obsWrite = p.m.write.WithLabelValues(p.cfg.Name, t.Path, t.Device)
		p.obsSync = p.m.fdatasync.WithLabelValues(p.cfg.Name, t.Path, t.Device)
	case config.KindRandRead:
		p.obsRead = p.m.read.WithLabelValues(p.cfg.Name, t.Path, t.Device)
	}
	p.publishTarget()
	return nil
}

func (p *probe) flagFlush(lying bool) {
	v := 0.0
	if lying {
		v = 1
	}
	if lying && !p.flushFlagged {
		p.log.Warn("fdatasync is not reaching the device: results describe a cache, not the disk",
			"probe", p.cfg.Name, "path", p.cfg.Dir, "device", p.site.backing.Device)
	}
	p.flushFlagged = lying
	p.m.warning.WithLabelValues(p.cfg.Name, "flush_not_reaching_device").Set(v)
}

// publishEtcdDataDir exports the device under the etcd data directory the
// probe stands in for, resolved each time the probe (re)opens its target.
func (p *probe) publishEtcdDataDir() {
	if p.cfg.EtcdDataDir == "" {
		return
	}
	p.m.etcdDir.DeletePartialMatch(prometheus.Labels{"probe": p.cfg.Name})
	e, err := blockdev.Resolve(p.cfg.EtcdDataDir, p.site.procfs, p.site.sysfs)
	if err != nil || e.Device == "" {
		p.log.Warn("cannot resolve the device under etcd's data directory: the canary cannot be checked against it",
			"probe", p.cfg.Name, "etcd_data_dir", p.cfg.EtcdDataDir, "err", err)
		e.Device = ""
	} else if e.Device != p.site.backing.Device {
		p.log.Warn("the WAL probe measures another disk than etcd's data directory is on",
			"probe", p.cfg.Name, "device", p.site.backing.Device, "etcd_data_dir", p.cfg.EtcdDataDir, "etcd_device", e.Device)
	}
	p.m.etcdDir.WithLabelValues(p.cfg.Name, p.cfg.EtcdDataDir, e.Device).Set(1)
}

// publishTarget exports target_info and the untrusted-filesystem warnings.
func (p *probe) publishTarget() {
	t := p.site.backing
	p.m.targetInfo.DeletePartialMatch(prometheus.Labels{"probe": p.cfg.Name})
	gap := ""
	if p.cfg.Gap != nil {
		gap = strconv.FormatFloat(p.cfg.Gap.Seconds(), 'g', -1, 64)
	}
	p.m.targetInfo.WithLabelValues(p.cfg.Name, p.cfg.Kind, p.cfg.Layout, gap, t.Path, t.Device, t.FSType, t.Mountpoint).Set(1)
	p.publishEtcdDataDir()
	if p.site.dir == nil {
		return
	}
	for _, w := range fsWarnings() {
		p.m.warning.WithLabelValues(p.cfg.Name, w).Set(0)
	}
	if w, why := p.site.untrusted(); w != "" {
		p.m.warning.WithLabelValues(p.cfg.Name, w).Set(1)
		p.log.Warn("probe directory is on a filesystem that does not tell the truth about disk latency",
			"probe", p.cfg.Name, "path", t.Path, "fstype", t.FSType, "warning", w, "why", why)
	}
	if r, ok := p.kind.(*readProbe); ok {
		v := 0.0
		if r.odirectRefused {
			v = 1
			p.log.Warn("filesystem refuses O_DIRECT: reads cannot bypass the page cache", "probe", p.cfg.Name, "path", p.cfg.Dir)
		}
		p.m.warning.WithLabelValues(p.cfg.Name, "odirect_refused").Set(v)
	}
}

func (p *probe) teardown() {
	if p.kind != nil {
		p.kind.close()
		p.kind = nil
	}
	p.site.close()
	p.site = nil
	p.prepared = false
}

func fillRandom(b []byte) {
	var seed [32]byte
	for i := range seed {
		seed[i] = byte(rand.Uint32())
	}
	_, _ = rand.NewChaCha8(seed).Read(b)
}
