package probes

// Open-time: a probe target opened through open_checks.go, with its block device.

import (
	"errors"
	"fmt"
	"log/slog"

	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/blockdev"
)

// site is what a probe measures, opened: a locked probe directory, or a
// block device opened read-only, and the block device under it. Both probe
// kinds, in the daemon and in check, open their target through it.
type site struct {
	procfs, sysfs string
	log           *slog.Logger

	dir     *probeDir // nil for a block device
	devFD   int       // the block device's fd, -1 for a directory
	devSize int64
	backing blockdev.Backing
	// gateKey identifies the block device under the target (or the
	// filesystem's st_dev when that is unknown): bursts on one key take
	// turns.
	gateKey uint64
	// fsDev is the filesystem's st_dev: WAL probes on one filesystem share
	// its write budget.
	fsDev uint64
}

// openDirSite opens and locks a probe directory and resolves its device.
func openDirSite(path, procfs, sysfs string, log *slog.Logger) (*site, error) {
	d, err := openProbeDir(path)
	if err != nil {
		return nil, err
	}
	s := &site{procfs: procfs, sysfs: sysfs, log: log, dir: d, devFD: -1}
	t, err := blockdev.Resolve(path, procfs, sysfs)
	if err != nil {
		log.Warn("cannot resolve the device under the probe directory", "path", path, "err", err)
		t.Path = path
	}
	s.backing = t
	var st unix.Stat_t
	if unix.Fstat(d.fd, &st) == nil {
		s.fsDev = st.Dev
	}
	s.gateKey = s.fsDev
	if t.Major != 0 || t.Minor != 0 {
		s.gateKey = unix.Mkdev(t.Major, t.Minor)
	}
	return s, nil
}

// openDeviceSite opens a block device read-only; blockSize must be a
// multiple of its logical block size (O_DIRECT).
func openDeviceSite(path string, blockSize int64, procfs, sysfs string, log *slog.Logger) (*site, error) {
	fd, st, size, lbs, err := openBlockDevice(path)
	if err != nil {
		return nil, err
	}
	if lbs > 0 && blockSize%int64(lbs) != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: block_size %d is not a multiple of the logical block size %d", path, blockSize, lbs)
	}
	maj, min := unix.Major(st.Rdev), unix.Minor(st.Rdev)
	return &site{procfs: procfs, sysfs: sysfs, log: log, devFD: fd, devSize: int64(size),
		backing: blockdev.Backing{Path: path, Major: maj, Minor: min, Device: blockdev.KernelName(sysfs, maj, min)},
		gateKey: st.Rdev, fsDev: st.Rdev}, nil
}

// where names the target in errors.
func (s *site) where() string {
	if s.dir != nil {
		return s.dir.path
	}
	return s.backing.Path
}

func (s *site) close() {
	if s == nil {
		return
	}
	if s.devFD >= 0 {
		unix.Close(s.devFD)
		s.devFD = -1
	}
	s.dir.close()
	s.dir = nil
}

// refusesODirect reports a filesystem that refuses O_DIRECT (tmpfs, some
// FUSE): reads there would come from the page cache.
func (d *probeDir) refusesODirect(name string) bool {
	fd, err := d.create(name, unix.O_DIRECT)
	refused := errors.Is(err, unix.EINVAL)
	if err == nil {
		unix.Close(fd)
	}
	_ = d.remove(name)
	return refused
}

// maxLoopDepth bounds how many loop devices deep untrusted follows backing
// files; a real stack is one or two.
const maxLoopDepth = 8

// untrusted names a probe directory whose filesystem does not tell the
// truth about a disk: warning is the label (fsWarnings' values), why says
// where. A loop device under it is followed to its backing file's
// filesystem, and a loop under that in turn: ext4 on a loop device whose
// file is in tmpfs is memory, though the loop driver adds latency of its own
// and counts its flushes, so neither the tmpfs rule nor the flush check
// sees it.
func (s *site) untrusted() (warning, why string) {
	if s.dir == nil {
		return "", ""
	}
	if w := s.dir.fsWarning(); w != "" {
		return w, w
	}
	return untrustedLoops(s.procfs, s.sysfs, s.backing, 0)
}

// untrustedLoops follows the loop devices under b (untrusted).
func untrustedLoops(procfs, sysfs string, b blockdev.Backing, depth int) (warning, why string) {
	if b.Device == "" || depth >= maxLoopDepth {
		return "", ""
	}
	for _, l := range blockdev.LoopFiles(sysfs, b.Device) {
		var st unix.Statfs_t
		if unix.Statfs(l.File, &st) != nil {
			continue // not visible from here (another mount namespace)
		}
		on := fmt.Sprintf("%s on %s, whose backing file %s", b.FSType, l.Loop, l.File)
		if w := untrustedFS[int64(st.Type)]; w != "" {
			return w, fmt.Sprintf("%s is on %s", on, w)
		}
		next, err := blockdev.Resolve(l.File, procfs, sysfs)
		if err != nil {
			continue
		}
		if w, why := untrustedLoops(procfs, sysfs, next, depth+1); w != "" {
			return w, fmt.Sprintf("%s is %s", on, why)
		}
	}
	return "", ""
}
