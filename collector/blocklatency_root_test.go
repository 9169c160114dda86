package collector

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/collector/blocklatency"
	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/internal/testkit/testfs"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// openBlocklatency attaches the eBPF program (root only) and detaches it at
// cleanup. Open it after the test's loop devices are attached, so their
// histograms hold only the test's own requests.
func openBlocklatency(tb testing.TB, sysfs string) *blocklatencyCollector {
	tb.Helper()
	testkit.RequireRoot(tb)
	p, err := newBlocklatencyCollector(Options{Config: &config.Config{}, Paths: hostpath.Paths{SysFS: sysfs}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(tb, err)
	bp := p.(*blocklatencyCollector)
	switch bp.reason {
	case "":
	case blocklatency.ReasonNoBTF, blocklatency.ReasonUnsupported:
		tb.Skipf("skipping: this kernel cannot run the block-latency program (%s)", bp.reason)
	default:
		tb.Fatalf("as root the program must load; reason %s", bp.reason)
	}
	tb.Cleanup(func() { _ = bp.tracer.Close() })
	return bp
}

// requestHist scrapes the part and returns the histogram of device and op
// (nil if it has none).
func requestHist(t *testing.T, p Collector, device, op string) *dto.Histogram {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	errc := make(chan error, 1)
	go func() { errc <- p.Update(ch); close(ch) }()
	var found *dto.Histogram
	for m := range ch {
		if m.Desc() != requestDurationDesc {
			continue
		}
		var out dto.Metric
		require.NoError(t, m.Write(&out))
		labels := map[string]string{}
		for _, l := range out.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["device"] == device && labels["op"] == op {
			found = out.Histogram
		}
	}
	require.NoError(t, <-errc)
	return found
}

// cumulative is the classic bucket count at le.
func cumulative(t *testing.T, h *dto.Histogram, le float64) uint64 {
	t.Helper()
	for _, b := range h.Bucket {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	t.Fatalf("no bucket le=%g", le)
	return 0
}

// nativeBelow counts the observations in native buckets below index k and
// in the zero bucket.
func nativeBelow(h *dto.Histogram, k int32) uint64 {
	n := h.GetZeroCount()
	var idx int32
	var count int64
	d := 0
	for _, s := range h.PositiveSpan {
		idx += s.GetOffset()
		for range s.GetLength() {
			count += h.PositiveDelta[d]
			d++
			if idx < k {
				n += uint64(count)
			}
			idx++
		}
	}
	return n
}

// diskStat is /sys/block/NAME/stat: reads, writes, discards and flushes
// completed (fields 1, 5, 12 and 16, Documentation/block/stat.rst).
func diskStat(t *testing.T, name string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/block", name, "stat"))
	require.NoError(t, err)
	f := strings.Fields(string(b))
	require.GreaterOrEqual(t, len(f), 17, "a kernel with flush statistics (5.5+)")
	out := map[string]uint64{}
	for op, i := range map[string]int{"read": 0, "write": 4, "discard": 11, "flush": 15} {
		out[op], err = strconv.ParseUint(f[i], 10, 64)
		require.NoError(t, err)
	}
	return out
}

// alignedBuf is a page-aligned buffer for O_DIRECT.
func alignedBuf(t *testing.T, size int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Munmap(b) })
	return b
}

func openDirect(t *testing.T, dev string) int {
	t.Helper()
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close(fd) })
	return fd
}

// A loop device whose backing file is on the FUSE test filesystem, which
// sleeps 20 ms in every read and fsync: the device's own requests show the
// delay. The loop driver reads its backing file with O_DIRECT
// (--direct-io=on, so no page cache answers a read) and turns a flush
// request into an fsync of the backing file.
func TestBlocklatencyShowsInjectedDeviceDelay(t *testing.T) {
	m := testfs.Start(t, "", "--read-delay", "20ms", "--sync-delay", "20ms")
	dev := m.LoopDevice(t)
	name := filepath.Base(dev)
	p := openBlocklatency(t, "/sys")
	fd := openDirect(t, dev)
	buf := alignedBuf(t, 4096)

	const n = 10
	before := diskStat(t, name)
	for i := range n {
		// 1 MiB apart: no read can be merged with another.
		_, err := unix.Pread(fd, buf, int64(i)<<20)
		require.NoError(t, err)
	}
	for range n {
		// Nothing is dirty: each fsync of the device is one flush request.
		require.NoError(t, unix.Fsync(fd))
	}
	after := diskStat(t, name)

	read := requestHist(t, p, name, "read")
	require.NotNil(t, read, "a read histogram for %s", name)
	t.Logf("%s reads: %d, mean %.2f ms", name, read.GetSampleCount(), 1e3*read.GetSampleSum()/float64(read.GetSampleCount()))
	require.GreaterOrEqual(t, read.GetSampleCount(), uint64(n), "at least the test's reads (udev may probe the new device too)")
	require.Zero(t, cumulative(t, read, 0.01), "no read of a 20 ms device under 10 ms")
	// Native buckets are finer: nothing at or below 2^(-46/8) s = 18.6 ms.
	require.Zero(t, nativeBelow(read, -45), "no read under 18.6 ms")

	flush := requestHist(t, p, name, "flush")
	require.NotNil(t, flush, "a flush histogram for %s", name)
	t.Logf("%s flushes: %d, mean %.2f ms", name, flush.GetSampleCount(), 1e3*flush.GetSampleSum()/float64(flush.GetSampleCount()))
	require.Equal(t, uint64(n), flush.GetSampleCount(), "one flush request per fsync")
	require.Equal(t, after["flush"]-before["flush"], flush.GetSampleCount(), "the kernel's own flush count agrees")
	require.Zero(t, cumulative(t, flush, 0.01), "no flush of a 20 ms device under 10 ms")
	require.Zero(t, nativeBelow(flush, -45), "no flush under 18.6 ms")
	require.Nil(t, requestHist(t, p, name, "write"), "the test wrote nothing")
}

// A loop device on tmpfs is fast: its O_DIRECT 4 KiB writes are exactly the
// requests the kernel counts, and a discard is op="discard".
func TestBlocklatencyCountsEveryRequestOfAFastDevice(t *testing.T) {
	testkit.RequireRoot(t)
	f, err := os.CreateTemp("/dev/shm", "dc-blocklatency-*.img")
	require.NoError(t, err)
	t.Cleanup(func() { os.Remove(f.Name()) })
	require.NoError(t, f.Truncate(16<<20))
	require.NoError(t, f.Close())
	dev := testkit.LoopDevice(t, f.Name())
	name := filepath.Base(dev)
	p := openBlocklatency(t, "/sys")
	fd := openDirect(t, dev)
	buf := alignedBuf(t, 4096)

	const n = 64
	before := diskStat(t, name)
	for i := range n {
		_, err := unix.Pwrite(fd, buf, int64(i)*4096*2)
		require.NoError(t, err)
	}
	// BLKDISCARD takes {offset, length} in bytes.
	rng := [2]uint64{8 << 20, 1 << 20}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKDISCARD, uintptr(unsafe.Pointer(&rng)))
	require.Zero(t, errno, "BLKDISCARD")
	after := diskStat(t, name)

	write := requestHist(t, p, name, "write")
	require.NotNil(t, write)
	t.Logf("%s writes: %d, mean %.1f µs", name, write.GetSampleCount(), 1e6*write.GetSampleSum()/float64(write.GetSampleCount()))
	require.Equal(t, uint64(n), write.GetSampleCount(), "one request per O_DIRECT write")
	require.Equal(t, after["write"]-before["write"], write.GetSampleCount(), "the kernel's own write count agrees")
	if !testkit.Race {
		// A latency bound: the race pass runs beside slowed-down tests.
		require.Equal(t, uint64(n), cumulative(t, write, 0.01), "tmpfs-backed writes all under 10 ms")
	}
	discard := requestHist(t, p, name, "discard")
	require.NotNil(t, discard)
	require.Equal(t, after["discard"]-before["discard"], discard.GetSampleCount())
	require.Equal(t, uint64(1), discard.GetSampleCount(), "1 MiB is one discard request")
	require.Nil(t, requestHist(t, p, name, "flush"), "O_DIRECT without O_SYNC sends no flush")

	// A scrape that arrives after shutdown detached the program is empty,
	// not a failure.
	require.NoError(t, p.tracer.Close())
	require.Nil(t, requestHist(t, p, name, "write"))
}
