package blocklatency

import (
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/internal/testkit/testfs"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func openLimited(t *testing.T, maxInFlight, maxHists uint32) *Tracer {
	t.Helper()
	testkit.RequireRoot(t)
	tr, err := open(maxInFlight, maxHists)
	if ue := (*UnavailableError)(nil); err != nil && errors.As(err, &ue) && ue.Reason != ReasonPermission {
		t.Skipf("skipping: this kernel cannot run the block-latency program: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// count sums the slots of major:minor's op histogram.
func count(t *testing.T, tr *Tracer, dev, op string) uint64 {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Stat(dev, &st))
	var n uint64
	require.NoError(t, tr.Read(func(k Key, h Hist) {
		if k.Major == unix.Major(st.Rdev) && k.Minor == unix.Minor(st.Rdev) && k.Op == op {
			for _, c := range h.Slots {
				n += c
			}
		}
	}))
	return n
}

func directFD(t *testing.T, dev string) (int, []byte) {
	t.Helper()
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close(fd) })
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Munmap(buf) })
	return fd, buf
}

// With room for one request in flight, 8 readers of a 20 ms device overlap:
// the requests that found the map full are counted as dropped, and every
// request is either timed or dropped.
func TestInFlightOverflowIsCounted(t *testing.T) {
	m := testfs.Start(t, "", "--read-delay", "20ms")
	dev := m.LoopDevice(t)
	tr := openLimited(t, 1, 0)

	const readers, reads = 8, 5
	var wg sync.WaitGroup
	for r := range readers {
		fd, buf := directFD(t, dev)
		wg.Go(func() {
			for i := range reads {
				_, err := unix.Pread(fd, buf, int64(r*reads+i)<<20)
				assert.NoError(t, err) // not require: this is not the test's goroutine
			}
		})
	}
	wg.Wait()
	d, err := tr.Dropped()
	require.NoError(t, err)
	timed := count(t, tr, dev, "read")
	t.Logf("%d reads timed, %d requests dropped (in flight), %d (devices)", timed, d.InFlight, d.Devices)
	require.NotZero(t, d.InFlight, "overlapping requests with one slot")
	require.GreaterOrEqual(t, timed+d.InFlight, uint64(readers*reads), "each read timed or counted as dropped")
	require.Less(t, timed, uint64(readers*reads), "some reads were not timed")
	require.Zero(t, d.Devices)
}

// With room for one histogram, a second device's requests are counted as
// dropped, not lost silently.
func TestHistogramOverflowIsCounted(t *testing.T) {
	testkit.RequireRoot(t)
	var devs []string
	for range 2 {
		f, err := os.CreateTemp("/dev/shm", "dc-blocklatency-*.img")
		require.NoError(t, err)
		t.Cleanup(func() { os.Remove(f.Name()) })
		require.NoError(t, f.Truncate(16<<20))
		require.NoError(t, f.Close())
		devs = append(devs, testkit.LoopDevice(t, f.Name()))
	}
	tr := openLimited(t, 0, 1)
	const writes = 16
	for _, dev := range devs {
		fd, buf := directFD(t, dev)
		for i := range writes {
			_, err := unix.Pwrite(fd, buf, int64(i)*4096)
			require.NoError(t, err)
		}
	}
	d, err := tr.Dropped()
	require.NoError(t, err)
	a, b := count(t, tr, devs[0], "write"), count(t, tr, devs[1], "write")
	t.Logf("timed %d + %d writes, %d dropped (devices)", a, b, d.Devices)
	require.True(t, a == 0 || b == 0, "one histogram at most: %d and %d", a, b)
	require.GreaterOrEqual(t, d.Devices, uint64(writes), "at least one device's writes dropped")
	require.GreaterOrEqual(t, a+b+d.Devices, uint64(2*writes))
}
