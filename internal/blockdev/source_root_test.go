package blockdev

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// A mount source names a device only when it is a block device: a loop
// device resolves to its kernel name through the running kernel's sysfs;
// /dev/fuse (a character device), a file under /dev/shm (a FUSE
// filesystem's fsname) and "tmpfs" name nothing.
func TestSourceDeviceOnRealDevices(t *testing.T) {
	testkit.RequireRoot(t)
	img := filepath.Join(t.TempDir(), "disk.img")
	require.NoError(t, os.WriteFile(img, make([]byte, 1<<20), 0o600))
	loop := testkit.LoopDevice(t, img)
	require.Equal(t, filepath.Base(loop), SourceDevice("/sys", loop))

	shm, err := os.CreateTemp("/dev/shm", "dc-source-")
	require.NoError(t, err)
	require.NoError(t, shm.Close())
	t.Cleanup(func() { os.Remove(shm.Name()) })
	for _, source := range []string{"/dev/fuse", shm.Name(), "tmpfs", "/dev/does-not-exist"} {
		require.Equal(t, "", SourceDevice("/sys", source), source)
	}
}
