package probes

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

func TestDefaultCapacityProbeRatesAreR5(t *testing.T) {
	r := DefaultCapacityProbeRates
	require.Len(t, r, 21)
	require.Equal(t, []float64{100, 160, 250, 400, 630, 1000}, r[:6])
	require.Equal(t, float64(1_000_000), r[20])
}

// A capacity probe and a WAL probe on one directory: the sweep holds the
// device, so no WAL cycle runs while it measures (no fdatasync sample of
// the alerts' histogram is taken under the sweep's load), and the sweep's
// figures are exported with the capacity series alone, never probe_*.
func TestCapacityProbeHoldsTheDeviceAndExportsItsSweep(t *testing.T) {
	testkit.SkipUnderRace(t)
	dir := t.TempDir()
	backToBack := time.Duration(0)
	e, gather, stop := startEngine(t,
		config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir, Interval: time.Millisecond, Jitter: 0.01, Ops: 5, Gap: &backToBack, MinFree: 1, DailyWriteBudget: 1 << 40},
		// A bound of a second: on any disk both steps hold, so the
		// figure is the second step's achieved rate and only a floor.
		config.Probe{Name: "cap", Kind: config.KindCapacity, Dir: dir, Interval: time.Hour, Jitter: 0.0001, Rates: []float64{1000, 2000},
			MaxP99: time.Second, WorkingSet: 4 << 20, MinFree: 1})
	runs := func() float64 {
		m, _ := value(gather()["diskcanary_probe_runs_total"], map[string]string{"probe": "wal"})
		return m.GetCounter().GetValue()
	}
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dir, ".diskcanary-cap-readset"))
		return err == nil
	}, 20*time.Second, 5*time.Millisecond, "the sweep's working set laid out")
	// The steps take 2 s at the least; the first 1.5 s after the layout
	// are inside the sweep whatever the machine's load.
	time.Sleep(100 * time.Millisecond)
	before := runs()
	require.Positive(t, before, "the WAL probe ran before the sweep")
	for end := time.Now().Add(1400 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		require.Equal(t, before, runs(), "a WAL cycle ran during the sweep")
	}
	require.Eventually(t, func() bool {
		_, ok := value(gather()["diskcanary_capacity_last_run_timestamp_seconds"], map[string]string{"probe": "cap"})
		return ok
	}, 30*time.Second, 20*time.Millisecond, "the sweep ended")
	require.Eventually(t, func() bool { return runs() > before }, 10*time.Second, 20*time.Millisecond, "the WAL probe runs again after the sweep")
	mf := gather()
	stop()

	iops, ok := value(mf["diskcanary_capacity_iops"], map[string]string{"probe": "cap", "pattern": "randread", "percentile": "0.99", "bound": "1"})
	require.True(t, ok, "%v", mf["diskcanary_capacity_iops"])
	require.Len(t, mf["diskcanary_capacity_iops"], 1)
	require.GreaterOrEqual(t, iops.GetGauge().GetValue(), 1800.0, "the second step held: at least 90 %% of 2000")
	require.LessOrEqual(t, iops.GetGauge().GetValue(), 2000.0)
	for name, want := range map[string]float64{"diskcanary_capacity_success": 1, "diskcanary_capacity_partial": 1} {
		m, ok := value(mf[name], map[string]string{"probe": "cap"})
		require.True(t, ok, name)
		require.Equal(t, want, m.GetGauge().GetValue(), name)
	}
	for _, name := range []string{"diskcanary_probe_success", "diskcanary_probe_runs_total", "diskcanary_probe_last_run_timestamp_seconds", "diskcanary_probe_stalled"} {
		_, ok := value(mf[name], map[string]string{"probe": "cap"})
		require.False(t, ok, "%s has no series for a capacity probe", name)
	}
	require.Len(t, e.capacity, 1)
	_, err := os.Stat(filepath.Join(dir, ".diskcanary-cap-readset"))
	require.NoError(t, err, "the working set is kept for the next sweep")
}

// What each outcome of a sweep exports.
func TestCapacityProbePublish(t *testing.T) {
	c := &capacityProbe{cfg: config.Probe{Name: "cap", MaxP99: 10 * time.Millisecond, WriteBudget: 1 << 20},
		log: slog.New(slog.DiscardHandler), m: NewMetrics()}
	step := func(achieved float64, held bool) CapacityStep {
		return CapacityStep{AskedIOPS: achieved, AchievedIOPS: achieved, OverBound: !held}
	}
	iops := func() (float64, int) {
		n := testutil.CollectAndCount(c.m.capacityIOPS)
		if n == 0 {
			return -1, 0
		}
		return testutil.ToFloat64(c.m.capacityIOPS.WithLabelValues("cap", "vdb", "randread", "0.99", "0.01")), n
	}
	gauge := func(g *prometheus.GaugeVec) float64 { return testutil.ToFloat64(g.WithLabelValues("cap")) }
	for _, tc := range []struct {
		name             string
		res              CapacityResult
		err              error
		iops             float64 // -1: no series
		partial, success float64
	}{
		{"the bound found", CapacityResult{Steps: []CapacityStep{step(400, true), step(480, true), step(520, false)}, Knee: 1}, nil, 480, 0, 1},
		{"the first step broke the bound", CapacityResult{Steps: []CapacityStep{step(90, false)}, Knee: -1}, nil, 0, 0, 1},
		{"the rates ran out", CapacityResult{Steps: []CapacityStep{step(400, true)}, Knee: 0}, nil, 400, 1, 1},
		{"the write budget ended it", CapacityResult{Steps: []CapacityStep{step(400, true)}, Knee: 0, BudgetEnded: true}, nil, 400, 1, 1},
		{"the budget is under the first step", CapacityResult{Knee: -1, BudgetEnded: true}, nil, -1, 1, 0},
		{"timed out after a step", CapacityResult{Steps: []CapacityStep{step(400, true)}, Knee: 0, Partial: true}, ErrTimeout, 400, 1, 0},
		{"not a disk", CapacityResult{Steps: []CapacityStep{step(400, true), step(900, false)}, Knee: 0, Untrusted: "overlay"}, nil, -1, 0, 0},
		{"failed before a step", CapacityResult{Knee: -1}, errors.New("open: EACCES"), -1, 1, 0},
	} {
		tc.res.Device, tc.res.Pattern = "vdb", "randread"
		c.publish(&tc.res, tc.err)
		got, n := iops()
		require.Equal(t, tc.iops, got, tc.name)
		require.LessOrEqual(t, n, 1, tc.name)
		require.Equal(t, tc.partial, gauge(c.m.capacityPartial), tc.name)
		require.Equal(t, tc.success, gauge(c.m.capacitySuccess), tc.name)
		require.Positive(t, gauge(c.m.capacityLastRun), tc.name)
	}
}
