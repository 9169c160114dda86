package probes

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// schedPolicies maps each of this process's threads to its scheduling
// policy (/proc/self/task/TID/stat, field 41: 0 SCHED_OTHER, 1 SCHED_FIFO).
func schedPolicies(t *testing.T) map[int]int {
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
		policy, err := strconv.Atoi(f[41-3])
		require.NoError(t, err)
		tid, _ := strconv.Atoi(task.Name())
		out[tid] = policy
	}
	return out
}

func ioPriority(t *testing.T, tid int) uintptr {
	t.Helper()
	prio, _, errno := unix.RawSyscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, uintptr(tid), 0)
	require.Zero(t, errno)
	return prio
}

// fifoThreads are the threads at SCHED_FIFO now.
func fifoThreads(t *testing.T) (tids []int) {
	for tid, policy := range schedPolicies(t) {
		if policy == unix.SCHED_FIFO {
			tids = append(tids, tid)
		}
	}
	return tids
}

// A burst raises its own thread, and only it, to SCHED_FIFO with the I/O
// priority of an ordinary process, and puts both back after; inside a
// thread already raised (a probe loop's) it changes nothing.
func TestRealtimeBurstRaisesCPUPriorityOnly(t *testing.T) {
	requireRoot(t)
	require.Empty(t, fifoThreads(t))
	tid, raised, err := enterRealtime()
	require.NoError(t, err)
	require.True(t, raised)
	require.Equal(t, unix.Gettid(), tid)
	require.Equal(t, []int{tid}, fifoThreads(t))
	require.Equal(t, uintptr(ioprioNormal), ioPriority(t, tid), "best-effort 4, not the real-time class derived from SCHED_FIFO")

	inner, again, err := enterRealtime()
	require.NoError(t, err)
	require.Equal(t, tid, inner)
	require.False(t, again, "already raised")
	leaveRealtime(inner, again)
	require.Equal(t, []int{tid}, fifoThreads(t), "the inner leave keeps the outer's priority")

	err = atNormalPriority(tid, raised, func() error {
		require.Empty(t, fifoThreads(t), "setup work at normal priority")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []int{tid}, fifoThreads(t))

	leaveRealtime(tid, raised)
	require.Empty(t, fifoThreads(t))
	require.Zero(t, ioPriority(t, tid), "I/O priority derived from the policy again")
}
