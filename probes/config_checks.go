package probes

// Config-time checks: a config's probe paths against the host, before any write.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
)

// filePrefix starts the name of every file a probe creates, so they are
// easy to recognise and to clean up (docs/deploy.md, "Removal"), and CheckProbeDir
// can tell a dedicated mount (only these and lost+found) from one that
// holds other data.
const filePrefix = ".diskcanary-"

// CheckHost checks the probe directories against the host as it is now, on
// top of config.Validate, at startup and for `serve --config.check`, so no
// first write lands where it must not. It refuses a relative path or one
// with "..", anything but a plain directory (never a block device), an
// etcd data directory or anything inside it (also through symlinked
// parents), and the root of a mounted filesystem holding other data. A
// directory that does not exist yet is accepted: the probe creates it (not
// its parents) and reports a missing mount as a failure.
func CheckHost(c *config.Config) error {
	for i := range c.Probes.Targets {
		p := &c.Probes.Targets[i]
		if p.Dir != "" {
			if err := CheckProbeDir(p.Dir); err != nil {
				return p.Errorf("probes.targets[].dir: %v", err)
			}
		}
		if p.Device != "" {
			if err := CheckProbeDevice(p.Device); err != nil {
				return p.Errorf("probes.targets[].device: %v", err)
			}
		}
	}
	return nil
}

var (
	// errUnsafeProbeDir is wrapped by every CheckProbeDir refusal.
	errUnsafeProbeDir = errors.New("unsafe probe directory")
	// errNotBlockDevice is wrapped by every CheckProbeDevice refusal.
	errNotBlockDevice = errors.New("not a block device")
)

// CheckProbeDevice checks a randread probe's device: it must exist and be a
// block device. Symlinks are followed (/dev/disk/by-id/...). It only
// stats, never opens: opening a FIFO blocks forever, and opening some
// character devices acts (/dev/watchdog arms a reboot); /dev/zero would
// read zeros fast and report a perfect disk.
func CheckProbeDevice(dev string) error {
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%s: %w: it does not exist; name a disk, e.g. /dev/disk/by-id/...", dev, errNotBlockDevice)
		}
		return fmt.Errorf("%s: %w", dev, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return fmt.Errorf("%s: %w: it is %s; device: takes a disk, e.g. /dev/disk/by-id/...", dev, errNotBlockDevice, fileKind(st.Mode))
	}
	return nil
}

// fileKind names a file type from its st_mode, for refusals that say what
// was found where a directory, a regular file or a block device belongs.
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symlink"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFREG:
		return "a regular file"
	}
	return fmt.Sprintf("of type %#o", mode&unix.S_IFMT)
}

// CheckProbeDir applies CheckHost's rules to one directory.
func CheckProbeDir(dir string) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", dir, errUnsafeProbeDir, fmt.Sprintf(format, args...))
	}
	if !filepath.IsAbs(dir) {
		return refuse("not an absolute path")
	}
	for _, el := range strings.Split(dir, "/") {
		if el == ".." {
			return refuse(`contains ".."; name the directory directly`)
		}
	}
	dir = filepath.Clean(dir)

	if why := etcdRefusal(dir); why != "" {
		return refuse("%s", why)
	}
	// The same through symlinked parents: the kernel writes where the path
	// resolves, not where it reads.
	real, err := resolveExisting(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if real != dir {
		if why := etcdRefusal(real); why != "" {
			return refuse("resolves through symlinks to %s, which %s", real, why)
		}
	}

	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	switch m := fi.Mode(); {
	case m&fs.ModeSymlink != 0:
		return refuse("is a symlink; probe directories are never followed through symlinks, name the target directly")
	case m&fs.ModeDevice != 0 && m&fs.ModeCharDevice == 0:
		return refuse("is a block device; write probes never write to a device (a randread probe can read one with device:)")
	case !m.IsDir():
		return refuse("is not a directory (%v)", m.Type())
	}

	root, err := isMountRoot(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if root {
		if other, err := foreignEntry(dir); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		} else if other != "" {
			return refuse("is the root of a mounted filesystem that holds other data (%s); use a dedicated subdirectory, e.g. %s", other, filepath.Join(dir, "diskcanary"))
		}
	}
	return nil
}

// etcdRefusal says why dir is in an etcd member tree, whether it exists yet
// or not, or "" if it is not.
func etcdRefusal(dir string) string {
	for a := dir; ; a = filepath.Dir(a) {
		if what := etcdRole(a); what != "" && (a == dir || what != etcdDataDir) {
			if a == dir {
				return fmt.Sprintf("is %s; use a sibling directory on the same filesystem, e.g. %s", what, filepath.Join(filepath.Dir(etcdDataRoot(a)), "etcd-diskcanary"))
			}
			return fmt.Sprintf("is inside %s %s; use a sibling of the etcd data directory on the same filesystem", what, a)
		}
		if a == "/" {
			return ""
		}
	}
}

// resolveExisting resolves the symlinks of the longest existing prefix of
// dir and appends the rest, which does not exist yet.
func resolveExisting(dir string) (string, error) {
	rest := ""
	for p := dir; ; p = filepath.Dir(p) {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || p == "/" {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

const (
	etcdDataDir   = "an etcd data directory"
	etcdMemberDir = "an etcd member directory"
	etcdStoreDir  = "etcd's wal or snap directory"
)

// etcdRole names what path is in an etcd data layout (data-dir/member/{wal,snap}),
// or "" if it is none of those.
func etcdRole(path string) string {
	isDir := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && fi.IsDir()
	}
	hasStore := func(member string) bool {
		return isDir(filepath.Join(member, "wal")) || isDir(filepath.Join(member, "snap"))
	}
	switch {
	case hasStore(filepath.Join(path, "member")):
		return etcdDataDir
	case filepath.Base(path) == "member" && hasStore(path):
		return etcdMemberDir
	case (filepath.Base(path) == "wal" || filepath.Base(path) == "snap") &&
		filepath.Base(filepath.Dir(path)) == "member" && isDir(path):
		return etcdStoreDir
	}
	return ""
}

// etcdDataRoot walks up from a path in an etcd layout to its data directory.
func etcdDataRoot(path string) string {
	for a := path; a != "/"; a = filepath.Dir(a) {
		if etcdRole(a) == etcdDataDir {
			return a
		}
	}
	return path
}

// isMountRoot reports whether dir is the root of a mount. statx's
// STATX_ATTR_MOUNT_ROOT also sees bind mounts of a directory on the same
// filesystem; kernels before 5.8 fall back to comparing st_dev with "..".
func isMountRoot(dir string) (bool, error) {
	if dir == "/" {
		return true, nil
	}
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx); err == nil &&
		stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Stat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}

// foreignEntry returns the name of an entry that is neither a probe file nor
// the lost+found every ext* and xfs_repair root has, or "" if there is none.
func foreignEntry(dir string) (string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return "", err
	}
	defer f.Close()
	for {
		names, err := f.Readdirnames(64)
		for _, n := range names {
			if n != "lost+found" && !strings.HasPrefix(n, filePrefix) {
				return n, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return "", nil // every entry was ours
		}
		if err != nil {
			return "", err
		}
	}
}
