// Package testkit makes real slow and broken disks for tests: small
// filesystems on loop devices, and the cgroup-v1 blkio throttle that slows
// one loop device for one process tree. Everything needs root; callers skip
// with a clear message otherwise (CI runs as root). It also runs the
// processes end-to-end tests need, a real Prometheus among them
// (prometheus.go, process.go).
package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// RequireRoot skips the test unless it runs as root, and unless the
// end-to-end tests are on (E2E): a test that needs root is one.
func RequireRoot(tb TB) {
	tb.Helper()
	E2E(tb)
	if os.Geteuid() != 0 {
		tb.Skip("skipping: needs root (loop devices, mounts, cgroups); CI runs as root")
	}
	reapOnce.Do(func() {
		for _, u := range reap() {
			tb.Logf("testkit: undone what a killed test run left behind: %s", u)
		}
	})
}

// Tmpfs mounts a fresh 64 MiB tmpfs (a filesystem that is memory: its
// fdatasync returns at once) and unmounts it at cleanup.
func Tmpfs(tb TB) string {
	tb.Helper()
	RequireRoot(tb)
	dir := tb.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		tb.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	forget := record(tb, "mount", dir, "")
	tb.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			tb.Errorf("umount %s: %v: %s", dir, err, out)
			return
		}
		forget()
	})
	return dir
}

// imagePrefix names the image files LoopFSIn makes.
const imagePrefix = "diskcanary-testenv-"

// LoopFS makes a filesystem of fstype (ext4, xfs, btrfs) on a fresh loop
// device backed by a size-byte file, mounts it, and undoes it all at
// cleanup. ext4 is made with lazy init off, so no kernel thread keeps
// writing behind the measurement. It returns the mountpoint and the loop
// device path.
func LoopFS(tb TB, size int64, fstype string, mkfsArgs ...string) (mnt, dev string) {
	tb.Helper()
	return LoopFSIn(tb, "", size, fstype, mkfsArgs...)
}

// LoopFSIn is LoopFS with the backing file in dir: "/dev/shm" puts it on
// tmpfs, so the device is fast and several of them alike; "" is the
// test's temporary directory, as LoopFS.
func LoopFSIn(tb TB, dir string, size int64, fstype string, mkfsArgs ...string) (mnt, dev string) {
	tb.Helper()
	RequireRoot(tb)
	requireTools(tb, "losetup", "mkfs."+fstype, "mount")
	if dir == "" {
		dir = tb.TempDir()
	}
	f, err := os.CreateTemp(dir, imagePrefix+"*.img")
	if err != nil {
		tb.Fatal(err)
	}
	img := f.Name()
	// Removed last: after the unmount and the detach below.
	tb.Cleanup(func() { _ = os.Remove(img) })
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatal(err)
	}
	args := []string{"-q"}
	switch fstype {
	case "ext4":
		args = append(args, "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0")
	case "xfs", "btrfs":
		args = append(args, "-f")
	}
	args = append(append(args, mkfsArgs...), img)
	if out, err := exec.Command("mkfs."+fstype, args...).CombinedOutput(); err != nil {
		tb.Fatalf("mkfs.%s: %v: %s", fstype, err, out)
	}
	dev = LoopDevice(tb, img)
	mnt = tb.TempDir()
	if out, err := exec.Command("mount", dev, mnt).CombinedOutput(); err != nil {
		tb.Fatalf("mount %s: %v: %s", dev, err, out)
	}
	forget := record(tb, "mount", mnt, "")
	// Registered after TempDir's own cleanup, so it runs first.
	tb.Cleanup(func() {
		if unix.Unmount(mnt, unix.MNT_DETACH) == nil {
			forget()
		}
	})
	return mnt, dev
}

// LoopDevice attaches the image file img to a free loop device, with
// extra losetup options (e.g. "--partscan"), detaches it at cleanup, and
// returns the device path. For a raw device with no filesystem, such as a
// partition table written by the test.
func LoopDevice(tb TB, img string, losetupArgs ...string) string {
	tb.Helper()
	RequireRoot(tb)
	requireTools(tb, "losetup")
	args := append([]string{"--find", "--show"}, losetupArgs...)
	out, err := exec.Command("losetup", append(args, img)...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		tb.Fatalf("losetup %s: %v: %s", img, err, stderr)
	}
	dev := strings.TrimSpace(string(out))
	abs, _ := filepath.Abs(img)
	forget := record(tb, "loop", dev, abs)
	tb.Cleanup(func() {
		if exec.Command("losetup", "-d", dev).Run() == nil {
			forget()
		}
	})
	return dev
}

// requireTools skips the test unless every named command is on PATH.
func requireTools(tb TB, names ...string) {
	tb.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			tb.Skipf("skipping: needs %s on PATH", name)
		}
	}
}

// DevNumbers is "MAJ:MIN" of a block device node.
func DevNumbers(tb TB, dev string) string {
	tb.Helper()
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		tb.Fatal(err)
	}
	return fmt.Sprintf("%d:%d", unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)))
}

const blkioRoot = "/sys/fs/cgroup/blkio"

// Throttle is a cgroup-v1 blkio group: one that limits a block device
// (NewThrottle, NewReadThrottle) or one without limits (NewBlkioGroup).
type Throttle struct{ Path string }

// NewThrottle makes a blkio cgroup that limits dev to writeIOPS writes per
// second for the processes put in it, and removes it at cleanup. It skips
// when the blkio controller is not mounted.
func NewThrottle(tb TB, dev string, writeIOPS int) *Throttle {
	tb.Helper()
	return newThrottle(tb, dev, "blkio.throttle.write_iops_device", writeIOPS)
}

// NewReadThrottle is NewThrottle for reads: dev is limited to readIOPS
// reads per second (a known ceiling for a capacity sweep).
func NewReadThrottle(tb TB, dev string, readIOPS int) *Throttle {
	tb.Helper()
	return newThrottle(tb, dev, "blkio.throttle.read_iops_device", readIOPS)
}

func newThrottle(tb TB, dev, knob string, iops int) *Throttle {
	tb.Helper()
	t := NewBlkioGroup(tb, filepath.Base(dev))
	rule := fmt.Sprintf("%s %d", DevNumbers(tb, dev), iops)
	if err := os.WriteFile(filepath.Join(t.Path, knob), []byte(rule), 0o644); err != nil {
		tb.Fatalf("blkio throttle %q: %v", rule, err)
	}
	return t
}

// NewBlkioGroup makes a cgroup-v1 blkio group without limits,
// diskcanary-test-PID-NAME, and removes it at cleanup. It skips when the
// blkio controller is not mounted.
func NewBlkioGroup(tb TB, name string) *Throttle {
	tb.Helper()
	RequireRoot(tb)
	if _, err := os.Stat(filepath.Join(blkioRoot, "blkio.throttle.io_service_bytes")); err != nil {
		tb.Skip("skipping: no cgroup-v1 blkio controller at " + blkioRoot)
	}
	path := filepath.Join(blkioRoot, fmt.Sprintf("diskcanary-test-%d-%s", os.Getpid(), name))
	if err := os.Mkdir(path, 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		// A cgroup is removable once its processes are gone; move any
		// straggler (the test itself never joins) back to the root.
		if b, err := os.ReadFile(filepath.Join(path, "cgroup.procs")); err == nil {
			for _, pid := range strings.Fields(string(b)) {
				_ = os.WriteFile(filepath.Join(blkioRoot, "cgroup.procs"), []byte(pid), 0o644)
			}
		}
		_ = os.Remove(path)
	})
	return &Throttle{Path: path}
}

// ActivateBlkioAccounting makes cgroup v1 count dev's I/O per cgroup: the
// kernel does so only once blk-throttle is active on the device, and
// setting a rule of 0 (no limit) on the root group activates it.
func ActivateBlkioAccounting(tb TB, dev string) {
	tb.Helper()
	rule := DevNumbers(tb, dev) + " 0"
	if err := os.WriteFile(filepath.Join(blkioRoot, "blkio.throttle.read_bps_device"), []byte(rule), 0o644); err != nil {
		tb.Fatalf("blkio: activate accounting on %s (%q): %v", dev, rule, err)
	}
}

// Add moves the running process pid into the throttled group.
func (t *Throttle) Add(tb TB, pid int) {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(t.Path, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		tb.Fatalf("blkio cgroup %s: add pid %d: %v", t.Path, pid, err)
	}
}

// Release moves pid back to the root group: its I/O is no longer limited.
func (t *Throttle) Release(tb TB, pid int) {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(blkioRoot, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		tb.Fatalf("blkio: move pid %d back to the root group: %v", pid, err)
	}
}

// Command returns cmd wrapped so the process joins the throttled group
// before it execs: no I/O of it escapes the limit.
func (t *Throttle) Command(name string, args ...string) *exec.Cmd {
	script := `echo $$ > "$0/cgroup.procs" && exec "$@"`
	return exec.Command("sh", append([]string{"-c", script, t.Path, name}, args...)...)
}

// SkipUnderRace skips a test whose assertion is a latency or a rate: the
// race detector slows the code 2-20× and makes such a bound meaningless.
// CI runs every test once without the detector, where these run.
func SkipUnderRace(tb TB) {
	tb.Helper()
	if Race {
		tb.Skip("skipping under the race detector: this test asserts a latency; it runs in the non-race pass")
	}
}
