package probes

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/testkit/testfs"
)

// walOn is a fast WAL probe for fault tests.
func walOn(dir string) config.Probe {
	return config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir,
		Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1, StallThreshold: 300 * time.Millisecond}
}

func TestEIOOnFdatasyncIsAFailureAndRecovers(t *testing.T) {
	m := testfs.Start(t, "")
	_, gather, _ := startEngine(t, walOn(m.Dir))
	gauge := func(name string, labels map[string]string) float64 {
		v, ok := value(gather()[name], labels)
		if !ok {
			return -1
		}
		return v.GetGauge().GetValue()
	}
	require.Eventually(t, func() bool {
		return gauge("diskcanary_probe_success", map[string]string{"probe": "wal"}) == 1
	}, 5*time.Second, 20*time.Millisecond, "a successful cycle")

	m.Do(t, "sync-error EIO")
	require.Eventually(t, func() bool {
		ok := failed(gather(), "wal", "io_error")
		return ok && gauge("diskcanary_probe_success", map[string]string{"probe": "wal"}) == 0
	}, 5*time.Second, 20*time.Millisecond, "an io_error failure")

	m.Do(t, "sync-error none")
	require.Eventually(t, func() bool {
		return gauge("diskcanary_probe_success", map[string]string{"probe": "wal"}) == 1
	}, 5*time.Second, 20*time.Millisecond, "recovery")
	w, ok := value(gather()["diskcanary_probe_target_warning"], map[string]string{"probe": "wal", "warning": "fuse"})
	require.True(t, ok, "a FUSE target is named")
	require.EqualValues(t, 1, w.GetGauge().GetValue())
}

// A flush that never returns is a result: stalled within the threshold,
// no new cycle on the stuck target, /metrics still fast, no goroutine or
// thread growth, and recovery when the flush returns.
func TestHungFdatasyncStallsAndRecovers(t *testing.T) {
	m := testfs.Start(t, "")
	e, gather, _ := startEngine(t, walOn(m.Dir))
	reg := prometheus.NewRegistry()
	reg.MustRegister(engineCollector{e})
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	gauge := func(name string) float64 {
		v, ok := value(gather()[name], map[string]string{"probe": "wal"})
		if !ok {
			return -1
		}
		if v.GetCounter() != nil {
			return v.GetCounter().GetValue()
		}
		return v.GetGauge().GetValue()
	}
	scrape := func() time.Duration {
		start := time.Now()
		resp, err := http.Get(srv.URL)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		return time.Since(start)
	}
	require.Eventually(t, func() bool { return gauge("diskcanary_probe_runs_total") >= 2 }, 5*time.Second, 20*time.Millisecond, "two cycles")
	scrape() // the baseline includes the keep-alive connection's goroutines
	goroutines, osThreads := runtime.NumGoroutine(), threads(t)

	m.Do(t, "hang")
	hungAt := time.Now()
	require.Eventually(t, func() bool {
		_, blocked, err := m.Control.Stats()
		return err == nil && blocked == 1
	}, 5*time.Second, 20*time.Millisecond, "a held flush")
	require.Eventually(t, func() bool { return gauge("diskcanary_probe_stalled") == 1 }, 3*time.Second, 20*time.Millisecond, "stalled=1")
	// The watchdog looks every 250 ms; the probe may be mid-cycle sleep
	// when the hang starts, so allow one interval and one watchdog tick.
	require.Less(t, time.Since(hungAt), 300*time.Millisecond+20*time.Millisecond+250*time.Millisecond+200*time.Millisecond,
		"stalled within the threshold")
	runs := gauge("diskcanary_probe_runs_total")
	// /metrics answers in milliseconds while the op is stuck.
	var lat []time.Duration
	for i := 0; i < 200; i++ {
		lat = append(lat, scrape())
	}
	slices.Sort(lat)
	p99 := lat[len(lat)*99/100]
	t.Logf("/metrics during the stall: p50 %v p99 %v", lat[len(lat)/2], p99)
	require.Less(t, p99, 100*time.Millisecond)

	// A garbage collection's stop-the-world must not wait for the stuck
	// op: it is in syscall state, not holding a P.
	gcDone := make(chan struct{})
	go func() { runtime.GC(); close(gcDone) }()
	select {
	case <-gcDone:
	case <-time.After(2 * time.Second):
		t.Fatal("runtime.GC blocked behind the hung fdatasync")
	}
	require.Equal(t, runs, gauge("diskcanary_probe_runs_total"), "no new cycle starts on a stuck target")
	// The goroutine above closes gcDone just before it exits, so the count
	// is given a moment to settle rather than read once; polled here, not
	// by require.Eventually, whose condition runs on a goroutine of its own.
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > goroutines && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), goroutines, "goroutines bounded by the baseline")
	require.LessOrEqual(t, threads(t), osThreads+2, "OS threads stay bounded (the stuck op holds one)")
	infl, ok := value(gather()["diskcanary_probe_inflight_seconds"], map[string]string{"probe": "wal"})
	require.True(t, ok)
	require.Greater(t, infl.GetGauge().GetValue(), 0.3)

	m.Do(t, "release")
	require.Eventually(t, func() bool {
		return gauge("diskcanary_probe_stalled") == 0 && gauge("diskcanary_probe_runs_total") > runs+1 &&
			gauge("diskcanary_probe_success") == 1
	}, 5*time.Second, 20*time.Millisecond, "recovery")
}

// Ground truth: d injected per fdatasync shows up as d, not more, not less.
func TestCheckReportsInjectedFdatasyncLatency(t *testing.T) {
	m := testfs.Start(t, "")
	for _, d := range []time.Duration{2 * time.Millisecond, 12 * time.Millisecond} {
		m.Do(t, "sync-delay "+d.String())
		res, err := Check(context.Background(), CheckOptions{Dir: m.Dir, Profile: ProfileEtcd,
			Samples: 200, BlockSize: 2300, MinFree: 1, Timeout: time.Minute})
		require.NoError(t, err)
		p50 := res.Latencies[len(res.Latencies)/2]
		t.Logf("injected %v: check p50 %v", d, p50)
		require.GreaterOrEqual(t, p50, d)
		// The FUSE round trip and timer overshoot add 0.2–0.5 ms (the upper
		// end under the race detector); a second fdatasync per op would add d.
		require.LessOrEqual(t, p50, d+time.Millisecond)
		require.Contains(t, strings.Join(res.Warnings, "\n"), "fuse")
	}
}

// A read that never returns stalls the read probe the same way.
func TestHungReadStallsAndRecovers(t *testing.T) {
	// Disk backing (not tmpfs): the read probe opens its working set with
	// O_DIRECT, which the backing filesystem must accept.
	m := testfs.Start(t, t.TempDir())
	_, gather, _ := startEngine(t, config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: m.Dir,
		Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1, WorkingSet: 1 << 20, StallThreshold: 300 * time.Millisecond})
	gauge := func(name string) float64 {
		v, ok := value(gather()[name], map[string]string{"probe": "rr"})
		if !ok {
			return -1
		}
		if v.GetCounter() != nil {
			return v.GetCounter().GetValue()
		}
		return v.GetGauge().GetValue()
	}
	require.Eventually(t, func() bool {
		return gauge("diskcanary_probe_runs_total") >= 2 && gauge("diskcanary_probe_success") == 1
	}, 10*time.Second, 20*time.Millisecond, "read cycles")
	m.Do(t, "hang-reads")
	require.Eventually(t, func() bool { return gauge("diskcanary_probe_stalled") == 1 }, 3*time.Second, 20*time.Millisecond, "stalled=1")
	runs := gauge("diskcanary_probe_runs_total")
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, runs, gauge("diskcanary_probe_runs_total"), "no new cycle on a stuck target")
	m.Do(t, "release")
	require.Eventually(t, func() bool {
		return gauge("diskcanary_probe_stalled") == 0 && gauge("diskcanary_probe_runs_total") > runs+1
	}, 5*time.Second, 20*time.Millisecond, "recovery")
}

// A filesystem that refuses O_DIRECT is named, and the read probe fails
// with a reason instead of quietly reading the page cache.
func TestODirectRefusedIsNamedAndFails(t *testing.T) {
	m := testfs.Start(t, t.TempDir())
	m.Do(t, "refuse-odirect")
	_, gather, _ := startEngine(t, config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: m.Dir,
		Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1, WorkingSet: 1 << 20})
	require.Eventually(t, func() bool {
		ok := failed(gather(), "rr", "odirect_unsupported")
		return ok
	}, 10*time.Second, 20*time.Millisecond, "odirect_unsupported failure")
	w, ok := value(gather()["diskcanary_probe_target_warning"], map[string]string{"probe": "rr", "warning": "odirect_refused"})
	require.True(t, ok)
	require.EqualValues(t, 1, w.GetGauge().GetValue())
	r, _ := value(gather()["diskcanary_probe_read_bytes_total"], map[string]string{"probe": "rr"})
	require.Zero(t, r.GetCounter().GetValue(), "no read was measured")
}

// Bursts on one device take turns, so a hung one holds the device: a read
// probe beside a hung WAL probe waits, is not itself stalled, and resumes
// with it.
func TestHungBurstHoldsItsDevice(t *testing.T) {
	// Disk backing: the read probe's working set needs O_DIRECT.
	m := testfs.Start(t, t.TempDir())
	_, gather, _ := startEngine(t, walOn(m.Dir), config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: m.Dir,
		Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1, WorkingSet: 1 << 20, StallThreshold: 300 * time.Millisecond})
	gauge := func(probe, name string) float64 {
		v, ok := value(gather()[name], map[string]string{"probe": probe})
		if !ok {
			return -1
		}
		if v.GetCounter() != nil {
			return v.GetCounter().GetValue()
		}
		return v.GetGauge().GetValue()
	}
	runs := func(probe string) float64 { return gauge(probe, "diskcanary_probe_runs_total") }
	require.Eventually(t, func() bool {
		return runs("wal") >= 2 && runs("rr") >= 2 &&
			gauge("wal", "diskcanary_probe_success") == 1 && gauge("rr", "diskcanary_probe_success") == 1
	}, 10*time.Second, 20*time.Millisecond, "both probes succeeding")
	m.Do(t, "hang")
	require.Eventually(t, func() bool { return gauge("wal", "diskcanary_probe_stalled") == 1 }, 3*time.Second, 20*time.Millisecond, "wal stalled")
	rrRuns := runs("rr")
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, rrRuns, runs("rr"), "the read probe waits for the device")
	require.Zero(t, gauge("rr", "diskcanary_probe_stalled"), "waiting is not stalling")
	require.Zero(t, gauge("rr", "diskcanary_probe_inflight_seconds"), "no read in flight while it waits")
	m.Do(t, "release")
	require.Eventually(t, func() bool {
		return gauge("wal", "diskcanary_probe_stalled") == 0 && runs("rr") > rrRuns+1 && gauge("rr", "diskcanary_probe_success") == 1
	}, 5*time.Second, 20*time.Millisecond, "both resume")
}
