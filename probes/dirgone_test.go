package probes

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
)

// deletedProbeFiles are the probe files this process holds open that were
// unlinked: space the filesystem cannot give back.
func deletedProbeFiles(t *testing.T) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	var out []string
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.Contains(l, "/"+filePrefix) && strings.HasSuffix(l, " (deleted)") {
			out = append(out, l)
		}
	}
	return out
}

func dirIno(t *testing.T, dir string) uint64 {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Stat(dir, &st))
	return st.Ino
}

// A probe directory renamed or deleted under the daemon fails one cycle
// with reason="missing" and one log line naming it, the probes stop
// writing there and let go of its files (no deleted working set held
// open) and lock, and the next cycle creates the directory again at its
// path and probes there.
func TestProbeDirDeletedOrRenamedIsLeft(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "canary")
	log := &logBuffer{}
	gather := startEngineLogged(t, log,
		config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir, Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1, SegmentSize: 1 << 20},
		config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: dir, Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1,
			WorkingSet: 1 << 20, BlockSize: 4096})
	count := func(probe string) uint64 {
		name := "diskcanary_fdatasync_duration_seconds"
		if probe == "rr" {
			name = "diskcanary_read_duration_seconds"
		}
		m, _ := value(gather()[name], map[string]string{"probe": probe, "path": dir})
		return m.GetHistogram().GetSampleCount()
	}
	probing := func(what string) {
		t.Helper()
		w, r := count("wal"), count("rr")
		require.Eventually(t, func() bool { return count("wal") >= w+8 && count("rr") >= r+10 }, 10*time.Second, 20*time.Millisecond, "%s: %s", what, log)
	}
	probing("first cycles")

	first := dirIno(t, dir)
	old := filepath.Join(base, "canary.old")
	require.NoError(t, os.Rename(dir, old))
	require.Eventually(t, func() bool {
		mf := gather()
		return failures(mf, "wal", "missing") >= 1 && failures(mf, "rr", "missing") >= 1
	}, 10*time.Second, 20*time.Millisecond, `reason="missing" once renamed`)
	probing("after the rename")
	require.NotEqual(t, first, dirIno(t, dir), "a new directory at the path")
	for _, p := range []string{"wal", "rr"} {
		lines := log.lines("probe cycle failed", "probe="+p+" ", "reason=missing")
		require.Len(t, lines, 1, "%s: %s", p, log)
		// The probe that looks second may find the directory the first
		// one created again.
		require.Regexp(t, regexp.QuoteMeta(dir+": the probe directory was deleted, renamed or unmounted while in use: no such file or directory: ")+
			`(nothing is at that path now; stopped writing to it|something else is at that path now \(a directory\); stopped writing to the old one) and released its files and lock"$`, lines[0])
	}
	require.Len(t, log.lines("probe cycle succeeded again"), 2)
	left, err := os.ReadDir(old)
	require.NoError(t, err)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	// The WAL segment is removed through the held directory fd; the read
	// working set is kept, as at every stop, for the operator to remove.
	require.Equal(t, []string{".diskcanary-rr-readset"}, names)

	// Deleted: the held working set would pin its space invisibly.
	require.NoError(t, os.RemoveAll(dir))
	require.Eventually(t, func() bool {
		mf := gather()
		return failures(mf, "wal", "missing") >= 2 && failures(mf, "rr", "missing") >= 2
	}, 10*time.Second, 20*time.Millisecond, `reason="missing" once deleted`)
	probing("after the delete")
	require.Empty(t, deletedProbeFiles(t), "no deleted probe file held open")
	require.Len(t, log.lines("probe cycle failed", "reason=missing"), 4, "%s", log)
}
