package probes

// Config-time preflight: what an open will find, reported without writing.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/blockdev"
	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
)

// Preflight reports, without writing anything, what the daemon will find
// when a probe opens its target, for `serve --config.check`: an error for
// what makes every cycle fail (a parent that is missing, a directory the
// daemon's user may not create or write, one another user owns, a device it
// may not read), and warnings for a filesystem whose latency is not a
// disk's, which the daemon flags with diskcanary_probe_target_warning.
// CheckHost's refusals (symlinks, etcd's own directories, ...) come first;
// Preflight assumes the path passed them.
func Preflight(c config.Probe) (warnings []string, err error) {
	if c.Device != "" {
		// Opened O_RDONLY; the kernel's answer for the effective uid,
		// so root passes as it will at run time.
		if err := unix.Faccessat(unix.AT_FDCWD, c.Device, unix.R_OK, unix.AT_EACCESS); err != nil {
			return nil, fmt.Errorf("%s: cannot read it as uid %d: %w", c.Device, os.Geteuid(), err)
		}
		return nil, nil
	}
	dir := filepath.Clean(c.Dir)
	var st unix.Stat_t
	err = unix.Stat(dir, &st)
	switch {
	case errors.Is(err, unix.ENOENT):
		// openProbeDir creates the last element only: a missing parent is
		// usually a disk that is not mounted, and creating it would probe
		// the disk underneath.
		parent := filepath.Dir(dir)
		var pst unix.Stat_t
		if err := unix.Stat(parent, &pst); err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				return nil, fmt.Errorf("%s: its parent %s does not exist, and diskcanary never creates parents (a missing parent is usually a disk that is not mounted): mount it or create %s", dir, parent, parent)
			}
			return nil, fmt.Errorf("%s: stat its parent: %w", dir, err)
		}
		if err := unix.Faccessat(unix.AT_FDCWD, parent, unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
			return nil, fmt.Errorf("%s: cannot create it as uid %d: %s: %w: create it owned by that user (mode 0700)", dir, os.Geteuid(), parent, err)
		}
		return fsWarningsAt(parent, dir)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if err := checkDirOwner(dir, &st); err != nil {
		return nil, err
	}
	// The mode bits alone say nothing of a read-only mount or an ACL.
	if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
		return nil, fmt.Errorf("%s: cannot write in it as uid %d: %w", dir, os.Geteuid(), err)
	}
	return fsWarningsAt(dir, dir)
}

// fsWarningsAt names the filesystem at path if it is one the daemon
// distrusts (fsWarning's list); dir is the probe directory it will hold.
func fsWarningsAt(path, dir string) ([]string, error) {
	var s unix.Statfs_t
	if err := unix.Statfs(path, &s); err != nil {
		return nil, fmt.Errorf("%s: statfs %s: %w", dir, path, err)
	}
	w, why := untrustedFS[int64(s.Type)], ""
	if w == "" {
		// A loop device under it: the filesystem of its backing file.
		var p hostpath.Paths
		b, err := blockdev.Resolve(path, p.Proc(), p.Sys())
		if err != nil {
			return nil, nil
		}
		if w, why = untrustedLoops(p.Proc(), p.Sys(), b, 0); w == "" {
			return nil, nil
		}
	} else {
		why = w
	}
	return []string{fmt.Sprintf("%s is on %s: its latencies are not a disk's, and the daemon will export diskcanary_probe_target_warning{warning=%q} 1", dir, why, w)}, nil
}
