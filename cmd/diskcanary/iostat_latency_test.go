package main

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/internal/testkit/testfs"
)

// iostat --latency on a loop device whose backing file is on the FUSE test
// filesystem with 20 ms in every read: the disk's read p50 and p99 over
// each interval are the injected delay (the kernel's own request times),
// where r_await is only their mean.
func TestIostatLatencyShowsTheDevicesReads(t *testing.T) {
	testkit.RequireRoot(t)
	// Its p99 bound is a latency, which the race detector's slowdown can
	// cross.
	testkit.SkipUnderRace(t)
	m := testfs.Start(t, "", "--read-delay", "20ms")
	dev := m.LoopDevice(t)
	name := filepath.Base(dev)
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	defer unix.Munmap(buf)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			// 1 MiB apart: never merged, never cached.
			_, _ = unix.Pread(fd, buf, int64(i%64)<<20)
		}
	}()
	out, code, err := runCLI(t, "iostat", "--latency", "-y", name, "1", "2")
	stop.Store(true)
	<-done
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	var lines [][]string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name && len(f) == 9 {
			lines = append(lines, f)
		}
	}
	require.Len(t, lines, 2, "one latency line per interval report:\n%s", out)
	for _, f := range lines {
		p50, err := strconv.ParseFloat(f[1], 64)
		require.NoError(t, err)
		p99, err := strconv.ParseFloat(f[2], 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, p50, 18.6, "r_p50 ms, 20 ms injected:\n%s", out)
		require.Less(t, p50, 40.0, out)
		require.GreaterOrEqual(t, p99, p50, out)
		require.Less(t, p99, 60.0, out)
	}
}

// Without the privilege to load eBPF, --latency says what it needs.
func TestIostatLatencyWithoutPrivilege(t *testing.T) {
	testkit.RequireRoot(t)
	cmd, _ := nobodyCmd(t, "iostat", "--latency", "1", "1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 1, ee.ExitCode())
	require.Contains(t, string(out), "diskcanary: --latency: loading eBPF needs root or CAP_BPF and CAP_PERFMON: ")
}
