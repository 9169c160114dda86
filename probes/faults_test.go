package probes

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

func mount(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("mount", args...).CombinedOutput()
	require.NoError(t, err, "mount %v: %s", args, out)
	target := args[len(args)-1]
	t.Cleanup(func() { _ = exec.Command("umount", "-l", target).Run() })
}

func TestTmpfsIsNamedAndItsFlushFlagged(t *testing.T) {
	testkit.RequireRoot(t)
	dir := t.TempDir()
	// mode=0700: a probe directory others can write to is refused.
	mount(t, "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", dir)
	_, gather, stop := startEngine(t, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir,
		Interval: 20 * time.Millisecond, Ops: 20, MinFree: 1})
	require.Eventually(t, func() bool {
		m, ok := value(gather()["diskcanary_fdatasync_duration_seconds"], map[string]string{"probe": "wal"})
		return ok && m.GetHistogram().GetSampleCount() >= 20
	}, 5*time.Second, 20*time.Millisecond, "a cycle")
	stop()
	mf := gather()
	w, ok := value(mf["diskcanary_probe_target_warning"], map[string]string{"probe": "wal", "warning": "tmpfs"})
	require.True(t, ok)
	require.EqualValues(t, 1, w.GetGauge().GetValue())
	f, ok := value(mf["diskcanary_probe_target_warning"], map[string]string{"probe": "wal", "warning": "flush_not_reaching_device"})
	require.True(t, ok)
	require.EqualValues(t, 1, f.GetGauge().GetValue(), "fdatasync on tmpfs is a no-op")
	info, _ := value(mf["diskcanary_probe_target_info"], map[string]string{"probe": "wal"})
	require.Contains(t, info.String(), `value:"tmpfs"`)
}

func TestRealDiskFlushIsNotFlagged(t *testing.T) {
	_, gather, stop := startEngine(t, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: t.TempDir(),
		Interval: 20 * time.Millisecond, Ops: 20, MinFree: 1})
	require.Eventually(t, func() bool {
		m, ok := value(gather()["diskcanary_fdatasync_duration_seconds"], map[string]string{"probe": "wal"})
		return ok && m.GetHistogram().GetSampleCount() >= 20
	}, 5*time.Second, 20*time.Millisecond, "a cycle")
	stop()
	f, ok := value(gather()["diskcanary_probe_target_warning"], map[string]string{"probe": "wal", "warning": "flush_not_reaching_device"})
	require.True(t, ok)
	require.Zero(t, f.GetGauge().GetValue())
}

func TestReadOnlyFilesystem(t *testing.T) {
	testkit.RequireRoot(t)
	src, dir := t.TempDir(), t.TempDir()
	mount(t, "--bind", src, dir)
	mount(t, "-o", "remount,ro,bind", dir)
	_, gather, stop := startEngine(t, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir,
		Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1})
	require.Eventually(t, func() bool {
		ok := failed(gather(), "wal", "read_only")
		return ok
	}, 5*time.Second, 20*time.Millisecond, "read_only failure")
	stop()
	s, _ := value(gather()["diskcanary_probe_success"], map[string]string{"probe": "wal"})
	require.Zero(t, s.GetGauge().GetValue())
}

// Permission denied is tested as a real unprivileged user (nobody): the
// test re-runs itself as uid 65534 and probes a root-only directory.
func TestPermissionDeniedAsNonRoot(t *testing.T) {
	if testkit.InChild(t) {
		require.NotZero(t, os.Geteuid(), "must run unprivileged")
		_, gather, stop := startEngine(t, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: filepath.Join(os.Getenv("DISKCANARY_PERM_DIR"), "canary"),
			Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1})
		require.Eventually(t, func() bool {
			ok := failed(gather(), "wal", "permission")
			return ok
		}, 5*time.Second, 20*time.Millisecond, "permission failure")
		stop()
		t.Log("reason=permission uid=" + strconv.Itoa(os.Geteuid()))
		return
	}
	testkit.RequireRoot(t)
	base, err := os.MkdirTemp("", "diskcanary-perm")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	dir := filepath.Join(base, "rootonly")
	require.NoError(t, os.Mkdir(dir, 0o700))
	cmd := testkit.Reexec(t, t.Name(), "DISKCANARY_PERM_DIR="+dir)
	cmd.Dir = base
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "reason=permission")
}

// The read probe on a block device opens it read-only and never writes.
func TestRandReadOnBlockDeviceIsReadOnly(t *testing.T) {
	testkit.RequireRoot(t)
	img := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(img)
	require.NoError(t, err)
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	for i := 0; i < 16; i++ {
		_, err = f.Write(buf)
		require.NoError(t, err)
	}
	f.Close()
	dev := testkit.LoopDevice(t, img)
	_, gather, stop := startEngine(t, config.Probe{Name: "raw", Kind: config.KindRandRead, Device: dev,
		Interval: 20 * time.Millisecond, Ops: 50})
	require.Eventually(t, func() bool {
		m, ok := value(gather()["diskcanary_read_duration_seconds"], map[string]string{"probe": "raw", "device": filepath.Base(dev)})
		return ok && m.GetHistogram().GetSampleCount() >= 100
	}, 5*time.Second, 20*time.Millisecond, "reads")
	stop()
	w, _ := value(gather()["diskcanary_probe_written_bytes_total"], map[string]string{"probe": "raw"})
	require.Zero(t, w.GetCounter().GetValue())
	// The device's content is untouched.
	var st unix.Stat_t
	require.NoError(t, unix.Stat(img, &st))
	data, err := os.ReadFile(img)
	require.NoError(t, err)
	for i := 0; i < 16; i++ {
		require.Equal(t, buf, data[i<<20:(i+1)<<20])
	}
}

// fill writes files into dir until the filesystem says ENOSPC; with
// inodes, it makes empty files until no inode is left.
func fill(t *testing.T, dir string, inodes bool) {
	t.Helper()
	chunk := make([]byte, 64<<10)
	for i := 0; ; i++ {
		f, err := os.OpenFile(filepath.Join(dir, "filler-"+strconv.Itoa(i)), os.O_CREATE|os.O_WRONLY, 0o600)
		if errors.Is(err, syscall.ENOSPC) {
			return
		}
		require.NoError(t, err)
		for !inodes {
			if _, err = f.Write(chunk); err != nil {
				require.ErrorIs(t, err, syscall.ENOSPC)
				f.Close()
				return
			}
		}
		f.Close()
	}
}

// A full filesystem is a failure reason, never a crash, and the probe
// leaves nothing behind and recovers when space comes back. Out of inodes,
// the kernel's own ENOSPC reaches the probe (statfs shows free blocks); out
// of blocks, the free-space floor refuses before the kernel would.
func TestENOSPCOnSmallLoopFilesystem(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		inodes       bool
	}{
		{"inodes", "no_space", true},
		{"blocks", "low_space", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt, _ := testkit.LoopFS(t, 32<<20, "ext4", "-m", "0", "-N", "64")
			dir := filepath.Join(mnt, "canary")
			require.NoError(t, os.Mkdir(dir, 0o700))
			fill(t, mnt, tc.inodes)
			// A 1 MiB segment: the default 64 MB would not fit even empty.
			_, gather, stop := startEngine(t, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir,
				Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1, SegmentSize: 1 << 20})
			success := func() float64 {
				m, _ := value(gather()["diskcanary_probe_success"], map[string]string{"probe": "wal"})
				return m.GetGauge().GetValue()
			}
			require.Eventually(t, func() bool {
				ok := failed(gather(), "wal", tc.reason)
				return ok && success() == 0
			}, 5*time.Second, 20*time.Millisecond, tc.reason+" failure")
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, entries, "a failed cycle leaves no probe file")

			require.NoError(t, os.Remove(filepath.Join(mnt, "filler-0")))
			require.Eventually(t, func() bool { return success() == 1 }, 5*time.Second, 20*time.Millisecond, "recovery once space is back")
			stop()
		})
	}
}

// overlayfs (a container's root filesystem) is named, not trusted.
func TestOverlayfsIsNamed(t *testing.T) {
	testkit.RequireRoot(t)
	base := t.TempDir()
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		require.NoError(t, os.Mkdir(filepath.Join(base, d), 0o755))
	}
	mount(t, "-t", "overlay", "overlay", "-o",
		"lowerdir="+base+"/lower,upperdir="+base+"/upper,workdir="+base+"/work", base+"/merged")
	_, gather, stop := startEngine(t, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: base + "/merged",
		Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1})
	require.Eventually(t, func() bool {
		m, ok := value(gather()["diskcanary_probe_runs_total"], map[string]string{"probe": "wal"})
		return ok && m.GetCounter().GetValue() >= 1
	}, 5*time.Second, 20*time.Millisecond, "a cycle")
	stop()
	w, ok := value(gather()["diskcanary_probe_target_warning"], map[string]string{"probe": "wal", "warning": "overlayfs"})
	require.True(t, ok)
	require.EqualValues(t, 1, w.GetGauge().GetValue())
	info, _ := value(gather()["diskcanary_probe_target_info"], map[string]string{"probe": "wal"})
	require.Contains(t, info.String(), `value:"overlay"`)
}

// The flush check counts the device's completed flushes around a burst:
// on a real disk every fdatasync sends at least one, and reading the count
// allocates nothing (it runs twice a burst).
func TestDeviceFlushesCountARealDisksFlushes(t *testing.T) {
	p := readyProbe(t, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: t.TempDir(), Ops: 20, MinFree: 1})
	w := p.kind.(*walProbe)
	if p.site.backing.Device == "" {
		t.Skipf("skipping: no block device under %s", p.cfg.Dir)
	}
	before, ok := w.deviceFlushes()
	require.True(t, ok, "flush count of %s (kernel ≥ 5.5)", p.site.backing.Device)
	_, err := w.burst(daemonRunner(p), 20)
	require.NoError(t, err)
	after, ok := w.deviceFlushes()
	require.True(t, ok)
	require.GreaterOrEqual(t, after-before, uint64(20), "flushes on %s for 20 fdatasyncs", p.site.backing.Device)
	require.Zero(t, testing.AllocsPerRun(100, func() { _, _ = w.deviceFlushes() }))
}
