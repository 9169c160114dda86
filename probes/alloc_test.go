package probes

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
)

// readyProbe sets up a probe on a temp dir exactly as the daemon does.
func readyProbe(tb testing.TB, c config.Probe) *probe {
	tb.Helper()
	c.ApplyProbeDefaults()
	e := NewEngine([]config.Probe{c}, "/proc", "/sys", slog.New(slog.DiscardHandler))
	p := e.probes[0]
	require.NoError(tb, p.setup())
	tb.Cleanup(p.teardown)
	return p
}

// The per-op loop must not allocate: garbage collection pauses would land
// inside the latencies being measured.
func TestProbeOpsDoNotAllocate(t *testing.T) {
	wal := readyProbe(t, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: t.TempDir(), Ops: 50, MinFree: 1})
	fd, err := wal.dir.create(wal.walFile(), 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	var off int64
	allocs := testing.AllocsPerRun(200, func() {
		wal.syncs = wal.syncs[:0]
		off, _, err = runWAL(fd, wal.buf, off, 1, wal, wal.fl, &wal.stop, "x", false)
	})
	require.NoError(t, err)
	require.Zero(t, allocs, "allocations per WAL op")

	rr := readyProbe(t, config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: t.TempDir(), WorkingSet: 4 << 20, MinFree: 1})
	allocs = testing.AllocsPerRun(200, func() {
		_, err = runReads(rr.fd, rr.buf, rr.picker, 1, rr, rr.fl, &rr.stop, "x", false)
	})
	require.NoError(t, err)
	require.Zero(t, allocs, "allocations per read op")
}

// BenchmarkWALOp is one sequential 2300-byte write + fdatasync as the
// daemon does it (syscall state, bursts of 50 ops on a thread raised once,
// priority.go); BenchmarkWALOpCheck as check does it (raw syscalls, one
// burst that raises its thread and lowers it after). bench/probe-overhead
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
	fd, err := p.dir.create(p.walFile(), 0)
	require.NoError(b, err)
	defer func() { unix.Close(fd); _ = p.dir.remove(p.walFile()) }()
	size := int64(b.N) * 2300
	require.NoError(b, unix.Fallocate(fd, 0, 0, size))
	rec := &timedSum{probe: p}
	b.ReportAllocs()
	b.ResetTimer()
	burst := b.N
	if !raw {
		// As the probe loop does: the thread raised once, bursts of Ops.
		burst = p.cfg.Ops
		tid, raised, err := raisePriority()
		require.NoError(b, err)
		defer lowerPriority(tid, raised)
	}
	start := time.Now()
	var off int64
	for left := b.N; left > 0 && err == nil; left -= burst {
		off, _, err = runWAL(fd, p.buf, off, min(burst, left), rec, p.fl, &p.stop, "x", raw)
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
	_, err := runReads(p.fd, p.buf, p.picker, b.N, p, p.fl, &p.stop, "x", false)
	require.NoError(b, err)
}
