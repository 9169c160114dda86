package blockdev

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
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

// SysfsDir returns the sysfs directory of a kernel block device, disk or
// partition, with symlinks resolved (so its parent directory is the whole
// disk for a partition). It tries /sys/class/block first (every disk and
// partition has a link there), then /sys/block/NAME and /sys/block/*/NAME
// for trees that have no class directory. "" when the device is unknown.
func SysfsDir(sysfs, name string) string {
	name = SysfsName(name)
	candidates := []string{
		filepath.Join(sysfs, "class/block", name),
		filepath.Join(sysfs, "block", name),
	}
	for _, c := range candidates {
		if real, err := filepath.EvalSymlinks(c); err == nil {
			return real
		}
	}
	if matches, _ := filepath.Glob(filepath.Join(sysfs, "block", "*", name)); len(matches) > 0 {
		if real, err := filepath.EvalSymlinks(matches[0]); err == nil {
			return real
		}
	}
	return ""
}

// WholeDisk returns the disk a partition belongs to (sda for sda1, nvme0n1
// for nvme0n1p2) and true, or name and false when name is not a partition.
// The kernel marks partitions with a `partition` attribute and places them
// in their disk's directory.
func WholeDisk(sysfs, name string) (string, bool) {
	dir := SysfsDir(sysfs, name)
	if dir == "" {
		return name, false
	}
	if _, err := os.Stat(filepath.Join(dir, "partition")); err != nil {
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
func PhysicalDisks(sysfs, name string) []string {
	disks := map[string]bool{}
	collectDisks(sysfs, name, 0, map[string]bool{}, disks)
	out := make([]string, 0, len(disks))
	for d := range disks {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

func collectDisks(sysfs, name string, depth int, visited, disks map[string]bool) {
	disk, _ := WholeDisk(sysfs, name)
	if visited[disk] || depth > maxStackDepth {
		return
	}
	visited[disk] = true
	dir := SysfsDir(sysfs, disk)
	var slaves []os.DirEntry
	if dir != "" {
		slaves, _ = os.ReadDir(filepath.Join(dir, "slaves"))
	}
	if len(slaves) == 0 {
		disks[disk] = true
		return
	}
	for _, s := range slaves {
		collectDisks(sysfs, NameFromSysfs(s.Name()), depth+1, visited, disks)
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
