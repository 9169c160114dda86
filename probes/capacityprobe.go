package probes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
)

// DefaultCapacityProbeRates are a capacity probe's steps unless its rates
// say otherwise: every other step of check's list (the R5 numbers, ×1.6 a
// step) from 100 to 1,000,000 IOPS, so a daily sweep takes about 30 s on
// an SSD, and the bound is known within 60 %.
var DefaultCapacityProbeRates = func() []float64 {
	var rates []float64
	for i := 0; i < len(DefaultCapacityRates); i += 2 {
		rates = append(rates, DefaultCapacityRates[i])
	}
	return rates
}()

// capacityProbeTimeout bounds one sweep, the first one's layout of the
// working set included.
const capacityProbeTimeout = 10 * time.Minute

// capacityProbe is a capacity probe in the daemon: Capacity, check's
// sweep, on the probe's schedule. It exports its own series, never the
// probe_* ones: a daily sweep would read as "no data" and "failing" to
// the alerts on those.
type capacityProbe struct {
	cfg   config.Probe
	log   *slog.Logger
	m     *Metrics
	paths hostpath.Paths
	gate  func(key uint64) chan struct{}
	// sweeping is the engine's: one sweep at a time in the process, as
	// a sweep turns off the GC and raises GOMAXPROCS while it measures.
	sweeping chan struct{}
	failing  string
}

func (c *capacityProbe) loop(ctx context.Context) {
	onSchedule(ctx, c.cfg, func() { c.run(ctx) })
}

// run sweeps once and publishes the outcome. The sweep holds the device's
// gate from before its first write to after its files are removed: no
// other probe times an op while it loads the disk, so the WAL and read
// histograms, and the alerts on them, never see a sweep.
func (c *capacityProbe) run(ctx context.Context) {
	select {
	case c.sweeping <- struct{}{}:
		defer func() { <-c.sweeping }()
	case <-ctx.Done():
		return
	}
	rates := c.cfg.Rates
	if rates == nil {
		rates = DefaultCapacityProbeRates
	}
	res, err := Capacity(ctx, CapacityOptions{
		Dir: c.cfg.Dir, Pattern: c.cfg.Pattern, BlockSize: int64(c.cfg.BlockSize), WorkingSet: int64(c.cfg.WorkingSet),
		MinFree: int64(c.cfg.MinFree), WriteBudget: int64(c.cfg.WriteBudget), Rates: rates, MaxP99: c.cfg.MaxP99,
		Timeout: capacityProbeTimeout, StallThreshold: c.cfg.StallThreshold, KeepWorkingSet: true, Paths: c.paths,
		name: c.cfg.Name, log: c.log,
		hold: func(key uint64) (func(), error) {
			g := c.gate(key)
			select {
			case g <- struct{}{}:
				return func() { <-g }, nil
			case <-ctx.Done():
				return nil, ErrInterrupted
			}
		},
	})
	if ctx.Err() != nil {
		return // shutting down: the last figures stand
	}
	c.publish(res, err)
}

// publish exports a sweep's outcome. The IOPS is the last step that held,
// 0 when the first step broke the bound, and absent when the sweep took no
// step or measured no disk; partial says it is only a floor.
func (c *capacityProbe) publish(res *CapacityResult, err error) {
	name := c.cfg.Name
	if err == nil && res.Untrusted != "" {
		err = fmt.Errorf("%s: %w", res.Untrusted, ErrUntrusted)
	}
	if err == nil && len(res.Steps) == 0 && res.BudgetEnded {
		err = fmt.Errorf("write_budget %s is less than the first step may write", config.ByteSize(c.cfg.WriteBudget).Show())
	}
	c.m.capacityIOPS.DeletePartialMatch(prometheus.Labels{"probe": name})
	boundReached := res.Knee+1 < len(res.Steps)
	if len(res.Steps) > 0 && !errors.Is(err, ErrUntrusted) {
		iops := 0.0
		if res.Knee >= 0 {
			iops = res.Steps[res.Knee].AchievedIOPS
		}
		bound := strconv.FormatFloat(c.cfg.MaxP99.Seconds(), 'g', -1, 64)
		c.m.capacityIOPS.WithLabelValues(name, res.Device, res.Pattern, "0.99", bound).Set(iops)
	}
	partial, success := 0.0, 0.0
	if !boundReached {
		partial = 1
	}
	if err == nil {
		success = 1
	}
	c.m.capacityPartial.WithLabelValues(name).Set(partial)
	c.m.capacitySuccess.WithLabelValues(name).Set(success)
	c.m.capacityLastRun.WithLabelValues(name).Set(float64(time.Now().UnixNano()) / 1e9)
	if err != nil {
		if err.Error() != c.failing {
			c.log.Warn("capacity sweep failed", "probe", name, "steps", len(res.Steps), "err", err)
			c.failing = err.Error()
		}
		return
	}
	c.failing = ""
	at := "below the first step"
	if res.Knee >= 0 {
		at = fmt.Sprintf("%.0f IOPS", res.Steps[res.Knee].AchievedIOPS)
	}
	c.log.Info("capacity sweep done", "probe", name, "pattern", res.Pattern, "device", res.Device,
		"at_bound", at, "max_p99", c.cfg.MaxP99, "steps", len(res.Steps), "bound_reached", boundReached, "written", res.Written)
}
