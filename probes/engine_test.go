package probes

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/buckets"
	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// engineCollector adapts an Engine to prometheus.Collector for tests.
type engineCollector struct{ e *Engine }

func (c engineCollector) Describe(chan<- *prometheus.Desc)    {}
func (c engineCollector) Collect(ch chan<- prometheus.Metric) { c.e.Collect(ch) }

// startEngine runs probes until the test ends and returns a gather func.
func startEngine(t *testing.T, probes ...config.Probe) (*Engine, func() map[string][]*dto.Metric, context.CancelFunc) {
	t.Helper()
	for i := range probes {
		probes[i].ApplyProbeDefaults()
	}
	e := NewEngine(probes, hostpath.Paths{}, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	reg := prometheus.NewRegistry()
	reg.MustRegister(engineCollector{e})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	gather := func() map[string][]*dto.Metric {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		out := map[string][]*dto.Metric{}
		for _, mf := range mfs {
			out[mf.GetName()] = mf.GetMetric()
		}
		return out
	}
	return e, gather, func() { cancel(); <-done }
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// value finds the metric whose labels include all of want.
// failed reports whether probe has failed for reason at least once: every
// reason is exported at 0 from the start, so the series being there says
// nothing.
func failed(mf map[string][]*dto.Metric, probe, reason string) bool {
	m, ok := value(mf["diskcanary_probe_failures_total"], map[string]string{"probe": probe, "reason": reason})
	return ok && m.GetCounter().GetValue() >= 1
}

func value(ms []*dto.Metric, want map[string]string) (*dto.Metric, bool) {
next:
	for _, m := range ms {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

// The append layout is etcd's: one preallocated 64 MB segment, kept open
// across bursts (appends continue where the last burst stopped), removed
// at shutdown; each burst's first op primes the path and is not timed.
func TestWALProbeAppendLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "canary")
	gap := time.Millisecond
	_, gather, stop := startEngine(t, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir,
		Interval: 30 * time.Millisecond, Ops: 20, Gap: &gap, MinFree: 1})
	require.Eventually(t, func() bool {
		m, ok := value(gather()["diskcanary_probe_runs_total"], map[string]string{"probe": "wal"})
		return ok && m.GetCounter().GetValue() >= 3
	}, 10*time.Second, 20*time.Millisecond, "3 runs")
	st, err := os.Stat(filepath.Join(dir, ".diskcanary-wal-wal"))
	require.NoError(t, err, "the segment stays between bursts")
	require.EqualValues(t, 64_000_000, st.Size(), "preallocated like etcd's 64 MB segment")
	require.GreaterOrEqual(t, st.Sys().(*syscall.Stat_t).Blocks*512, int64(64_000_000), "allocated, not sparse")
	stop()
	mf := gather()
	succ, _ := value(mf["diskcanary_probe_success"], map[string]string{"probe": "wal"})
	require.EqualValues(t, 1, succ.GetGauge().GetValue())
	h, ok := value(mf["diskcanary_fdatasync_duration_seconds"], map[string]string{"probe": "wal"})
	require.True(t, ok)
	n := h.GetHistogram().GetSampleCount()
	require.GreaterOrEqual(t, n, uint64(3*19))
	require.Zero(t, n%19, "19 timed fdatasyncs per burst of ops=20: the first primes (shutdown stops between bursts here)")
	require.Len(t, h.GetHistogram().GetBucket(), len(buckets.Latency), "exactly the classic buckets")
	w, _ := value(mf["diskcanary_write_duration_seconds"], map[string]string{"probe": "wal"})
	require.Equal(t, n, w.GetHistogram().GetSampleCount(), "one write timed per fdatasync")
	// Bursts append at 0, 46,000, 92,000 …: 20 sequential 2300-byte writes
	// each, every one dirtying the 1 or 2 pages it touches (the fdatasync
	// before cleaned them). So a burst dirties 20 pages plus one for each
	// 4096-byte page boundary a write crosses (no write starts on one:
	// 2300 and 4096 meet first at 2,355,200). Burst 1, [0, 46,000), holds
	// the 11 boundaries 4,096 … 45,056: 20 + 11 = 31 pages = 126,976
	// bytes; bursts 2-4 and 6-8 hold 11 as well; burst 5, [184,000,
	// 230,000), holds 12 (184,320 … 229,376): 32 pages = 131,072 bytes.
	cumulative := map[uint64]float64{1: 126_976, 2: 253_952, 3: 380_928, 4: 507_904, 5: 638_976, 6: 765_952, 7: 892_928, 8: 1_019_904}
	written, _ := value(mf["diskcanary_probe_written_bytes_total"], map[string]string{"probe": "wal"})
	want, ok := cumulative[n/19]
	require.True(t, ok, "%d bursts: more than the table holds", n/19)
	require.Equal(t, want, written.GetCounter().GetValue())
	info, ok := value(mf["diskcanary_probe_target_info"], map[string]string{"probe": "wal", "path": dir})
	require.True(t, ok)
	labels := map[string]string{}
	for _, l := range info.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	require.NotEmpty(t, labels["fstype"])
	require.Equal(t, "append", labels["layout"])
	require.Equal(t, "0.001", labels["gap_seconds"], "the pacing is labelled")
	// The segment is removed at shutdown.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// Ops are paced: gap passes between one op's end and the next one's start,
// so a burst of 6 (the priming op and 5 timed) with a 40 ms gap takes at
// least 200 ms.
// TestWALProbePacesOps times the schedule, not the disk: on tmpfs an
// fdatasync costs nothing, so a disk busy with other tests' I/O cannot
// push the unpaced burst past its bound.
func TestWALProbePacesOps(t *testing.T) {
	for _, tc := range []struct {
		gap      time.Duration
		min, max time.Duration
	}{
		{40 * time.Millisecond, 200 * time.Millisecond, 2 * time.Second},
		{0, 0, 150 * time.Millisecond},
	} {
		gap := tc.gap
		p := readyProbe(t, config.Probe{Name: "paced", Kind: config.KindWAL, Dir: memDir(t), Ops: 6, Gap: &gap, MinFree: 1})
		p.obsWrite, p.obsSync = p.m.write.WithLabelValues("paced", "", ""), p.m.fdatasync.WithLabelValues("paced", "", "")
		start := time.Now()
		_, err := p.kind.burst(daemonRunner(p), 6)
		took := time.Since(start)
		require.NoError(t, err)
		require.GreaterOrEqual(t, took, tc.min, "gap %v", gap)
		require.Less(t, took, tc.max, "gap %v", gap)
	}
}

func TestWALProbeOverwriteLayout(t *testing.T) {
	dir := t.TempDir()
	_, gather, stop := startEngine(t, config.Probe{Name: "ow", Kind: config.KindWAL, Dir: dir, Layout: config.LayoutOverwrite,
		Interval: 20 * time.Millisecond, Ops: 10, MinFree: 1})
	require.Eventually(t, func() bool {
		m, ok := value(gather()["diskcanary_fdatasync_duration_seconds"], map[string]string{"probe": "ow"})
		return ok && m.GetHistogram().GetSampleCount() >= 20
	}, 10*time.Second, 20*time.Millisecond, "2 runs")
	stop()
	st, err := os.Stat(filepath.Join(dir, ".diskcanary-ow-overwrite"))
	require.NoError(t, err, "the overwrite file is kept")
	require.EqualValues(t, 10*2300, st.Size())
	info, ok := value(gather()["diskcanary_probe_target_info"], map[string]string{"probe": "ow", "layout": "overwrite"})
	require.True(t, ok, "the overwrite layout is labelled")
	_ = info
}

func TestRandReadProbeKeepsWorkingSet(t *testing.T) {
	dir := t.TempDir()
	p := config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: dir, WorkingSet: 8 << 20,
		Interval: 20 * time.Millisecond, Ops: 50, MinFree: 1}
	_, gather, stop := startEngine(t, p)
	require.Eventually(t, func() bool {
		m, ok := value(gather()["diskcanary_read_duration_seconds"], map[string]string{"probe": "rr"})
		return ok && m.GetHistogram().GetSampleCount() >= 100
	}, 10*time.Second, 20*time.Millisecond, "100 reads")
	stop()
	mf := gather()
	h, _ := value(mf["diskcanary_read_duration_seconds"], map[string]string{"probe": "rr"})
	rb, _ := value(mf["diskcanary_probe_read_bytes_total"], map[string]string{"probe": "rr"})
	require.EqualValues(t, h.GetHistogram().GetSampleCount()*4096, rb.GetCounter().GetValue())
	wb, _ := value(mf["diskcanary_probe_written_bytes_total"], map[string]string{"probe": "rr"})
	require.EqualValues(t, 8<<20, wb.GetCounter().GetValue(), "the working set is written once")

	path := filepath.Join(dir, ".diskcanary-rr-readset")
	var st unix.Stat_t
	require.NoError(t, unix.Stat(path, &st))
	require.GreaterOrEqual(t, st.Blocks*512, int64(8<<20), "fully allocated, not sparse")
	before := st.Mtim

	// A restart recognises the working set and does not rewrite it.
	_, gather2, stop2 := startEngine(t, p)
	require.Eventually(t, func() bool {
		m, ok := value(gather2()["diskcanary_read_duration_seconds"], map[string]string{"probe": "rr"})
		return ok && m.GetHistogram().GetSampleCount() >= 50
	}, 10*time.Second, 20*time.Millisecond, "reads after restart")
	stop2()
	wb2, _ := value(gather2()["diskcanary_probe_written_bytes_total"], map[string]string{"probe": "rr"})
	require.Zero(t, wb2.GetCounter().GetValue())
	require.NoError(t, unix.Stat(path, &st))
	require.Equal(t, before, st.Mtim)
}

func TestReadsetRejectsSparseAndForeignFiles(t *testing.T) {
	d, err := openProbeDir(t.TempDir())
	require.NoError(t, err)
	defer d.close()
	const size = 1 << 20
	n, err := d.writeReadset("rs", size, newInflight(), nil)
	require.NoError(t, err)
	require.EqualValues(t, size, n)
	require.True(t, d.readsetValid("rs", size))
	require.False(t, d.readsetValid("rs", 2*size), "a different size is rewritten")

	// Same header and size, but sparse: never-written regions read back
	// zeros fast, so it must not count as a working set.
	hdr := make([]byte, readsetHeader)
	copy(hdr, readsetMagic+"1048576\n")
	sparse := filepath.Join(d.path, "sparse")
	require.NoError(t, os.WriteFile(sparse, hdr, 0o600))
	require.NoError(t, os.Truncate(sparse, size))
	require.False(t, d.readsetValid("sparse", size))

	foreign := filepath.Join(d.path, "foreign")
	require.NoError(t, os.WriteFile(foreign, make([]byte, size), 0o600))
	require.False(t, d.readsetValid("foreign", size))

	// A symlink is never followed.
	require.NoError(t, os.Symlink(filepath.Join(d.path, "rs"), filepath.Join(d.path, "link")))
	require.False(t, d.readsetValid("link", size))
}

// A second daemon (another process) is refused the probe directory; the
// probes of one daemon share it.
func TestProbeDirLockedAgainstSecondDaemon(t *testing.T) {
	if testkit.InChild(t) {
		_, err := openProbeDir(os.Getenv("DISKCANARY_LOCK_DIR"))
		require.ErrorIs(t, err, errLocked)
		t.Log(err)
		return
	}
	dir := t.TempDir()
	a, err := openProbeDir(dir)
	require.NoError(t, err)
	defer a.close()
	b, err := openProbeDir(dir) // same process: probes of one daemon share it
	require.NoError(t, err)
	b.close()
	out, err := testkit.Reexec(t, t.Name(), "DISKCANARY_LOCK_DIR="+dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "locked by another diskcanary")
}

func TestSymlinkProbeDirRefused(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	require.NoError(t, os.Mkdir(real, 0o700))
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(real, link))
	_, err := openProbeDir(link)
	require.ErrorIs(t, err, errUnsafe)
	require.Equal(t, reasonUnsafe, reasonOf(err))
}

func TestMissingParentIsAFailureNotACreation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not-mounted", "canary")
	_, gather, stop := startEngine(t, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir,
		Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1})
	require.Eventually(t, func() bool {
		ok := failed(gather(), "wal", "missing")
		return ok
	}, 5*time.Second, 20*time.Millisecond, "a failure")
	stop()
	_, err := os.Stat(filepath.Dir(dir))
	require.ErrorIs(t, err, os.ErrNotExist, "missing parents are never created")
	succ, _ := value(gather()["diskcanary_probe_success"], map[string]string{"probe": "wal"})
	require.Zero(t, succ.GetGauge().GetValue())
}

func TestLowSpaceFloor(t *testing.T) {
	dir := t.TempDir()
	_, gather, stop := startEngine(t, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir,
		Interval: 20 * time.Millisecond, Ops: 5, MinFree: config.ByteSize(1 << 62)})
	require.Eventually(t, func() bool {
		ok := failed(gather(), "wal", "low_space")
		return ok
	}, 5*time.Second, 20*time.Millisecond, "low_space failure")
	stop()
	h, ok := value(gather()["diskcanary_fdatasync_duration_seconds"], map[string]string{"probe": "wal"})
	require.True(t, !ok || h.GetHistogram().GetSampleCount() == 0, "nothing written below the floor")
}

func TestBudgetExhaustedSkipsBursts(t *testing.T) {
	dir := t.TempDir()
	// 24 × 100 KB a day allows ~100 KB per hour: the first burst fits,
	// the next ones do not.
	_, gather, stop := startEngine(t, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir,
		Interval: 20 * time.Millisecond, Ops: 10, MinFree: 1, DailyWriteBudget: 24 * 100_000})
	require.Eventually(t, func() bool {
		ok := failed(gather(), "wal", "budget_exhausted")
		return ok
	}, 5*time.Second, 20*time.Millisecond, "budget_exhausted")
	stop()
	h, _ := value(gather()["diskcanary_fdatasync_duration_seconds"], map[string]string{"probe": "wal"})
	require.LessOrEqual(t, h.GetHistogram().GetSampleCount(), uint64(10*((100_000/(10*8192+6*4096))+1)))
}

// A read probe on the same filesystem does not lend the WAL probe its
// (default, larger) budget, whichever sets up first; two WAL probes share
// the smaller of their budgets.
func TestBudgetIsTheFilesystemsSmallest(t *testing.T) {
	small := config.ByteSize(24 * 100_000)
	for _, order := range []string{"read first", "wal first"} {
		t.Run(order, func(t *testing.T) {
			dir := t.TempDir()
			rr := config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: dir, WorkingSet: 1 << 20,
				Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1}
			big := config.Probe{Name: "big", Kind: config.KindWAL, Dir: dir,
				Interval: 20 * time.Millisecond, Ops: 10, MinFree: 1, DailyWriteBudget: 1 << 40}
			wal := config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir,
				Interval: 20 * time.Millisecond, Ops: 10, MinFree: 1, DailyWriteBudget: small}
			ps := []config.Probe{rr, big, wal}
			if order == "wal first" {
				ps = []config.Probe{wal, big, rr}
			}
			_, gather, stop := startEngine(t, ps...)
			for _, name := range []string{"wal", "big"} {
				require.Eventually(t, func() bool {
					ok := failed(gather(), name, "budget_exhausted")
					return ok
				}, 5*time.Second, 20*time.Millisecond, name+" budget_exhausted")
			}
			stop()
		})
	}
}

// Two probes on one device take turns: a burst never overlaps another's, so
// neither measures the other's I/O.
func TestProbesOnOneDeviceNeverOverlap(t *testing.T) {
	dir := t.TempDir()
	backToBack := time.Duration(0) // the WAL probe must not hold the device idle for most of the second
	e, gather, stop := startEngine(t,
		config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir, Interval: time.Millisecond, Jitter: 0.01, Ops: 10, Gap: &backToBack, MinFree: 1, DailyWriteBudget: 1 << 40},
		config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: dir, Interval: time.Millisecond, Jitter: 0.01, Ops: 20, WorkingSet: 4 << 20, MinFree: 1})
	runs := func(name string) float64 {
		m, _ := value(gather()["diskcanary_probe_runs_total"], map[string]string{"probe": name})
		return m.GetCounter().GetValue()
	}
	require.Eventually(t, func() bool { return runs("wal") > 0 && runs("rr") > 0 }, 10*time.Second, 20*time.Millisecond, "both probes running")
	wal, rr := e.probes[0].fl, e.probes[1].fl
	var busy [2]int
	start := time.Now()
	// Reading two marks one after the other could see one op end and the
	// next begin in between; so one mark is read before and after the
	// other: the same start (a unique clock reading) both times means that
	// op was in flight all along, the other one's reading included.
	overlap := func(a, b *inflight) bool {
		a0 := a.start.Load()
		b0 := b.start.Load()
		return a0 != 0 && b0 != 0 && a.start.Load() == a0
	}
	for time.Since(start) < time.Second {
		require.False(t, overlap(wal, rr), "a read in flight during a WAL op")
		require.False(t, overlap(rr, wal), "a WAL op in flight during a read")
		if wal.age() > 0 {
			busy[0]++
		}
		if rr.age() > 0 {
			busy[1]++
		}
	}
	stop()
	// Both were seen in flight, so the check above had something to catch.
	require.Positive(t, busy[0], "no WAL op seen in flight")
	require.Positive(t, busy[1], "no read seen in flight")
	t.Logf("samples with an op in flight: wal %d, rr %d; runs wal %.0f, rr %.0f", busy[0], busy[1], runs("wal"), runs("rr"))
}

// Setup I/O takes the device's turn like a burst: while another burst
// holds the device, a read probe does not lay out its working set.
func TestSetupIOWaitsForTheDevice(t *testing.T) {
	dir := t.TempDir()
	c := config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: dir, WorkingSet: 4 << 20,
		Interval: 20 * time.Millisecond, Jitter: 0.01, Ops: 5, MinFree: 1}
	c.ApplyProbeDefaults()
	e := NewEngine([]config.Probe{c}, hostpath.Paths{}, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	s, err := openDirSite(dir, "/proc", "/sys", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	gate := e.gateFor(s.gateKey)
	s.close()
	gate <- struct{}{} // another probe's burst holds the device
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	time.Sleep(500 * time.Millisecond)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no working set written while the device is another probe's")
	require.Zero(t, e.probes[0].fl.age(), "nothing in flight")

	<-gate
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dir, ".diskcanary-rr-readset"))
		return err == nil && e.probes[0].m != nil && testutilCounter(e, "diskcanary_probe_read_bytes_total", "rr") > 0
	}, 10*time.Second, 20*time.Millisecond, "the working set, then reads")
}

// testutilCounter reads one probe's counter from the engine.
func testutilCounter(e *Engine, name, probe string) float64 {
	reg := prometheus.NewRegistry()
	reg.MustRegister(engineCollector{e})
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		if m, ok := value(mf.GetMetric(), map[string]string{"probe": probe}); ok {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// The default WAL probe's charge: 2300-byte appends dirty 1.5605 pages on
// average (6,392 bytes) plus 8 KiB of journal each, 50 ops per burst of
// which 49 are timed, a burst every 44 s.
func TestWALWriteCostOfTheDefaultProbe(t *testing.T) {
	c, err := config.Parse(config.Default)
	if err != nil {
		t.Fatal(err)
	}
	perSample, perDay := WALWriteCost(c.Probes.Targets[0])
	if int(perSample) != 14881 || int64(perDay) != 1_431_883_636 {
		t.Fatalf("WALWriteCost(default wal) = %.1f bytes a sample, %.0f a day; want 14881.6 and 1431883636", perSample, perDay)
	}
	if perDay > float64(config.DefaultDailyWriteBudget) {
		t.Fatalf("the default probe's %.0f bytes a day exceed the default budget %d", perDay, config.DefaultDailyWriteBudget)
	}
}

// memDir is a temporary directory on tmpfs (/dev/shm), for tests that time
// the probe's own schedule rather than a disk.
func memDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "diskcanary-test-")
	if err != nil {
		t.Skipf("no tmpfs at /dev/shm for a schedule test: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
