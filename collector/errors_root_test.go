package collector

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/internal/testkit/testfs"
)

// scrape returns every series of p as `name{k="v",...}` → value.
func scrape(t *testing.T, p Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(partCollector{p})
	fams, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			out[f.GetName()+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

// startErrorsCollector runs the errors part on the real /dev/kmsg (root) until
// the test ends, or until the returned stop is called.
func startErrorsCollector(t testing.TB) (*errorsCollector, func()) {
	t.Helper()
	testkit.RequireRoot(t)
	p, err := newErrorsCollector(Options{Config: &config.Config{}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ep := p.(*errorsCollector)
	require.NotNil(t, ep.reader, "as root /dev/kmsg must open (reason %q)", ep.reason)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ep.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return ep, stop
}

// waitSeries polls p until cond holds for its series, or fails after 20 s.
func waitSeries(t *testing.T, p Collector, what string, cond func(map[string]float64) bool, poke func()) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := scrape(t, p)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen in 20 s; series: %v", what, s)
		}
		if poke != nil {
			poke()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// failDirect does one 4 KiB O_DIRECT read and write at offset 0 of dev
// and requires both to fail with EIO.
func failDirect(t *testing.T, dev string) {
	t.Helper()
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_DIRECT, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	defer unix.Munmap(buf)
	_, err = unix.Pread(fd, buf, 0)
	require.ErrorIs(t, err, unix.EIO, "read of %s", dev)
	_, err = unix.Pwrite(fd, buf, 0)
	require.ErrorIs(t, err, unix.EIO, "write of %s", dev)
}

// Real kernel I/O errors: a loop device over the FUSE test filesystem in
// EIO mode. The block layer logs each failed request ("I/O error, dev
// loopN, …") and the count grows for that device with kind io.
func TestDiskErrorsFromAFailingLoopDevice(t *testing.T) {
	m := testfs.Start(t, t.TempDir())
	dev := m.LoopDevice(t)
	name := filepath.Base(dev)
	p, _ := startErrorsCollector(t)
	key := fmt.Sprintf(`diskcanary_disk_errors_total{device=%q,kind="io"}`, name)
	require.NotContains(t, scrape(t, p), key)

	m.Do(t, "io-error EIO")
	// The kernel rate-limits these lines (10 per 5 s, system-wide), so
	// another test's errors may hide ours for a while: fail again until
	// one is logged.
	s := waitSeries(t, p, key, func(s map[string]float64) bool { return s[key] >= 1 }, func() { failDirect(t, dev) })
	require.Equal(t, 1.0, s["diskcanary_kernel_log_available{}"])
	require.GreaterOrEqual(t, s["diskcanary_kernel_log_records_total{}"], s[key])
}

// A restart does not count the ring buffer's past again: a new reader
// starts at the end, so a device's errors logged before it never appear
// in its counts, and what it counts afterwards is exactly what the kernel
// logged afterwards (dmesg is the reference).
func TestKernelLogRestartDoesNotRecount(t *testing.T) {
	m := testfs.Start(t, t.TempDir())
	dev := m.LoopDevice(t)
	name := filepath.Base(dev)
	key := fmt.Sprintf(`diskcanary_disk_errors_total{device=%q,kind="io"}`, name)
	m.Do(t, "io-error EIO")

	first, stop := startErrorsCollector(t)
	waitSeries(t, first, key, func(s map[string]float64) bool { return s[key] >= 1 }, func() { failDirect(t, dev) })
	stop()

	second, _ := startErrorsCollector(t)
	// A marker proves the new reader has read past every older record.
	marker := fmt.Sprintf("diskcanary restart marker %d", time.Now().UnixNano())
	require.NoError(t, os.WriteFile("/dev/kmsg", []byte(marker+"\n"), 0))
	s := waitSeries(t, second, "the marker", func(s map[string]float64) bool { return s["diskcanary_kernel_log_records_total{}"] >= 1 }, nil)
	require.NotContains(t, s, key, "errors logged before the restart were counted again")

	waitSeries(t, second, key, func(s map[string]float64) bool { return s[key] >= 1 }, func() { failDirect(t, dev) })
	m.Do(t, "io-error none")
	time.Sleep(500 * time.Millisecond) // the last records reach the reader
	s = scrape(t, second)
	out, err := exec.Command("dmesg", "--notime").Output()
	require.NoError(t, err)
	logged := strings.SplitN(string(out), marker, 2)
	require.Len(t, logged, 2, "marker not in dmesg")
	want := strings.Count(logged[1], "I/O error, dev "+name+", ")
	require.Equal(t, float64(want), s[key], "counted after the restart vs dmesg after the marker")
}

// A real ext4 error under errors=remount-ro (ext4's own trigger_fs_error,
// which runs the kernel's error path as a corruption would): the log
// counts the error and the remount, ext4's superblock count goes to 1, and
// diskcanary_filesystem_readonly is 1 until the filesystem is writable
// again — here after fsck and a fresh mount, as an operator would.
func TestFilesystemErrorRemountsReadOnlyAndClears(t *testing.T) {
	mnt, dev := testkit.LoopFSIn(t, "/dev/shm", 64<<20, "ext4", "-e", "remount-ro")
	name := filepath.Base(dev)
	trigger := filepath.Join("/sys/fs/ext4", name, "trigger_fs_error")
	if _, err := os.Stat(trigger); err != nil {
		t.Skipf("skipping: this kernel's ext4 has no %s", trigger)
	}
	p, _ := startErrorsCollector(t)
	ro := fmt.Sprintf(`diskcanary_filesystem_readonly{device=%q,mountpoint=%q}`, name, mnt)
	recorded := fmt.Sprintf(`diskcanary_filesystem_recorded_errors{device=%q,fstype="ext4",kind="error"}`, name)
	s := scrape(t, p)
	require.Equal(t, 0.0, s[ro])
	require.Contains(t, s, ro)
	require.Equal(t, 0.0, s[recorded])
	require.Contains(t, s, recorded)

	require.NoError(t, os.WriteFile(trigger, []byte("diskcanary test error"), 0))
	logged := func(kind string) string {
		return fmt.Sprintf(`diskcanary_filesystem_errors_total{device=%q,fstype="ext4",kind=%q}`, name, kind)
	}
	s = waitSeries(t, p, "the ext4 error", func(s map[string]float64) bool { return s[logged("remount_ro")] >= 1 && s[ro] == 1 }, nil)
	require.Equal(t, 1.0, s[logged("error")])
	require.Equal(t, 1.0, s[logged("journal_abort")])
	require.Equal(t, 1.0, s[logged("remount_ro")])
	require.Equal(t, 1.0, s[recorded])
	require.Equal(t, 1.0, s[ro])
	_, err := os.Create(filepath.Join(mnt, "after"))
	require.ErrorIs(t, err, unix.EROFS, "the filesystem must really be read-only")

	require.NoError(t, unix.Unmount(mnt, 0))
	if out, err := exec.Command("e2fsck", "-fy", dev).CombinedOutput(); err != nil {
		// 1: errors corrected, the expected outcome here.
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 {
			t.Fatalf("e2fsck: %v: %s", err, out)
		}
	}
	out, err := exec.Command("mount", dev, mnt).CombinedOutput()
	require.NoError(t, err, "%s", out)
	s = scrape(t, p)
	require.Equal(t, 0.0, s[ro], "read-only must clear once the filesystem is writable")
	f, err := os.Create(filepath.Join(mnt, "after"))
	require.NoError(t, err)
	f.Close()
}

// A real btrfs filesystem's per-device error stats, read from sysfs: all
// five kinds, zero on a fresh filesystem, on the device's kernel name.
func TestBtrfsRecordedErrorsFromSysfs(t *testing.T) {
	_, dev := testkit.LoopFSIn(t, "/dev/shm", 128<<20, "btrfs")
	p, _ := startErrorsCollector(t)
	s := scrape(t, p)
	for _, kind := range []string{"write", "read", "flush", "corruption", "generation"} {
		key := fmt.Sprintf(`diskcanary_filesystem_recorded_errors{device=%q,fstype="btrfs",kind=%q}`, filepath.Base(dev), kind)
		require.Contains(t, s, key)
		require.Equal(t, 0.0, s[key], key)
	}
}
