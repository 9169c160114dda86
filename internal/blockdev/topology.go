package blockdev

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// maxStackDepth bounds the dm/md recursion: real stacks (LVM on md on
// partitions, dm-crypt on LVM) are a handful deep. Termination comes from
// the visited set in collectDisks; this only bounds the stack.
const maxStackDepth = 16

// The kernel names a device with a "/" in it (cciss/c0d0, as
// /proc/diskstats and iostat print it); a sysfs entry cannot hold a "/", so
// sysfs spells that name with "!" (/sys/block/cciss!c0d0).

// SysfsName is a kernel device name as sysfs spells it.
func SysfsName(name string) string { return strings.ReplaceAll(name, "/", "!") }

// NameFromSysfs is the kernel device name of a sysfs entry: the name in
// /proc/diskstats and in the device label.
func NameFromSysfs(entry string) string { return strings.ReplaceAll(entry, "!", "/") }

// Topology answers the questions below for one sysfs tree, each device's
// directory and partition attribute looked up once however often it is
// asked: a scrape that reads a thousand devices asks for most of them
// several times (their own attributes, their disk's, the slaves of a dm
// device). It holds what sysfs said when asked, so it lives for one pass
// over the devices (one scrape), not longer. Not safe for concurrent use.
type Topology struct {
	sysfs string
	dirs  map[string]string // kernel name -> SysfsDir
	parts map[string]bool   // kernel name -> has a partition attribute
}

// NewTopology starts a pass over sysfs.
func NewTopology(sysfs string) *Topology {
	return &Topology{sysfs: sysfs, dirs: map[string]string{}, parts: map[string]bool{}}
}

// SysfsDir returns the sysfs directory of a kernel block device, disk or
// partition, with symlinks resolved (so its parent directory is the whole
// disk for a partition). It tries /sys/class/block first (every disk and
// partition has a link there), then /sys/block/NAME and /sys/block/*/NAME
// for trees that have no class directory. "" when the device is unknown.
func SysfsDir(sysfs, name string) string { return NewTopology(sysfs).SysfsDir(name) }

// SysfsDir is the package's SysfsDir, remembered for the pass.
func (t *Topology) SysfsDir(name string) string {
	if dir, ok := t.dirs[name]; ok {
		return dir
	}
	dir := t.lookDir(SysfsName(name))
	t.dirs[name] = dir
	return dir
}

func (t *Topology) lookDir(name string) string {
	for _, c := range []string{filepath.Join(t.sysfs, "class/block", name), filepath.Join(t.sysfs, "block", name)} {
		if real, ok := resolveEntry(c); ok {
			return real
		}
	}
	if matches, _ := filepath.Glob(filepath.Join(t.sysfs, "block", "*", name)); len(matches) > 0 {
		if real, err := filepath.EvalSymlinks(matches[0]); err == nil {
			return real
		}
	}
	return ""
}

// resolveEntry resolves a device's entry under class/block or block: a
// relative symlink into devices/, or a directory in trees without one.
// Sysfs links name a real directory through no further link, so a
// readlink and a lexical join resolve one where filepath.EvalSymlinks
// lstats every component of the path (some fifteen system calls; at
// 10,000 devices most of the first scrape: go run ./bench
// diskstats-10000). A link to a link is followed; a dangling one is none.
func resolveEntry(path string) (string, bool) {
	for range 8 {
		target, err := os.Readlink(path)
		switch {
		case errors.Is(err, syscall.EINVAL): // not a link: the entry itself
			return path, true
		case err != nil:
			return "", false
		case !filepath.IsAbs(target):
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = filepath.Clean(target)
	}
	return "", false
}

// WholeDisk returns the disk a partition belongs to (sda for sda1, nvme0n1
// for nvme0n1p2) and true, or name and false when name is not a partition.
// The kernel marks partitions with a `partition` attribute and places them
// in their disk's directory.
func WholeDisk(sysfs, name string) (string, bool) { return NewTopology(sysfs).WholeDisk(name) }

// WholeDisk is the package's WholeDisk, remembered for the pass.
func (t *Topology) WholeDisk(name string) (string, bool) {
	dir := t.SysfsDir(name)
	if dir == "" {
		return name, false
	}
	part, ok := t.parts[name]
	if !ok {
		_, err := os.Stat(filepath.Join(dir, "partition"))
		part = err == nil
		t.parts[name] = part
	}
	if !part {
		return name, false
	}
	return NameFromSysfs(filepath.Base(filepath.Dir(dir))), true
}

// PhysicalDisks returns the whole disks under a device, sorted: a
// partition's disk, and for dm (LVM, crypt, multipath) and md devices the
// disks under their `slaves`, recursively. A whole disk with no slaves is
// its own physical disk, and so is a device sysfs does not know (the join
// then still has its identity pair). A device met twice is walked once: a
// broken or hostile tree whose `slaves` form a cycle (dm-0 -> dm-1 -> dm-0)
// adds nothing for the cycle and costs one visit per device, where walking
// every path would take exponential time while the scrape holds the
// collector's lock.
func PhysicalDisks(sysfs, name string) []string { return NewTopology(sysfs).PhysicalDisks(name) }

// PhysicalDisks is the package's PhysicalDisks over the pass's lookups.
func (t *Topology) PhysicalDisks(name string) []string {
	disks := map[string]bool{}
	t.collectDisks(name, 0, map[string]bool{}, disks)
	out := make([]string, 0, len(disks))
	for d := range disks {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

func (t *Topology) collectDisks(name string, depth int, visited, disks map[string]bool) {
	disk, _ := t.WholeDisk(name)
	if visited[disk] || depth > maxStackDepth {
		return
	}
	visited[disk] = true
	dir := t.SysfsDir(disk)
	var slaves []os.DirEntry
	if dir != "" {
		slaves, _ = os.ReadDir(filepath.Join(dir, "slaves"))
	}
	if len(slaves) == 0 {
		disks[disk] = true
		return
	}
	for _, s := range slaves {
		t.collectDisks(NameFromSysfs(s.Name()), depth+1, visited, disks)
	}
}

// LoopFile is a loop device under a block device and the file behind it.
type LoopFile struct {
	Loop string // kernel name, e.g. loop3
	File string // its backing file, as the kernel names it
}

// LoopFiles returns the loop devices among the physical disks under name
// (PhysicalDisks: a partition's disk, dm and md slaves) with their
// backing files (sysfs loop/backing_file). A backing file that was
// deleted (the kernel appends " (deleted)") is left out: there is no
// filesystem left to name.
func LoopFiles(sysfs, name string) []LoopFile {
	var out []LoopFile
	for _, d := range PhysicalDisks(sysfs, name) {
		dir := SysfsDir(sysfs, d)
		if dir == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "loop", "backing_file"))
		f := strings.TrimSuffix(string(b), "\n")
		if err != nil || f == "" || strings.HasSuffix(f, " (deleted)") {
			continue
		}
		out = append(out, LoopFile{Loop: d, File: f})
	}
	return out
}
