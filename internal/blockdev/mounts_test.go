package blockdev

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeMountinfo makes a procfs tree holding only self/mountinfo.
func writeMountinfo(t *testing.T, content string) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, "self"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "self/mountinfo"), []byte(content), 0o644))
	return root
}

// Lines as the kernel prints them: an ext4 the kernel made read-only the
// old way (super options ro) and the 6.18 way (emergency_ro), one mounted
// ro on purpose, a btrfs forced read-only, a mountpoint with a space and
// a source with a backslash (octal escapes), and a FUSE mount whose
// source is empty (two spaces in a row).
func TestMounts(t *testing.T) {
	root := writeMountinfo(t, `27 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro
45 27 7:1 / /mnt/old rw,relatime shared:2 - ext4 /dev/loop1 ro,errors=remount-ro
46 27 7:2 / /mnt/new rw,relatime - ext4 /dev/loop2 rw,emergency_ro
47 27 7:3 / /mnt/cd ro,relatime - iso9660 /dev/loop3 ro
48 27 0:40 / /mnt/bt rw,relatime - btrfs /dev/loop4 ro,ssd,space_cache=v2,subvolid=5,subvol=/
49 27 7:5 / /mnt/with\040space rw - xfs /dev/loop5 rw,attr2
50 27 0:51 / /mnt/share rw,nosuid shared:9 - cifs //srv/a\134b rw,vers=3.1.1
51 27 0:52 / /mnt/fuse rw - fuse.sshfs  rw,user_id=0
`)
	ms, err := Mounts(root)
	require.NoError(t, err)
	require.Equal(t, []Mount{
		{Major: 254, Minor: 1, Mountpoint: "/", FSType: "ext4", Source: "/dev/vda1"},
		{Major: 7, Minor: 1, Mountpoint: "/mnt/old", FSType: "ext4", Source: "/dev/loop1", SuperReadOnly: true},
		{Major: 7, Minor: 2, Mountpoint: "/mnt/new", FSType: "ext4", Source: "/dev/loop2", SuperReadOnly: true},
		{Major: 7, Minor: 3, Mountpoint: "/mnt/cd", FSType: "iso9660", Source: "/dev/loop3", ReadOnly: true, SuperReadOnly: true},
		{Major: 0, Minor: 40, Mountpoint: "/mnt/bt", FSType: "btrfs", Source: "/dev/loop4", SuperReadOnly: true},
		{Major: 7, Minor: 5, Mountpoint: "/mnt/with space", FSType: "xfs", Source: "/dev/loop5"},
		{Major: 0, Minor: 51, Mountpoint: "/mnt/share", FSType: "cifs", Source: `//srv/a\b`},
		{Major: 0, Minor: 52, Mountpoint: "/mnt/fuse", FSType: "fuse.sshfs", Source: ""},
	}, ms)
}

// A line that is not mountinfo fails the read and names the file, rather
// than yielding a table with a mount missing.
func TestMountsRefusesAMalformedLine(t *testing.T) {
	root := writeMountinfo(t, "27 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\ngarbage line\n")
	_, err := Mounts(root)
	require.ErrorContains(t, err, filepath.Join(root, "self/mountinfo")+": ")
	require.ErrorContains(t, err, "garbage line")

	_, err = Mounts(filepath.Join(root, "nosuch"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
