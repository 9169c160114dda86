package probes

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
)

// create is O_CREAT|O_EXCL|O_NOFOLLOW: a planted symlink, live or dangling,
// is neither followed nor replaced, and a planted hard link is unlinked
// (removing a name, never the victim's data) before a new inode is made.
func TestCreateNeverFollowsPlantedLinks(t *testing.T) {
	base := t.TempDir()
	victim := filepath.Join(base, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o600))
	dir := filepath.Join(base, "probe")
	d, err := openProbeDir(dir)
	require.NoError(t, err)
	defer d.close()

	require.NoError(t, os.Symlink(victim, filepath.Join(dir, ".diskcanary-a-wal")))
	_, err = d.create(".diskcanary-a-wal", 0)
	require.ErrorIs(t, err, unix.EEXIST)

	// Without O_EXCL, O_CREAT through a dangling symlink creates its target.
	ghost := filepath.Join(base, "ghost")
	require.NoError(t, os.Symlink(ghost, filepath.Join(dir, ".diskcanary-b-wal")))
	_, err = d.create(".diskcanary-b-wal", 0)
	require.ErrorIs(t, err, unix.EEXIST)
	_, err = os.Lstat(ghost)
	require.ErrorIs(t, err, os.ErrNotExist, "the symlink's target was created")

	require.NoError(t, os.Link(victim, filepath.Join(dir, ".diskcanary-c-wal")))
	fd, err := d.create(".diskcanary-c-wal", 0)
	require.NoError(t, err)
	_, err = unix.Pwrite(fd, []byte("overwritten"), 0)
	require.NoError(t, err)
	unix.Close(fd)

	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "precious", string(got))
	fi, err := os.Lstat(filepath.Join(dir, ".diskcanary-a-wal"))
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeSymlink, "the planted symlink is left for the operator to see")
}

// The same through the engine, for every file a probe writes: the fresh WAL
// file, the overwrite file and the read working set.
func TestProbesNeverWriteThroughPlantedSymlinks(t *testing.T) {
	base := t.TempDir()
	victim := filepath.Join(base, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o600))
	dir := filepath.Join(base, "probe")
	require.NoError(t, os.Mkdir(dir, 0o700))
	for _, name := range []string{".diskcanary-wal-wal", ".diskcanary-ow-overwrite", ".diskcanary-rr-readset"} {
		require.NoError(t, os.Symlink(victim, filepath.Join(dir, name)))
	}
	_, gather, stop := startEngine(t,
		config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir, Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1},
		config.Probe{Name: "ow", Kind: config.KindWAL, Dir: dir, Layout: config.LayoutOverwrite, Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1},
		config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: dir, WorkingSet: 64 << 10, Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1})
	require.Eventually(t, func() bool {
		mf := gather()
		for _, probe := range []string{"wal", "ow", "rr"} {
			m, ok := value(mf["diskcanary_probe_failures_total"], map[string]string{"probe": probe, "reason": "unsafe_path"})
			if !ok || m.GetCounter().GetValue() < 2 {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "unsafe_path failures of all three probes")
	stop()
	mf := gather()
	for _, probe := range []string{"wal", "ow", "rr"} {
		succ, ok := value(mf["diskcanary_probe_success"], map[string]string{"probe": probe})
		require.True(t, ok, probe)
		require.EqualValues(t, 0, succ.GetGauge().GetValue(), probe)
	}
	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "precious", string(got), "a probe wrote through a symlink")
	// Every planted link is refused and left in place for the operator to
	// see; the working set is not renamed over it either.
	for _, name := range []string{".diskcanary-wal-wal", ".diskcanary-ow-overwrite", ".diskcanary-rr-readset"} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NotZero(t, fi.Mode()&os.ModeSymlink, name)
	}
}
