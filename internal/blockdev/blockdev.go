// Package blockdev maps a filesystem path to what is under it: the mount,
// the filesystem type, and the kernel block device name (the name used in
// /proc/diskstats and node_exporter's `device` label).
package blockdev

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// Backing is what a path lives on: its mount and the block devices under it.
type Backing struct {
	Path       string // absolute, symlinks resolved
	Mountpoint string
	FSType     string // from mountinfo, e.g. ext4, xfs, tmpfs, fuse.diskcanary-testfs
	Source     string // mount source, e.g. /dev/loop0
	Major      uint32
	Minor      uint32
	// Device is the kernel name ("sda1", "dm-0", "loop3"); empty when the
	// filesystem has no block device (tmpfs, overlay, fuse, nfs).
	Device string
	// Disks are the physical disks under Device (a partition's disk, a dm
	// or md device's slaves, recursively); Device itself for a whole disk.
	Disks []string
}

// Resolve finds the mount and block device of path. procfs and sysfs are the
// host's /proc and /sys (--path.procfs, --path.sysfs).
func Resolve(path, procfs, sysfs string) (Backing, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Backing{}, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	var st unix.Stat_t
	if err := unix.Stat(abs, &st); err != nil {
		return Backing{}, fmt.Errorf("stat %s: %w", abs, err)
	}
	t := Backing{Path: abs, Major: unix.Major(st.Dev), Minor: unix.Minor(st.Dev)}
	m, err := findMount(procfs, abs, t.Major, t.Minor)
	if err != nil {
		return t, err
	}
	t.Mountpoint, t.FSType, t.Source = m.Mountpoint, m.FSType, m.Source
	t.Device = KernelName(sysfs, t.Major, t.Minor)
	if t.Device == "" {
		t.Device = SourceDevice(sysfs, t.Source)
	}
	if t.Device != "" {
		t.Disks = PhysicalDisks(sysfs, t.Device)
	}
	return t, nil
}

// SourceDevice is the kernel name of the block device a mount source
// names: btrfs (and a FUSE filesystem over a disk) report an anonymous
// st_dev, and the source names the real device. "" when the source is no
// block device (a FUSE filesystem's fsname, /dev/fuse, a file in /dev/shm).
func SourceDevice(sysfs, source string) string {
	if !strings.HasPrefix(source, "/dev/") {
		return ""
	}
	var st unix.Stat_t
	if unix.Stat(source, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return ""
	}
	return KernelName(sysfs, unix.Major(st.Rdev), unix.Minor(st.Rdev))
}

// KernelName maps MAJ:MIN to the kernel device name via /sys/dev/block
// (the name in /proc/diskstats).
func KernelName(sysfs string, major, minor uint32) string {
	link, err := os.Readlink(filepath.Join(sysfs, "dev/block", fmt.Sprintf("%d:%d", major, minor)))
	if err != nil {
		return ""
	}
	return NameFromSysfs(filepath.Base(link))
}

// Mount is one line of mountinfo (proc(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
type Mount struct {
	Major, Minor uint32
	Mountpoint   string
	FSType       string
	Source       string
	// ReadOnly is the mount's own flag (the sixth field); SuperReadOnly is
	// the filesystem's (the super options). The kernel turning a
	// filesystem read-only after an error (ext4 errors=remount-ro, btrfs
	// "forced readonly") sets only the second. Newer ext4 (seen on 6.18)
	// keeps "rw" there and adds "emergency_ro" instead, or "shutdown"
	// after a forced shutdown (fs/ext4/super.c _ext4_show_options): both
	// count as read-only.
	ReadOnly, SuperReadOnly bool
}

// Mounts reads this process's mount table, procfsRoot/self/mountinfo, with
// procfs's parser. That parser leaves the kernel's octal escapes in place
// (\040 for a space, \011, \012, \134), so the mountpoint and source are
// unescaped here to be paths. It refuses the whole file on a line it cannot
// parse (the kernel writes none) or one over 64 KiB (its bufio.Scanner's
// limit; the longest real lines, overlay mounts with many lowerdirs, are a
// few KiB).
func Mounts(procfsRoot string) ([]Mount, error) {
	fs, err := procfs.NewFS(procfsRoot)
	if err != nil {
		return nil, err
	}
	infos, err := fs.GetMounts()
	if pe := (*iofs.PathError)(nil); err != nil && !errors.As(err, &pe) {
		err = fmt.Errorf("%s: %w", filepath.Join(procfsRoot, "self/mountinfo"), err) // a parse error does not name the file
	}
	if err != nil {
		return nil, err
	}
	ms := make([]Mount, 0, len(infos))
	for _, info := range infos {
		majS, minS, _ := strings.Cut(info.MajorMinorVer, ":")
		major, err1 := strconv.ParseUint(majS, 10, 32)
		minor, err2 := strconv.ParseUint(minS, 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: mount %d: MAJ:MIN %q is not two numbers", filepath.Join(procfsRoot, "self/mountinfo"), info.MountID, info.MajorMinorVer)
		}
		_, ro := info.Options["ro"]
		ms = append(ms, Mount{
			Major: uint32(major), Minor: uint32(minor),
			Mountpoint:    unescape(info.MountPoint),
			FSType:        info.FSType,
			Source:        unescape(info.Source),
			ReadOnly:      ro,
			SuperReadOnly: hasAny(info.SuperOptions, "ro", "emergency_ro", "shutdown"),
		})
	}
	return ms, nil
}

func hasAny(opts map[string]string, keys ...string) bool {
	for _, k := range keys {
		if _, ok := opts[k]; ok {
			return true
		}
	}
	return false
}

// findMount picks the mountinfo entry with the longest mountpoint prefix of
// path, preferring one whose MAJ:MIN matches the file's st_dev (bind mounts
// and stacked mounts).
func findMount(procfsRoot, path string, major, minor uint32) (Mount, error) {
	ms, err := Mounts(procfsRoot)
	if err != nil {
		return Mount{}, err
	}
	var best Mount
	bestLen, bestDevMatch := -1, false
	for _, m := range ms {
		if !within(path, m.Mountpoint) {
			continue
		}
		devMatch := m.Major == major && m.Minor == minor
		l := len(m.Mountpoint)
		if l > bestLen || (l == bestLen && devMatch && !bestDevMatch) || (l == bestLen && devMatch == bestDevMatch) {
			best = m
			bestLen, bestDevMatch = l, devMatch
		}
	}
	if bestLen < 0 {
		return best, fmt.Errorf("no mount found for %s in %s", path, filepath.Join(procfsRoot, "self/mountinfo"))
	}
	return best, nil
}

func within(path, mountpoint string) bool {
	if mountpoint == "/" {
		return true
	}
	return path == mountpoint || strings.HasPrefix(path, mountpoint+"/")
}

// unescape undoes mountinfo's octal escapes (\040 for space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
