package blockdev

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// On the running kernel's sysfs: a partitioned loop device's partition
// resolves to the loop device (the /sys/class/block symlink layout, not a
// fixture's). dm and md need kernel modules this test cannot count on; the
// fixture tree covers them.
func TestPartitionOnRealSysfs(t *testing.T) {
	testkit.RequireRoot(t)
	img := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(img)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(64<<20))
	// A one-entry MBR: partition 1, type 0x83, LBA 2048, 32 MiB.
	mbr := make([]byte, 512)
	entry := mbr[446:462]
	entry[4] = 0x83
	binary.LittleEndian.PutUint32(entry[8:], 2048)
	binary.LittleEndian.PutUint32(entry[12:], 65536)
	mbr[510], mbr[511] = 0x55, 0xaa
	_, err = f.WriteAt(mbr, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	disk := filepath.Base(testkit.LoopDevice(t, img, "--partscan"))
	part := disk + "p1"
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join("/sys/class/block", part)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			// Minimal kernels (e.g. Firecracker's) build without MBR
			// partition support; the fixture tree still covers partitions.
			t.Skipf("the kernel did not create %s from an MBR partition table (no msdos partition support?)", part)
		}
		time.Sleep(50 * time.Millisecond)
	}

	got, isPart := WholeDisk("/sys", part)
	require.True(t, isPart)
	require.Equal(t, disk, got)
	require.Equal(t, []string{disk}, PhysicalDisks("/sys", part))
	require.Equal(t, []string{disk}, PhysicalDisks("/sys", disk))
	_, isPart = WholeDisk("/sys", disk)
	require.False(t, isPart)
}
