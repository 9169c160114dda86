package blockdev

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Lines as the kernel prints them: an ext4 the kernel made read-only the
// old way (super options ro) and the 6.18 way (emergency_ro), one mounted
// ro on purpose, a btrfs forced read-only, and a mountpoint with a space.
func TestMounts(t *testing.T) {
	info := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(info, []byte(`27 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro
45 27 7:1 / /mnt/old rw,relatime shared:2 - ext4 /dev/loop1 ro,errors=remount-ro
46 27 7:2 / /mnt/new rw,relatime - ext4 /dev/loop2 rw,emergency_ro
47 27 7:3 / /mnt/cd ro,relatime - iso9660 /dev/loop3 ro
48 27 0:40 / /mnt/bt rw,relatime - btrfs /dev/loop4 ro,ssd,space_cache=v2,subvolid=5,subvol=/
49 27 7:5 / /mnt/with\040space rw - xfs /dev/loop5 rw,attr2
garbage line
`), 0o644))
	ms, err := Mounts(info)
	require.NoError(t, err)
	require.Equal(t, []Mount{
		{Major: 254, Minor: 1, Mountpoint: "/", FSType: "ext4", Source: "/dev/vda1"},
		{Major: 7, Minor: 1, Mountpoint: "/mnt/old", FSType: "ext4", Source: "/dev/loop1", SuperReadOnly: true},
		{Major: 7, Minor: 2, Mountpoint: "/mnt/new", FSType: "ext4", Source: "/dev/loop2", SuperReadOnly: true},
		{Major: 7, Minor: 3, Mountpoint: "/mnt/cd", FSType: "iso9660", Source: "/dev/loop3", ReadOnly: true, SuperReadOnly: true},
		{Major: 0, Minor: 40, Mountpoint: "/mnt/bt", FSType: "btrfs", Source: "/dev/loop4", SuperReadOnly: true},
		{Major: 7, Minor: 5, Mountpoint: "/mnt/with space", FSType: "xfs", Source: "/dev/loop5"},
	}, ms)
}
