package probes

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/testenv"
)

// raisedThreads are this process's threads at the probes' nice value now
// (/proc/self/task/TID/stat, field 19).
func raisedThreads(t *testing.T) (tids []int) {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "stat"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		// Fields after the parenthesised name start at field 3 (state).
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		nice, err := strconv.Atoi(f[19-3])
		require.NoError(t, err)
		if nice == probeNice {
			tid, _ := strconv.Atoi(task.Name())
			tids = append(tids, tid)
		}
	}
	return tids
}

func ioPriority(t *testing.T, tid int) uintptr {
	t.Helper()
	prio, _, errno := unix.RawSyscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, uintptr(tid), 0)
	require.Zero(t, errno)
	return prio
}

// sliceOf is tid's scheduler slice in ns (sched_getattr's sched_runtime).
func sliceOf(t *testing.T, tid int) uint64 {
	t.Helper()
	var a schedAttr
	_, _, errno := unix.RawSyscall6(unix.SYS_SCHED_GETATTR, uintptr(tid), uintptr(unsafe.Pointer(&a)), unsafe.Sizeof(a), 0, 0, 0)
	require.Zero(t, errno)
	return a.runtime
}

// A burst raises its own thread, and only it, to nice −10 with a short
// slice and the I/O priority of an ordinary process, and puts all back
// after; inside a thread already raised (a probe loop's) it changes nothing.
func TestBurstRaisesCPUPriorityOnly(t *testing.T) {
	testenv.RequireRoot(t)
	require.Empty(t, raisedThreads(t))
	tid, raised, err := raisePriority()
	require.NoError(t, err)
	require.True(t, raised)
	require.Equal(t, unix.Gettid(), tid)
	require.Equal(t, []int{tid}, raisedThreads(t))
	require.Equal(t, uint64(probeSlice), sliceOf(t, tid))
	require.Equal(t, uintptr(ioprioNormal), ioPriority(t, tid), "best-effort 4, not the level derived from nice −10")

	inner, again, err := raisePriority()
	require.NoError(t, err)
	require.Equal(t, tid, inner)
	require.False(t, again, "already raised")
	lowerPriority(inner, again)
	require.Equal(t, []int{tid}, raisedThreads(t), "the inner lower keeps the outer's priority")

	err = atNormalPriority(tid, raised, func() error {
		require.Empty(t, raisedThreads(t), "setup work at normal priority")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []int{tid}, raisedThreads(t))

	lowerPriority(tid, raised)
	require.Empty(t, raisedThreads(t))
	require.NotEqual(t, uint64(probeSlice), sliceOf(t, tid), "default slice again")
	require.Zero(t, ioPriority(t, tid), "I/O priority derived from nice again")
}
