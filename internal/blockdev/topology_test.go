package blockdev

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The collector's fixture tree has partitions, md over partitions and dm
// stacked on dm and md.
const fixtureSys = "../../collector/testdata/diskstats/sys"

func TestWholeDisk(t *testing.T) {
	for name, want := range map[string]struct {
		disk string
		part bool
	}{
		"sda1": {"sda", true}, "nvme0n1p1": {"nvme0n1", true},
		"sda": {"sda", false}, "dm-0": {"dm-0", false}, "nosuch": {"nosuch", false},
	} {
		disk, part := WholeDisk(fixtureSys, name)
		require.Equal(t, want.disk, disk, name)
		require.Equal(t, want.part, part, name)
	}
}

func TestPhysicalDisks(t *testing.T) {
	for name, want := range map[string][]string{
		"sda":       {"sda"},
		"sda2":      {"sda"},
		"md0":       {"nvme0n1", "sdb"},
		"dm-0":      {"nvme0n1", "sda", "sdb"},
		"dm-1":      {"nvme0n1", "sda", "sdb"},
		"loop0":     {"loop0"},
		"unknown99": {"unknown99"},
	} {
		require.Equal(t, want, PhysicalDisks(fixtureSys, name), name)
	}
}

// Real sysfs: /sys/class/block links into /sys/devices, and a partition's
// directory sits inside its disk's.
func TestPhysicalDisksClassSymlinks(t *testing.T) {
	sys := t.TempDir()
	mk := func(p string) {
		require.NoError(t, os.MkdirAll(filepath.Join(sys, p), 0o755))
	}
	mk("devices/pci0/block/vdb/vdb1")
	require.NoError(t, os.WriteFile(filepath.Join(sys, "devices/pci0/block/vdb/vdb1/partition"), []byte("1\n"), 0o644))
	mk("devices/virtual/block/dm-3/slaves")
	mk("class/block")
	require.NoError(t, os.Symlink("../../devices/pci0/block/vdb", filepath.Join(sys, "class/block/vdb")))
	require.NoError(t, os.Symlink("../../devices/pci0/block/vdb/vdb1", filepath.Join(sys, "class/block/vdb1")))
	require.NoError(t, os.Symlink("../../devices/virtual/block/dm-3", filepath.Join(sys, "class/block/dm-3")))
	require.NoError(t, os.Symlink("../../../../pci0/block/vdb/vdb1", filepath.Join(sys, "devices/virtual/block/dm-3/slaves/vdb1")))

	require.Equal(t, []string{"vdb"}, PhysicalDisks(sys, "vdb1"))
	require.Equal(t, []string{"vdb"}, PhysicalDisks(sys, "dm-3"))
}

// A cycle in a broken tree ends instead of hanging, and adds nothing.
func TestPhysicalDisksCycle(t *testing.T) {
	sys := t.TempDir()
	for _, p := range []string{"block/dm-0/slaves/dm-1", "block/dm-1/slaves/dm-0"} {
		require.NoError(t, os.MkdirAll(filepath.Join(sys, p), 0o755))
	}
	require.Empty(t, PhysicalDisks(sys, "dm-0"))
}

// TestAdversarialSlavesMesh: four dm devices that each list the other
// three (and themselves) as slaves, one of them over a real disk. Walking
// every path to the depth limit is 4^17 visits, hours of CPU under the
// collector's lock; each device is walked once instead.
func TestAdversarialSlavesMesh(t *testing.T) {
	sys := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "block/sda"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "block/dm-0/slaves/sda"), 0o755))
	for _, dm := range []string{"dm-0", "dm-1", "dm-2", "dm-3"} {
		for _, slave := range []string{"dm-0", "dm-1", "dm-2", "dm-3"} {
			require.NoError(t, os.MkdirAll(filepath.Join(sys, "block", dm, "slaves", slave), 0o755))
		}
	}
	got := make(chan []string, 1)
	go func() { got <- PhysicalDisks(sys, "dm-2") }()
	select {
	case disks := <-got:
		require.Equal(t, []string{"sda"}, disks)
	case <-time.After(2 * time.Second):
		t.Fatal("PhysicalDisks(dm-2) still walking the slaves cycle after 2s")
	}
	// Every device of the mesh reaches the one disk, once.
	require.Equal(t, []string{"sda"}, PhysicalDisks(sys, "dm-0"))
}

// A kernel name with a "/" (the cciss driver's cciss/c0d0, as
// /proc/diskstats prints it) is spelled with "!" in sysfs; every name
// blockdev hands out is the diskstats spelling, so it joins the device
// label.
func TestSlashInKernelName(t *testing.T) {
	require.Equal(t, "cciss!c0d0", SysfsName("cciss/c0d0"))
	require.Equal(t, "cciss/c0d0p1", NameFromSysfs("cciss!c0d0p1"))
	require.Equal(t, "sda1", SysfsName("sda1"))

	sys := t.TempDir()
	disk := "devices/pci0/cciss0/c0d0/block/cciss!c0d0"
	require.NoError(t, os.MkdirAll(filepath.Join(sys, disk, "cciss!c0d0p1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sys, disk, "cciss!c0d0p1/partition"), []byte("1\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "class/block"), 0o755))
	require.NoError(t, os.Symlink("../../"+disk, filepath.Join(sys, "class/block/cciss!c0d0")))
	require.NoError(t, os.Symlink("../../"+disk+"/cciss!c0d0p1", filepath.Join(sys, "class/block/cciss!c0d0p1")))
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "dev/block"), 0o755))
	require.NoError(t, os.Symlink("../../"+disk+"/cciss!c0d0p1", filepath.Join(sys, "dev/block/104:1")))

	require.Equal(t, "cciss/c0d0p1", KernelName(sys, 104, 1))
	disk0, part := WholeDisk(sys, "cciss/c0d0p1")
	require.True(t, part)
	require.Equal(t, "cciss/c0d0", disk0)
	require.Equal(t, []string{"cciss/c0d0"}, PhysicalDisks(sys, "cciss/c0d0p1"))
}

// LoopFiles finds the loop devices under a device (a partition of one, a
// dm device over two) with their backing files, leaving out a deleted one.
func TestLoopFiles(t *testing.T) {
	sys := t.TempDir()
	mk := func(rel, content string) {
		p := filepath.Join(sys, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	mk("block/loop3/loop/backing_file", "/dev/shm/a.img\n")
	mk("block/loop3/loop3p1/partition", "1\n")
	mk("block/loop4/loop/backing_file", "/var/lib/b.img\n")
	mk("block/loop5/loop/backing_file", "/tmp/c.img (deleted)\n")
	mk("block/sda/size", "1\n")
	for _, s := range []string{"loop3", "loop4", "loop5"} {
		require.NoError(t, os.MkdirAll(filepath.Join(sys, "block/dm-0/slaves", s), 0o755))
	}
	for name, want := range map[string][]LoopFile{
		"loop3":   {{"loop3", "/dev/shm/a.img"}},
		"loop3p1": {{"loop3", "/dev/shm/a.img"}},
		"dm-0":    {{"loop3", "/dev/shm/a.img"}, {"loop4", "/var/lib/b.img"}},
		"loop5":   nil,
		"sda":     nil,
	} {
		require.Equal(t, want, LoopFiles(sys, name), name)
	}
}

// A class/block entry that links to a link is followed to the directory;
// a dangling one, or a loop, is no device.
func TestSysfsDirFollowsLinksAndRefusesDangling(t *testing.T) {
	sys := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "devices/virtual/block/zram0"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "class/block"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "block"), 0o755))
	require.NoError(t, os.Symlink("../devices/virtual/block/zram0", filepath.Join(sys, "block/zram0")))
	require.NoError(t, os.Symlink("../../block/zram0", filepath.Join(sys, "class/block/zram0")))
	require.NoError(t, os.Symlink("../../devices/virtual/block/gone", filepath.Join(sys, "class/block/gone")))
	require.NoError(t, os.Symlink("loop1", filepath.Join(sys, "class/block/loop1")))

	require.Equal(t, filepath.Join(sys, "devices/virtual/block/zram0"), SysfsDir(sys, "zram0"))
	require.Equal(t, "", SysfsDir(sys, "gone"))
	require.Equal(t, "", SysfsDir(sys, "loop1"))
}

// A Topology answers from what it looked up once for the pass: a device
// removed during it is still the device it was, and a new pass sees the
// removal.
func TestTopologyLooksUpOncePerPass(t *testing.T) {
	sys := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "block/sdc/sdc1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sys, "block/sdc/sdc1/partition"), []byte("1\n"), 0o644))
	topo := NewTopology(sys)
	disk, part := topo.WholeDisk("sdc")
	require.Equal(t, "sdc", disk)
	require.False(t, part)
	require.Equal(t, filepath.Join(sys, "block/sdc"), topo.SysfsDir("sdc"))

	require.NoError(t, os.RemoveAll(filepath.Join(sys, "block/sdc")))
	require.Equal(t, filepath.Join(sys, "block/sdc"), topo.SysfsDir("sdc"))
	require.Equal(t, []string{"sdc"}, topo.PhysicalDisks("sdc"))
	require.Equal(t, "", NewTopology(sys).SysfsDir("sdc"))
}
