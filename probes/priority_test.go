package probes

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
)

// threadNice maps each of this process's threads to its nice value
// (/proc/self/task/TID/stat, field 19).
func threadNice(t *testing.T) map[int]int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	out := map[int]int{}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "stat"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		// Fields after the parenthesised name start at field 3 (state).
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		nice, err := strconv.Atoi(f[19-3])
		require.NoError(t, err)
		tid, _ := strconv.Atoi(task.Name())
		out[tid] = nice
	}
	return out
}

// Each probe measures from its own thread at raised CPU priority and the
// I/O priority of an ordinary process; the rest of the daemon (scrapes)
// keeps normal priority, and the threads go away with their probes.
func TestProbeThreadsRaisedCPUPriorityOnly(t *testing.T) {
	requireRoot(t)
	base := threadNice(t)
	for tid, nice := range base {
		require.Zero(t, nice, "thread %d before any probe ran", tid)
	}
	_, gather, stop := startEngine(t,
		config.Probe{Name: "wal", Kind: config.KindWAL, Dir: t.TempDir(), Interval: 50 * time.Millisecond, Ops: 5, MinFree: 1},
		config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: t.TempDir(), Interval: 50 * time.Millisecond, Ops: 5, WorkingSet: 4 << 20, MinFree: 1})
	raisedThreads := func() (tids []int) {
		for tid, nice := range threadNice(t) {
			if nice != 0 {
				require.Equal(t, probeNice, nice, "thread %d", tid)
				tids = append(tids, tid)
			}
		}
		return tids
	}
	waitFor(t, 10*time.Second, "both probes measuring", func() bool {
		m := gather()["diskcanary_probe_success"]
		wal, _ := value(m, map[string]string{"probe": "wal"})
		rr, _ := value(m, map[string]string{"probe": "rr"})
		return wal.GetGauge().GetValue() == 1 && rr.GetGauge().GetValue() == 1
	})
	raised := raisedThreads()
	require.Len(t, raised, 2, "one raised thread per probe")
	for _, tid := range raised {
		prio, _, errno := unix.RawSyscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, uintptr(tid), 0)
		require.Zero(t, errno)
		require.Equal(t, uintptr(ioprioNormal), prio, "thread %d: I/O priority best-effort 4, not derived from nice", tid)
	}
	stop()
	waitFor(t, 5*time.Second, "probe threads gone with their probes", func() bool { return len(raisedThreads()) == 0 })
}
