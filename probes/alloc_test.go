package probes

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// readyProbe opens and lays out a probe on a temp dir exactly as the
// daemon does.
func readyProbe(tb testing.TB, c config.Probe) *probe {
	tb.Helper()
	c.ApplyProbeDefaults()
	e := NewEngine([]config.Probe{c}, hostpath.Paths{}, slog.New(slog.DiscardHandler))
	p := e.probes[0]
	require.NoError(tb, p.open())
	tb.Cleanup(p.teardown)
	_, err := p.kind.prepare(p.fl, &p.stop)
	require.NoError(tb, err)
	return p
}

// warmUp observes one value into every native bucket from 1 µs to 100 s.
func warmUp(obs ...prometheus.Observer) {
	for _, o := range obs {
		for v := 1e-6; v < 100; v *= 1.05 {
			o.Observe(v)
		}
	}
}

// daemonRunner is how the daemon runs p's bursts.
func daemonRunner(p *probe) *runner { return &runner{rec: p, fl: p.fl, stop: &p.stop} }

// The per-op loop must not allocate: garbage collection pauses would land
// inside the latencies being measured. testing.AllocsPerRun counts every
// allocation of the process, so a goroutine another test left behind (an
// engine winding down, an HTTP client's idle connection) would count as
// the probe's: the measurement runs in a process of its own, where the
// only goroutines are this test's.
func TestProbeOpsDoNotAllocate(t *testing.T) {
	if !testkit.InChild(t) {
		out, err := testkit.Reexec(t, t.Name()).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "--- PASS: "+t.Name())
		return
	}
	wal := readyProbe(t, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: t.TempDir(), Ops: 50, MinFree: 1})
	w := wal.kind.(*walProbe)
	w.run = daemonRunner(wal)
	// A native histogram allocates once per bucket, the first time a value
	// lands in it (at most 160 of them): visit them all first, so only a
	// steady-state allocation per op would show.
	warmUp(wal.obsWrite, wal.obsSync)
	var off int64
	var err error
	// With a gap: the pause between paced ops must not allocate either.
	allocs := testing.AllocsPerRun(200, func() {
		w.syncs = w.syncs[:0]
		off, _, err = runWAL(w.fd, w.buf, off, 1, time.Millisecond, w, w.run, "x")
	})
	require.NoError(t, err)
	require.Zero(t, allocs, "allocations per WAL op")

	// check's recorder, which also judges each sample against the threshold.
	check := newSampleRecorder(200, time.Millisecond, new(atomic.Bool))
	w.run = &runner{rec: check, fl: wal.fl, stop: new(atomic.Bool), raw: true}
	allocs = testing.AllocsPerRun(100, func() {
		w.syncs = w.syncs[:0]
		off, _, err = runWAL(w.fd, w.buf, off, 1, 0, w, w.run, "x")
	})
	require.NoError(t, err)
	require.Zero(t, allocs, "allocations per WAL op into check's recorder")

	rr := readyProbe(t, config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: t.TempDir(), WorkingSet: 4 << 20, MinFree: 1})
	r := rr.kind.(*readProbe)
	warmUp(rr.obsRead)
	allocs = testing.AllocsPerRun(200, func() {
		_, err = runReads(r.fd, r.buf, r.picker, &r.times, 1, daemonRunner(rr), "x")
	})
	require.NoError(t, err)
	require.Zero(t, allocs, "allocations per read op")
	check = newSampleRecorder(300, time.Millisecond, new(atomic.Bool))
	allocs = testing.AllocsPerRun(200, func() {
		_, err = runReads(r.fd, r.buf, r.picker, &r.times, 1, &runner{rec: check, fl: rr.fl, raw: true}, "x")
	})
	require.NoError(t, err)
	require.Zero(t, allocs, "allocations per read op into check's recorder")
}

// BenchmarkWALOp is one sequential 2300-byte write + fdatasync as the
// daemon does it (syscall state, bursts of 50 ops on a thread raised once,
// priority.go); BenchmarkWALOpCheck as check does it (raw syscalls, one
// burst that raises its thread and lowers it after). go run ./bench probe-overhead
// compares both with fio on tmpfs, where fdatasync is nearly free and only
// the tool's overhead is left. Besides
// wall time per op it reports the time the probe itself timed (write +
// fdatasync) and the difference, the overhead: time per op spent outside
// the measured syscalls, the figure fio's JSON gives too.
func BenchmarkWALOp(b *testing.B)      { benchWAL(b, false) }
func BenchmarkWALOpCheck(b *testing.B) { benchWAL(b, true) }

// timedSum records into the probe as usual and adds up what was timed.
type timedSum struct {
	*probe
	timed time.Duration
}

func (s *timedSum) recordWAL(w, f time.Duration) {
	s.probe.recordWAL(w, f)
	s.timed += w + f
}

func benchWAL(b *testing.B, raw bool) {
	dir := b.TempDir()
	if d := benchDir(); d != "" {
		dir = d
	}
	p := readyProbe(b, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir, Ops: 50, MinFree: 1})
	w := p.kind.(*walProbe)
	// A file of its own, fallocated for all b.N ops (the segment holds
	// 27,000).
	fd, err := p.site.dir.create(".diskcanary-bench-wal", 0)
	require.NoError(b, err)
	defer func() { unix.Close(fd); _ = p.site.dir.remove(".diskcanary-bench-wal") }()
	size := int64(b.N) * 2300
	require.NoError(b, unix.Fallocate(fd, 0, 0, size))
	rec := &timedSum{probe: p}
	r := &runner{rec: rec, fl: p.fl, stop: &p.stop, raw: raw}
	b.ReportAllocs()
	b.ResetTimer()
	burst := b.N
	if !raw {
		burst = p.cfg.Ops // as the probe loop does
	}
	start := time.Now()
	var off int64
	for left := b.N; left > 0 && err == nil; left -= burst {
		off, _, err = runWAL(fd, w.buf, off, min(burst, left), 0, rec, r, "x")
	}
	wall := time.Since(start)
	require.NoError(b, err)
	n := float64(b.N)
	b.ReportMetric(float64(wall.Nanoseconds())/n, "ns/op-wall")
	b.ReportMetric(float64(rec.timed.Nanoseconds())/n, "ns/op-timed")
	b.ReportMetric(float64((wall-rec.timed).Nanoseconds())/n, "ns/op-overhead")
}

// BenchmarkReadOp is one 4 KiB O_DIRECT random read.
func BenchmarkReadOp(b *testing.B) {
	dir := b.TempDir()
	if d := benchDir(); d != "" {
		dir = d
	}
	p := readyProbe(b, config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: dir, WorkingSet: 64 << 20, MinFree: 1})
	b.ReportAllocs()
	b.ResetTimer()
	r := p.kind.(*readProbe)
	_, err := runReads(r.fd, r.buf, r.picker, &r.times, b.N, daemonRunner(p), "x")
	require.NoError(b, err)
}
