package probes

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// The daemon follows a loop device to its backing file's filesystem: a
// probe on ext4 whose loop file is in tmpfs is flagged tmpfs (and logged
// with the chain), one whose loop file is on a disk's filesystem is not.
func TestLoopBackedByTmpfsIsFlagged(t *testing.T) {
	shm, dev := testkit.LoopFSIn(t, "/dev/shm", 32<<20, "ext4")
	disk, _ := testkit.LoopFS(t, 32<<20, "ext4")
	log := &logBuffer{}
	gather := startEngineLogged(t, log,
		config.Probe{Name: "shm", Kind: config.KindWAL, Dir: filepath.Join(shm, "canary"), Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1, SegmentSize: 1 << 20},
		config.Probe{Name: "disk", Kind: config.KindWAL, Dir: filepath.Join(disk, "canary"), Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1, SegmentSize: 1 << 20})
	warning := func(probe string) (float64, bool) {
		m, ok := value(gather()["diskcanary_probe_target_warning"], map[string]string{"probe": probe, "warning": "tmpfs"})
		return m.GetGauge().GetValue(), ok
	}
	require.Eventually(t, func() bool {
		_, a := warning("shm")
		_, b := warning("disk")
		return a && b
	}, 10*time.Second, 20*time.Millisecond, "both targets published")
	v, _ := warning("shm")
	require.Equal(t, 1.0, v)
	v, _ = warning("disk")
	require.Equal(t, 0.0, v)
	require.Len(t, log.lines("does not tell the truth", "probe=shm", "warning=tmpfs", `why="ext4 on `+filepath.Base(dev)+`, whose backing file /dev/shm/`), 1, "%s", log)
	require.Empty(t, log.lines("does not tell the truth", "probe=disk"))
}
