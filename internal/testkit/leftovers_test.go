package testkit

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

// mounted says whether dir is a mountpoint now (/proc/self/mountinfo's
// fifth field).
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// A test process killed mid-test runs no cleanups; the next root test
// process takes down the tmpfs, the loop filesystem, its loop device and
// its image in /dev/shm, and leaves a live process's alone.
func TestReapUndoesAKilledTestsMountsAndLoopDevices(t *testing.T) {
	if InChild(t) {
		tmpfs := Tmpfs(t)
		mnt, dev := LoopFSIn(t, "/dev/shm", 16<<20, "ext4")
		fmt.Printf("LEFT %s %s %s %s\n", tmpfs, mnt, dev, backingFile(dev))
		select {} // until killed
	}
	RequireRoot(t)
	_, mine := LoopFS(t, 16<<20, "ext4") // this live process's: never reaped
	cmd := Reexec(t, t.Name())
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var left []string
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if f := strings.Fields(sc.Text()); len(f) == 5 && f[0] == "LEFT" {
			left = f[1:]
			break
		}
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Len(t, left, 4, "the child's mounts")
	tmpfs, mnt, dev, img := left[0], left[1], left[2], left[3]
	// The child's temporary directory (TempDir's /tmp/TestName123/001's parent).
	childTmp := filepath.Dir(tmpfs)
	require.True(t, strings.HasPrefix(childTmp, filepath.Join(os.TempDir(), "TestReap")), childTmp)
	require.True(t, strings.HasPrefix(img, "/dev/shm/"+imagePrefix), img)
	require.True(t, mounted(t, tmpfs) && mounted(t, mnt), "a killed test's mounts stay")
	require.Equal(t, img, backingFile(dev), "and its loop device")

	require.ElementsMatch(t, []string{"umount " + tmpfs, "umount " + mnt, "losetup -d " + dev, "rm " + img}, reap())
	require.False(t, mounted(t, tmpfs))
	require.False(t, mounted(t, mnt))
	require.Empty(t, backingFile(dev))
	require.NoFileExists(t, img)
	require.NotEmpty(t, backingFile(mine), "a live test's loop device stays")
	require.Empty(t, reap(), "nothing twice")
	require.NoError(t, os.RemoveAll(childTmp))
}
