package probes

// Open-time checks: each probe directory, file and device, checked as it is opened.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

var (
	errUnsafe    = errors.New("refusing an unsafe probe path")
	errLocked    = errors.New("probe directory is locked by another diskcanary")
	errNoODirect = errors.New("filesystem refuses O_DIRECT")
	// errFSGone wraps ENOENT so reasonOf says "missing": the filesystem the
	// probe directory was on is gone, whatever now answers at its path.
	errFSGone = fmt.Errorf("the probe directory's filesystem is gone: %w", unix.ENOENT)
)

// probeDir is an opened, locked probe directory, owned by the daemon's
// user and writable by no one else. Every probe file is a single name
// (no separator) opened relative to its fd without following any symlink
// or crossing a mount, and an existing one is used only if it is a regular
// file of ours with one link: what a probe writes is only ever its own file.
type probeDir struct {
	path    string
	fd      int
	lockKey [2]uint64
}

// dirLocks holds one flock per probe directory for this process: probes of
// one daemon share a directory, but two daemons sharing one would measure
// each other, so the second daemon is refused.
var dirLocks = struct {
	sync.Mutex
	byInode map[[2]uint64]*dirLock
}{byInode: map[[2]uint64]*dirLock{}}

type dirLock struct {
	fd   int
	refs int
}

// dirDevices pins each probe directory path to the filesystem (st_dev) it
// was on when this process first opened it. After `umount -l` (or a disk
// that failed to mount again) the path answers from the filesystem
// underneath; probing there would report the wrong disk as healthy.
var dirDevices = struct {
	sync.Mutex
	byPath map[string]uint64
}{byPath: map[string]uint64{}}

func pinKey(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return filepath.Clean(dir)
}

// openProbeDir opens and locks dir. It creates the last path element
// (mode 0700) but never missing parents: a parent that is not there is
// usually a disk that is not mounted, and probing the disk underneath
// would measure the wrong thing. For the same reason a directory seen on
// one filesystem is never used (or recreated) on another within a process.
func openProbeDir(dir string) (*probeDir, error) {
	key := pinKey(dir)
	dirDevices.Lock()
	pinned, isPinned := dirDevices.byPath[key]
	dirDevices.Unlock()

	fd, err := openDirNoFollow(dir)
	if errors.Is(err, unix.ENOENT) {
		if isPinned {
			// Check where it would be created before creating it.
			var parent unix.Stat_t
			if err := unix.Stat(filepath.Dir(dir), &parent); err != nil {
				return nil, &opError{"stat", filepath.Dir(dir), err}
			}
			if parent.Dev != pinned {
				return nil, fsGone(dir, pinned, parent.Dev)
			}
		}
		if err := unix.Mkdir(dir, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, &opError{"mkdir", dir, err}
		}
		fd, err = openDirNoFollow(dir)
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%s: %w: not a plain directory (symlinks are not followed)", dir, errUnsafe)
		}
		return nil, &opError{"open", dir, err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &opError{"stat", dir, err}
	}
	if err := checkDirOwner(dir, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if isPinned && st.Dev != pinned {
		unix.Close(fd)
		return nil, fsGone(dir, pinned, st.Dev)
	}
	d := &probeDir{path: dir, fd: fd, lockKey: [2]uint64{st.Dev, st.Ino}}
	if err := d.lock(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if !isPinned {
		dirDevices.Lock()
		if _, ok := dirDevices.byPath[key]; !ok {
			dirDevices.byPath[key] = st.Dev
		}
		dirDevices.Unlock()
	}
	return d, nil
}

// errDirGone wraps ENOENT so reasonOf says "missing": the probe directory
// was deleted, renamed or unmounted while the probe held it open.
var errDirGone = fmt.Errorf("the probe directory was deleted, renamed or unmounted while in use: %w", unix.ENOENT)

// gone reports a probe directory that is no longer at its path: deleted
// (its files, a 1 GiB working set among them, live on while the probe
// holds them) or renamed (the probe would go on writing under the old
// name). lstat of the path against the fd's dev+ino; a path it cannot stat
// for another reason (EACCES) is left for the next open to report.
func (d *probeDir) gone() error {
	var st unix.Stat_t
	err := unix.Lstat(d.path, &st)
	switch {
	case err == nil && st.Dev == d.lockKey[0] && st.Ino == d.lockKey[1]:
		return nil
	case err == nil:
		return fmt.Errorf("%s: %w: something else is at that path now (%s); stopped writing to the old one and released its files and lock", d.path, errDirGone, fileKind(st.Mode))
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%s: %w: nothing is at that path now; stopped writing to it and released its files and lock", d.path, errDirGone)
	}
	return nil
}

func openDirNoFollow(dir string) (int, error) {
	return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

func fsGone(dir string, was, now uint64) error {
	return fmt.Errorf("%s: %w: it was on device %d:%d, the path now leads to %d:%d (unmounted?); not probing or creating it there: mount the filesystem again, or restart diskcanary if the move is intended",
		dir, errFSGone, unix.Major(was), unix.Minor(was), unix.Major(now), unix.Minor(now))
}

// checkDirOwner is sshd's StrictModes for the probe directory: another
// user who owns it or may write in it could plant a FIFO (a probe blocked
// forever), a hard link (a probe writing someone else's file) or lock
// the daemon out.
func checkDirOwner(dir string, st *unix.Stat_t) error {
	if euid := uint32(os.Geteuid()); st.Uid != euid {
		return fmt.Errorf("%s: %w: owned by uid %d, not by diskcanary's uid %d: chown it to %d, or remove it and diskcanary creates it (mode 0700)",
			dir, errUnsafe, st.Uid, euid, euid)
	}
	if perm := st.Mode & 0o7777; perm&0o022 != 0 {
		return fmt.Errorf("%s: %w: writable by group or others (mode %04o): chmod go-w %s", dir, errUnsafe, perm, dir)
	}
	return nil
}

// lock takes this process's flock on the directory, or a reference to it.
func (d *probeDir) lock() error {
	dirLocks.Lock()
	defer dirLocks.Unlock()
	if l, ok := dirLocks.byInode[d.lockKey]; ok {
		l.refs++
		return nil
	}
	lfd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &opError{"open", d.path, err}
	}
	if err := unix.Flock(lfd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(lfd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("%s: %w", d.path, errLocked)
		}
		return &opError{"lock", d.path, err}
	}
	dirLocks.byInode[d.lockKey] = &dirLock{fd: lfd, refs: 1}
	return nil
}

func (d *probeDir) close() {
	if d == nil || d.fd < 0 {
		return
	}
	unix.Close(d.fd)
	d.fd = -1
	dirLocks.Lock()
	defer dirLocks.Unlock()
	if l, ok := dirLocks.byInode[d.lockKey]; ok {
		if l.refs--; l.refs == 0 {
			unix.Close(l.fd) // releases the flock
			delete(dirLocks.byInode, d.lockKey)
		}
	}
}

// checkName refuses a probe file name that is not one plain name in the
// directory: a "/" would let openat walk out of it ("a/../../victim" from a
// probe name), "." and ".." are the directory and its parent.
func (d *probeDir) checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%s: %w: probe file name %q is not a single name in the directory", d.path, errUnsafe, name)
	}
	return nil
}

// openat2Missing is set once the kernel (< 5.6) or a seccomp filter says
// ENOSYS; openat with O_NOFOLLOW and a separator-free name is then as safe,
// except that it would follow a mount on the name (which takes root).
var openat2Missing atomic.Bool

// openat opens name in the directory, resolving nothing: no symlink, no
// "..", no mount crossing.
func (d *probeDir) openat(name string, flags int, mode uint32) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !openat2Missing.Load() {
		how := unix.OpenHow{Flags: uint64(flags), Mode: uint64(mode),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV}
		fd, err := unix.Openat2(d.fd, name, &how)
		switch {
		case errors.Is(err, unix.ENOSYS):
			openat2Missing.Store(true)
		case errors.Is(err, unix.EPERM):
			// A seccomp filter that predates openat2 (SystemCallErrorNumber=EPERM);
			// a real EPERM comes back from openat too.
		default:
			return fd, err
		}
	}
	return unix.Openat(d.fd, name, flags, mode)
}

// create makes a new probe file: O_EXCL|O_NOFOLLOW, so it is never an
// existing file or a symlink. A stale regular file from a crash (or a
// planted hard link: only the name goes, never the other file's data) is
// removed first, and a removal that fails is the error (on a filesystem
// the kernel made read-only, EROFS, reason "read_only"), not the EEXIST
// the create would then meet; anything else in the way is refused and
// left for the operator to see.
func (d *probeDir) create(name string, extra int) (int, error) {
	if err := d.checkName(name); err != nil {
		return -1, err
	}
	if err := d.removeStale(name); err != nil {
		return -1, &opError{"remove the stale", filepath.Join(d.path, name), err}
	}
	fd, err := d.openat(name, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|extra, 0o600)
	if errors.Is(err, unix.EEXIST) {
		err = fmt.Errorf("%w (%w): a symlink or special file is in the way; remove it", errUnsafe, err)
	}
	if err != nil {
		return -1, &opError{"create", filepath.Join(d.path, name), err}
	}
	return fd, nil
}

// open opens an existing probe file. It is used only when it is a regular
// file owned by the daemon's user with one link: a hard link planted at a
// probe name would otherwise have the probe overwrite another file every
// cycle. It never blocks: a FIFO or device is refused before it is opened,
// and O_NONBLOCK covers the race.
func (d *probeDir) open(name string, flags int) (int, error) {
	path := filepath.Join(d.path, name)
	if err := d.checkName(name); err != nil {
		return -1, err
	}
	var before unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &before, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return -1, &opError{"open", path, err}
	}
	if err := checkProbeFile(path, &before); err != nil {
		return -1, err
	}
	fd, err := d.openat(name, flags|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, &opError{"open", path, err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &opError{"stat", path, err}
	}
	if err := checkProbeFile(path, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Ino != before.Ino {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: %w: replaced while being opened", path, errUnsafe)
	}
	if flags&unix.O_NONBLOCK == 0 {
		if err := clearNonblock(fd); err != nil {
			unix.Close(fd)
			return -1, &opError{"fcntl", path, err}
		}
	}
	return fd, nil
}

// checkFile says why an existing file is not one the probe may use.
func checkProbeFile(path string, st *unix.Stat_t) error {
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%s: %w: not a regular file (%s); remove it", path, errUnsafe, fileKind(st.Mode))
	case st.Nlink != 1:
		return fmt.Errorf("%s: %w: has %d hard links; a probe file has one", path, errUnsafe, st.Nlink)
	case st.Uid != uint32(os.Geteuid()):
		return fmt.Errorf("%s: %w: owned by uid %d, not by diskcanary's uid %d", path, errUnsafe, st.Uid, os.Geteuid())
	}
	return nil
}

func clearNonblock(fd int) error {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	return err
}

// remove unlinks a probe file: one name in the directory, never a path.
func (d *probeDir) remove(name string) error {
	if err := d.checkName(name); err != nil {
		return err
	}
	return unix.Unlinkat(d.fd, name, 0)
}

// removeStale unlinks a regular file at name; it is not an error that
// there is none.
func (d *probeDir) removeStale(name string) error {
	var st unix.Stat_t
	if unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		if err := d.remove(name); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	return nil
}

func (d *probeDir) rename(from, to string) error {
	if err := d.checkName(from); err != nil {
		return err
	}
	if err := d.checkName(to); err != nil {
		return err
	}
	return unix.Renameat(d.fd, from, d.fd, to)
}

// openBlockDevice opens a randread probe's device read-only with O_DIRECT.
// Symlinks are followed (/dev/disk/by-id/...), but the target must be a
// block device before it is opened at all: opening a FIFO blocks forever,
// and opening some character devices acts (/dev/watchdog arms a reboot).
// The open itself is non-blocking and checked again, against a swap. It
// returns the device's size and logical block size; it never opens for
// writing.
func openBlockDevice(path string) (fd int, st unix.Stat_t, size uint64, lbs int, err error) {
	var pre unix.Stat_t
	if err := unix.Stat(path, &pre); err != nil {
		return -1, st, 0, 0, &opError{"stat", path, err}
	}
	if pre.Mode&unix.S_IFMT != unix.S_IFBLK {
		return -1, st, 0, 0, fmt.Errorf("%s: %w: not a block device (%s); device: takes a disk such as /dev/disk/by-id/...", path, errUnsafe, fileKind(pre.Mode))
	}
	fd, err = unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return -1, st, 0, 0, fmt.Errorf("%s: %w", path, errNoODirect)
		}
		return -1, st, 0, 0, &opError{"open", path, err}
	}
	if err = unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, 0, 0, &opError{"stat", path, err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK || st.Rdev != pre.Rdev {
		unix.Close(fd)
		return -1, st, 0, 0, fmt.Errorf("%s: %w: not a block device (%s), or replaced while being opened", path, errUnsafe, fileKind(st.Mode))
	}
	if err := clearNonblock(fd); err != nil {
		unix.Close(fd)
		return -1, st, 0, 0, &opError{"fcntl", path, err}
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&size))); e != 0 {
		unix.Close(fd)
		return -1, st, 0, 0, &opError{"ioctl BLKGETSIZE64", path, e}
	}
	lbs, _ = unix.IoctlGetInt(fd, unix.BLKSSZGET)
	return fd, st, size, lbs, nil
}

// checkFree refuses to use need bytes if that leaves less than floor free
// for unprivileged users (f_bavail: what etcd itself could still use).
func (d *probeDir) checkFree(need, floor int64) error {
	var s unix.Statfs_t
	if err := unix.Fstatfs(d.fd, &s); err != nil {
		return &opError{"statfs", d.path, err}
	}
	avail := int64(s.Bavail) * int64(s.Bsize)
	if avail-need < floor {
		return fmt.Errorf("%s: %w: %d bytes available, probe needs %d, floor %d", d.path, errLowSpace, avail, need, floor)
	}
	return nil
}

// Filesystem types that do not tell the truth about durability or latency.
// Values are f_type magic numbers from statfs(2).
var untrustedFS = map[int64]string{
	0x01021994: "tmpfs",     // TMPFS_MAGIC: memory, fdatasync is a no-op
	0x858458f6: "tmpfs",     // RAMFS_MAGIC
	0x794c7630: "overlayfs", // OVERLAYFS_SUPER_MAGIC: measures the upper layer, copy-up skews the first write
	0x65735546: "fuse",      // FUSE_SUPER_MAGIC: a userspace daemon decides what fsync means
	0x2fc12fc1: "zfs",       // ZFS: sync=disabled makes fdatasync return without writing
	0x6969:     "nfs",       // NFS_SUPER_MAGIC: network latency, server-side caching
}

// fsWarning names a filesystem that lies (empty if none).
func (d *probeDir) fsWarning() string {
	var s unix.Statfs_t
	if unix.Fstatfs(d.fd, &s) != nil {
		return ""
	}
	return untrustedFS[int64(s.Type)]
}

// fsWarnings is every warning fsWarning can give, sorted: the values of
// diskcanary_probe_target_warning{warning} that a target's filesystem sets.
func fsWarnings() []string {
	var ws []string
	for _, w := range untrustedFS {
		if !slices.Contains(ws, w) {
			ws = append(ws, w)
		}
	}
	slices.Sort(ws)
	return ws
}

// --- the read working set ---

// The first block of a working-set file is a header; recognising it (with
// the size and st_blocks) is what lets a restart skip rewriting 1 GiB.
const (
	readsetMagic  = "diskcanary-readset v1\n"
	readsetHeader = 4096
)

// readsetValid reports whether name is a complete working set of size bytes:
// our header, the right size, and fully allocated (st_blocks), because a
// sparse or thin region returns zeros fast and flatters the result.
func (d *probeDir) readsetValid(name string, size int64) bool {
	fd, err := d.open(name, unix.O_RDONLY)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != size || st.Blocks*512 < size {
		return false
	}
	hdr := make([]byte, len(readsetMagic)+24)
	if n, err := unix.Pread(fd, hdr, 0); err != nil || n != len(hdr) {
		return false
	}
	if !bytes.HasPrefix(hdr, []byte(readsetMagic)) {
		return false
	}
	rest := string(hdr[len(readsetMagic):])
	line, _, _ := strings.Cut(rest, "\n")
	got, err := strconv.ParseInt(line, 10, 64)
	return err == nil && got == size
}

// writeReadset fills a new working set with random (non-zero, incompressible)
// data, fdatasyncs it and renames it into place. It returns the bytes written.
// A symlink, FIFO or other non-file at name is refused rather than renamed
// over: it was planted, and the operator should see it.
func (d *probeDir) writeReadset(name string, size int64, fl *inflight, stop *atomic.Bool) (int64, error) {
	if err := d.checkName(name); err != nil {
		return 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, fmt.Errorf("%s: %w: not a regular file (%s); remove it", filepath.Join(d.path, name), errUnsafe, fileKind(st.Mode))
	}
	tmp := name + ".tmp"
	fd, err := d.create(tmp, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	fail := func(stage string, err error) (int64, error) {
		_ = d.remove(tmp)
		return 0, &opError{stage, filepath.Join(d.path, tmp), err}
	}
	if err := unix.Fallocate(fd, 0, 0, size); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		return fail("fallocate", err)
	}
	var seed [32]byte
	for i := range seed {
		seed[i] = byte(rand.Uint32())
	}
	src := rand.NewChaCha8(seed)
	chunk := make([]byte, 1<<20)
	var written int64
	for off := int64(0); off < size; off += int64(len(chunk)) {
		if stop != nil && stop.Load() {
			return fail("write", errInterrupted)
		}
		b := chunk
		if rem := size - off; rem < int64(len(b)) {
			b = b[:rem]
		}
		_, _ = src.Read(b)
		if off == 0 {
			h := fmt.Sprintf("%s%d\n", readsetMagic, size)
			copy(b, h)
		}
		fl.begin()
		n, err := unix.Pwrite(fd, b, off)
		fl.end()
		if err != nil {
			return fail("write", err)
		}
		if n != len(b) {
			return fail("write", errShortIO)
		}
		written += int64(n)
		fl.laidOut.Store(written)
	}
	fl.begin()
	err = unix.Fdatasync(fd)
	fl.end()
	if err != nil {
		return fail("fdatasync", err)
	}
	if err := d.rename(tmp, name); err != nil {
		return fail("rename", err)
	}
	return written, nil
}

// blockPicker draws uniform random block indexes in [lo, hi).
type blockPicker struct {
	rng    *rand.Rand
	lo, hi int64
}

func newBlockPicker(lo, hi int64) *blockPicker {
	return &blockPicker{rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())), lo: lo, hi: hi}
}

func (p *blockPicker) next() int64 { return p.lo + p.rng.Int64N(p.hi-p.lo) }
