package probes

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// bothOpenPaths runs f with openat2 (RESOLVE_BENEATH|NO_SYMLINKS|NO_XDEV)
// and with the openat fallback that kernels before 5.6 get.
func bothOpenPaths(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", f)
	t.Run("openat", func(t *testing.T) {
		was := openat2Missing.Load()
		openat2Missing.Store(true)
		t.Cleanup(func() { openat2Missing.Store(was) })
		f(t)
	})
}

// A probe name such as "a/../../victim" pasted into a file name must not
// walk out of the probe directory: create, open, rename and remove take
// one name in the directory and nothing else.
func TestProbeFileNamesCannotLeaveTheDirectory(t *testing.T) {
	bothOpenPaths(t, func(t *testing.T) {
		base := t.TempDir()
		victim := filepath.Join(base, "victim-wal")
		require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o600))
		dir := filepath.Join(base, "probe")
		d, err := openProbeDir(dir)
		require.NoError(t, err)
		defer d.close()
		// What walCycle would build for a probe named "a/../../victim".
		require.NoError(t, os.Mkdir(filepath.Join(dir, ".diskcanary-a"), 0o700))
		escape := ".diskcanary-a/../../victim-wal"

		for _, name := range []string{escape, "../victim-wal", "..", ".", "", "/tmp/victim-wal", ".diskcanary-x\x00"} {
			_, err = d.create(name, 0)
			require.ErrorIs(t, err, errUnsafe, "create %q", name)
			_, err = d.open(name, unix.O_RDWR)
			require.ErrorIs(t, err, errUnsafe, "open %q", name)
			require.ErrorIs(t, d.remove(name), errUnsafe, "remove %q", name)
			require.ErrorIs(t, d.rename(name, ".diskcanary-b"), errUnsafe, "rename %q", name)
			require.ErrorIs(t, d.rename(".diskcanary-b", name), errUnsafe, "rename to %q", name)
			_, err = d.writeReadset(name, 8192, newInflight(), nil)
			require.ErrorIs(t, err, errUnsafe, "writeReadset %q", name)
			require.Equal(t, reasonUnsafe, reasonOf(err))
		}
		got, err := os.ReadFile(victim)
		require.NoError(t, err)
		require.Equal(t, "precious", string(got))
		entries, err := os.ReadDir(base)
		require.NoError(t, err)
		require.Len(t, entries, 2, "nothing created next to the probe directory")
	})
}

// A hard link planted at a probe file name is never opened: the probe
// would write someone else's file every cycle.
func TestOpenRefusesHardLinkForeignOwnerAndSpecialFiles(t *testing.T) {
	bothOpenPaths(t, func(t *testing.T) {
		base := t.TempDir()
		victim := filepath.Join(base, "victim")
		require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o600))
		dir := filepath.Join(base, "probe")
		d, err := openProbeDir(dir)
		require.NoError(t, err)
		defer d.close()

		require.NoError(t, os.Link(victim, filepath.Join(dir, ".diskcanary-ow-overwrite")))
		_, err = d.open(".diskcanary-ow-overwrite", unix.O_RDWR)
		require.ErrorIs(t, err, errUnsafe)
		require.ErrorContains(t, err, "has 2 hard links; a probe file has one")

		require.NoError(t, unix.Mkfifo(filepath.Join(dir, ".diskcanary-f-overwrite"), 0o600))
		_, err = d.open(".diskcanary-f-overwrite", unix.O_RDWR)
		require.ErrorIs(t, err, errUnsafe)
		require.ErrorContains(t, err, "not a regular file (a FIFO); remove it")

		require.NoError(t, os.Symlink(victim, filepath.Join(dir, ".diskcanary-s-overwrite")))
		_, err = d.open(".diskcanary-s-overwrite", unix.O_RDWR)
		require.ErrorIs(t, err, errUnsafe)
		require.ErrorContains(t, err, "not a regular file (a symlink); remove it")

		// create replaces a hard link's name with a new file of its own.
		fd, err := d.create(".diskcanary-ow-overwrite", 0)
		require.NoError(t, err)
		_, err = unix.Pwrite(fd, []byte("overwritten"), 0)
		require.NoError(t, err)
		unix.Close(fd)
		got, err := os.ReadFile(victim)
		require.NoError(t, err)
		require.Equal(t, "precious", string(got))

		// A file of ours, on its own, opens (and is not left non-blocking).
		fd, err = d.open(".diskcanary-ow-overwrite", unix.O_RDWR)
		require.NoError(t, err)
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		require.NoError(t, err)
		require.Zero(t, fl&unix.O_NONBLOCK)
		unix.Close(fd)

		if os.Geteuid() == 0 {
			require.NoError(t, os.Chown(filepath.Join(dir, ".diskcanary-ow-overwrite"), 65534, 65534))
			_, err = d.open(".diskcanary-ow-overwrite", unix.O_RDWR)
			require.ErrorIs(t, err, errUnsafe)
			require.ErrorContains(t, err, "owned by uid 65534, not by diskcanary's uid 0")
		}
	})
}

// The overwrite layout through the engine: a same-size, fully written file
// hard-linked at the probe's name stays untouched; the probe makes its own.
func TestOverwriteProbeNeverWritesThroughAHardLink(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "probe")
	require.NoError(t, os.Mkdir(dir, 0o700))
	const ops, bs = 5, 4096
	precious := make([]byte, ops*bs)
	for i := range precious {
		precious[i] = byte(i%251 + 1)
	}
	victim := filepath.Join(base, "victim")
	require.NoError(t, os.WriteFile(victim, precious, 0o600))
	f, err := os.Open(victim)
	require.NoError(t, err)
	require.NoError(t, f.Sync()) // allocated, so it looks like a finished overwrite file
	f.Close()
	link := filepath.Join(dir, ".diskcanary-ow-overwrite")
	require.NoError(t, os.Link(victim, link))

	_, gather, stop := startEngine(t, config.Probe{Name: "ow", Kind: config.KindWAL, Dir: dir, Layout: config.LayoutOverwrite,
		BlockSize: bs, Ops: ops, Interval: 20 * time.Millisecond, MinFree: 1})
	require.Eventually(t, func() bool {
		mf := gather()
		m, ok := value(mf["diskcanary_probe_runs_total"], map[string]string{"probe": "ow"})
		succ, _ := value(mf["diskcanary_probe_success"], map[string]string{"probe": "ow"})
		return ok && m.GetCounter().GetValue() >= 3 && succ.GetGauge().GetValue() == 1
	}, 10*time.Second, 20*time.Millisecond, "a successful overwrite cycle, then more")
	stop()
	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, precious, got, "the probe overwrote a hard-linked file")
	var st unix.Stat_t
	require.NoError(t, unix.Stat(victim, &st))
	require.EqualValues(t, 1, st.Nlink, "the planted name was replaced by the probe's own file")
}

// unblockFIFO opens path read-write (which never blocks) and closes it, so
// an open blocked on the FIFO returns: a failing test does not hang.
func unblockFIFO(path string) {
	if fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK, 0); err == nil {
		unix.Close(fd)
	}
}

// A FIFO at a probe file name would block open(2) forever: no stall, no
// log. Every path that meets it returns at once, and the FIFO is left.
func TestFIFOAtProbeFileNeverBlocks(t *testing.T) {
	bothOpenPaths(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "probe")
		d, err := openProbeDir(dir)
		require.NoError(t, err)
		defer d.close()
		fifo := filepath.Join(dir, ".diskcanary-rr-readset")
		require.NoError(t, unix.Mkfifo(fifo, 0o600))
		t.Cleanup(func() { unblockFIFO(fifo) })

		done := make(chan error, 1)
		go func() {
			if d.readsetValid(".diskcanary-rr-readset", 64<<10) {
				done <- nil
				return
			}
			_, err := d.open(".diskcanary-rr-readset", unix.O_RDONLY)
			done <- err
		}()
		select {
		case err := <-done:
			require.ErrorIs(t, err, errUnsafe)
			require.ErrorContains(t, err, "not a regular file (a FIFO); remove it")
		case <-time.After(2 * time.Second):
			t.Fatal("open blocked on a FIFO")
		}
		_, err = d.writeReadset(".diskcanary-rr-readset", 64<<10, newInflight(), nil)
		require.ErrorIs(t, err, errUnsafe)
		fi, err := os.Lstat(fifo)
		require.NoError(t, err)
		require.Equal(t, os.ModeNamedPipe, fi.Mode().Type(), "the FIFO is left for the operator to see")
	})
}

// Through the engine: a read probe whose working set is a FIFO fails with
// unsafe_path within a cycle or two, instead of hanging with no trace.
func TestReadProbeWithFIFOWorkingSetFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "probe")
	require.NoError(t, os.Mkdir(dir, 0o700))
	fifo := filepath.Join(dir, ".diskcanary-rr-readset")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	_, gather, stop := startEngine(t, config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: dir, WorkingSet: 64 << 10,
		Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1})
	t.Cleanup(func() { unblockFIFO(fifo) }) // runs before the engine's own cleanup
	require.Eventually(t, func() bool {
		m, ok := value(gather()["diskcanary_probe_failures_total"], map[string]string{"probe": "rr", "reason": "unsafe_path"})
		return ok && m.GetCounter().GetValue() >= 2
	}, 5*time.Second, 20*time.Millisecond, `failures_total{reason="unsafe_path"} >= 2`)
	stop()
	fi, err := os.Lstat(fifo)
	require.NoError(t, err)
	require.Equal(t, os.ModeNamedPipe, fi.Mode().Type())
}

// StrictModes: a probe directory someone else may write in is refused with
// the reason, since its writer could plant a FIFO or hard link or lock the
// probes out. The daemon's own directory (0700, or 0755) is fine.
func TestProbeDirWritableByOthersRefused(t *testing.T) {
	for _, tc := range []struct {
		mode uint32
		want string
	}{
		{0o777, "writable by group or others (mode 0777): chmod go-w "},
		{0o1777, "writable by group or others (mode 1777): chmod go-w "},
		{0o770, "writable by group or others (mode 0770): chmod go-w "},
		{0o702, "writable by group or others (mode 0702): chmod go-w "},
		{0o755, ""},
		{0o700, ""},
	} {
		dir := filepath.Join(t.TempDir(), "probe")
		require.NoError(t, os.Mkdir(dir, 0o700))
		require.NoError(t, unix.Chmod(dir, tc.mode))
		d, err := openProbeDir(dir)
		if tc.want == "" {
			require.NoError(t, err, "%04o", tc.mode)
			d.close()
			continue
		}
		require.ErrorIs(t, err, errUnsafe, "%04o", tc.mode)
		require.ErrorContains(t, err, tc.want+dir)
		require.Equal(t, reasonUnsafe, reasonOf(err))
	}
}

func TestProbeDirOwnedByAnotherUserRefused(t *testing.T) {
	testkit.RequireRoot(t)
	// The default /var/tmp/diskcanary sits in a world-writable directory:
	// another user can make it first.
	dir := filepath.Join(t.TempDir(), "diskcanary")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chown(dir, 65534, 65534))
	_, err := openProbeDir(dir)
	require.ErrorIs(t, err, errUnsafe)
	require.ErrorContains(t, err, dir+": refusing an unsafe probe path: owned by uid 65534, not by diskcanary's uid 0: chown it to 0, or remove it and diskcanary creates it (mode 0700)")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// After `umount -l`, the path of a probe directory leads to the filesystem
// underneath. A process that has seen the directory on one filesystem
// never creates or probes it on another: that would report the root disk
// for the unmounted one, silently.
func TestProbeDirNotRecreatedOnAnotherFilesystem(t *testing.T) {
	for _, tc := range []struct{ name, sub string }{
		{"subdirectory", "canary"}, // created by the probe; after umount, its parent is the bare mountpoint
		{"mount root", ""},         // after umount, the mountpoint itself answers
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt, _ := testkit.LoopFS(t, 32<<20, "ext4")
			dir := filepath.Join(mnt, tc.sub)
			d, err := openProbeDir(dir)
			require.NoError(t, err)
			fd, err := d.create(".diskcanary-wal-wal", 0)
			require.NoError(t, err)
			unix.Close(fd)
			require.NoError(t, d.remove(".diskcanary-wal-wal"))
			d.close()
			// Still the same filesystem: reopened as often as needed.
			d, err = openProbeDir(dir)
			require.NoError(t, err)
			d.close()

			require.NoError(t, unix.Unmount(mnt, unix.MNT_DETACH))
			_, err = openProbeDir(dir)
			require.ErrorIs(t, err, unix.ENOENT)
			require.ErrorContains(t, err, dir+": the probe directory's filesystem is gone")
			require.ErrorContains(t, err, "not probing or creating it there: mount the filesystem again, or restart diskcanary if the move is intended")
			require.Equal(t, reasonMissing, reasonOf(err))
			entries, err := os.ReadDir(mnt)
			require.NoError(t, err)
			require.Empty(t, entries, "nothing created under the bare mountpoint")
		})
	}
}

// openBlockDevice checks the type before it opens anything: a FIFO would
// block open(2) forever, a character device may act on open.
func TestOpenBlockDeviceRefusesOtherTypes(t *testing.T) {
	base := t.TempDir()
	fifo := filepath.Join(base, "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	t.Cleanup(func() { unblockFIFO(fifo) })
	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, make([]byte, 8192), 0o600))
	link := filepath.Join(base, "zero-link")
	require.NoError(t, os.Symlink("/dev/zero", link))

	for path, want := range map[string]string{
		fifo:        "not a block device (a FIFO)",
		"/dev/zero": "not a block device (a character device)",
		link:        "not a block device (a character device)",
		file:        "not a block device (a regular file)",
		base:        "not a block device (a directory)",
	} {
		done := make(chan error, 1)
		go func() {
			fd, _, _, _, err := openBlockDevice(path)
			if err == nil {
				unix.Close(fd)
			}
			done <- err
		}()
		select {
		case err := <-done:
			require.ErrorIs(t, err, errUnsafe, path)
			require.ErrorContains(t, err, path+": refusing an unsafe probe path: "+want)
			require.Equal(t, reasonUnsafe, reasonOf(err))
		case <-time.After(2 * time.Second):
			t.Fatalf("openBlockDevice(%s) blocked", path)
		}
	}
	_, _, _, _, err := openBlockDevice(filepath.Join(base, "absent"))
	require.Equal(t, reasonMissing, reasonOf(err))
}

func TestOpenBlockDeviceFollowsSymlinksToADisk(t *testing.T) {
	testkit.RequireRoot(t)
	img := filepath.Join(t.TempDir(), "disk.img")
	require.NoError(t, os.WriteFile(img, make([]byte, 1<<20), 0o600))
	dev := testkit.LoopDevice(t, img)
	link := filepath.Join(t.TempDir(), "by-id-link") // as /dev/disk/by-id/...
	require.NoError(t, os.Symlink(dev, link))
	fd, st, _, _, err := openBlockDevice(link)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.EqualValues(t, unix.S_IFBLK, st.Mode&unix.S_IFMT)
	require.Equal(t, testkit.DevNumbers(t, dev), fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev)))
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	require.NoError(t, err)
	require.Zero(t, fl&unix.O_NONBLOCK)
	require.NotZero(t, fl&unix.O_DIRECT)
	require.EqualValues(t, unix.O_RDONLY, fl&unix.O_ACCMODE)
}
