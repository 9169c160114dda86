package probes

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

var (
	errUnsafe    = errors.New("refusing an unsafe probe path")
	errLocked    = errors.New("probe directory is locked by another diskcanary")
	errNoODirect = errors.New("filesystem refuses O_DIRECT")
)

// Probe files all start with this prefix so they are easy to recognise and
// to clean up (README "Removal").
const filePrefix = ".diskcanary-"

// probeDir is an opened, locked probe directory. Every probe file is opened
// relative to its fd with O_NOFOLLOW, so a symlink swapped in later can
// never redirect a write.
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

// openProbeDir opens and locks dir. It creates the last path element
// (mode 0700) but never missing parents: a parent that is not there is
// usually a disk that is not mounted, and probing the disk underneath
// would measure the wrong thing.
func openProbeDir(dir string) (*probeDir, error) {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &opError{"mkdir", dir, err}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
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
	key := [2]uint64{st.Dev, st.Ino}
	dirLocks.Lock()
	defer dirLocks.Unlock()
	if l, ok := dirLocks.byInode[key]; ok {
		l.refs++
		return &probeDir{path: dir, fd: fd, lockKey: key}, nil
	}
	lfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(fd)
		return nil, &opError{"open", dir, err}
	}
	if err := unix.Flock(lfd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		unix.Close(lfd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", dir, errLocked)
		}
		return nil, &opError{"lock", dir, err}
	}
	dirLocks.byInode[key] = &dirLock{fd: lfd, refs: 1}
	return &probeDir{path: dir, fd: fd, lockKey: key}, nil
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

// create makes a new probe file: O_EXCL|O_NOFOLLOW, so it is never an
// existing file or a symlink. A stale file of ours from a crash is removed
// first (only if it is a regular file).
func (d *probeDir) create(name string, extra int) (int, error) {
	d.removeStale(name)
	fd, err := unix.Openat(d.fd, name, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC|extra, 0o600)
	if err != nil {
		return -1, &opError{"create", filepath.Join(d.path, name), err}
	}
	return fd, nil
}

// open opens an existing probe file without following symlinks.
func (d *probeDir) open(name string, flags int) (int, error) {
	fd, err := unix.Openat(d.fd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &opError{"open", filepath.Join(d.path, name), err}
	}
	return fd, nil
}

func (d *probeDir) remove(name string) error {
	return unix.Unlinkat(d.fd, name, 0)
}

func (d *probeDir) removeStale(name string) {
	var st unix.Stat_t
	if unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		_ = d.remove(name)
	}
}

func (d *probeDir) rename(from, to string) error {
	return unix.Renameat(d.fd, from, d.fd, to)
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
func (d *probeDir) writeReadset(name string, size int64, fl *inflight) (int64, error) {
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
