package testkit

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Leftovers. A test binary that is killed mid-test (go test's -timeout, a
// ^C, the OOM killer) runs no cleanups: its mounts and loop devices stay,
// and a later run finds fewer free loop devices, tmpfs memory held and
// mounts under /tmp. So each mount and loop device made here is recorded
// in registryDir under the test process's pid while it exists, and the
// first root test of every later test process takes down what processes
// that are gone left behind (reapOnce, from RequireRoot).
const registryDir = "/run/diskcanary-testenv"

var (
	reapOnce sync.Once
	entrySeq atomic.Int64
)

// record notes a mount (what = the mountpoint) or a loop device (what =
// the device, backing = its image file) made by this process, and returns
// the function that forgets it once it is undone.
func record(tb TB, kind, what, backing string) (forget func()) {
	tb.Helper()
	if err := os.MkdirAll(registryDir, 0o700); err != nil {
		tb.Fatalf("test leftovers registry: %v", err)
	}
	name := filepath.Join(registryDir, fmt.Sprintf("%d.%d", os.Getpid(), entrySeq.Add(1)))
	if err := os.WriteFile(name, []byte(kind+"\x00"+what+"\x00"+backing), 0o600); err != nil {
		tb.Fatalf("test leftovers registry: %v", err)
	}
	return func() { _ = os.Remove(name) }
}

// reap undoes every recorded mount and loop device whose process is gone,
// mounts first (they may sit on the loop devices), and returns what it
// undid, for the log.
func reap() (undone []string) {
	entries, err := os.ReadDir(registryDir)
	if err != nil {
		return nil
	}
	type entry struct{ file, kind, what, backing string }
	var mounts, loops []entry
	for _, e := range entries {
		pidText, _, _ := strings.Cut(e.Name(), ".")
		pid, err := strconv.Atoi(pidText)
		if err != nil || processAlive(pid) {
			continue
		}
		file := filepath.Join(registryDir, e.Name())
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		f := bytes.SplitN(b, []byte{0}, 3)
		if len(f) != 3 {
			_ = os.Remove(file)
			continue
		}
		en := entry{file, string(f[0]), string(f[1]), string(f[2])}
		if en.kind == "mount" {
			mounts = append(mounts, en)
		} else {
			loops = append(loops, en)
		}
	}
	for _, m := range mounts {
		// EINVAL: not a mountpoint (any more); ENOENT: gone.
		if err := unix.Unmount(m.what, unix.MNT_DETACH); err == nil {
			undone = append(undone, "umount "+m.what)
		}
		_ = os.Remove(m.file)
	}
	for _, l := range loops {
		// Only while it still holds the recorded image: a detached device
		// may since have been taken by a live test.
		if backingFile(l.what) == l.backing {
			if exec.Command("losetup", "-d", l.what).Run() == nil {
				undone = append(undone, "losetup -d "+l.what)
			}
		}
		// Only the images LoopFSIn made: a caller's own image may be anything.
		if strings.HasPrefix(filepath.Base(l.backing), imagePrefix) && os.Remove(l.backing) == nil {
			undone = append(undone, "rm "+l.backing)
		}
		_ = os.Remove(l.file)
	}
	return undone
}

func processAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}

// backingFile is the image a loop device is attached to, or "" when it is
// free.
func backingFile(dev string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
