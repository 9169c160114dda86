package probes

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Measuring at real-time CPU priority. The clock that ends an op is read by
// the thread that made the syscall, once the kernel has woken it. When every
// CPU is busy (scrapes, the node's own work) that wakeup waits its turn, and
// the wait lands in the measurement. `diskcanary check` (10,000 fdatasyncs on
// ext4, 2 vCPUs) while 50 scrapers hammered a daemon's /metrics: p99 470–543
// µs at nice −10 against 221–295 µs idle; at SCHED_FIFO 252–309 µs, idle
// 256–328 µs. (A plain CPU hog is beaten by nice −10 too; the scrapers'
// mix of short runs and wakeups is not: the running thread keeps its slice.)
//
// So timed ops run with their thread at SCHED_FIFO priority 1, the lowest
// real-time priority: `check` for its one burst, a daemon probe for its
// loop's life (between bursts it does next to no CPU work) except for its
// setup (writing the read working set), which must not run ahead of the
// node's workloads. Only CPU priority: the kernel derives an I/O
// priority from the scheduling policy (real-time class for a SCHED_FIFO
// thread), which would let the probe jump the disk's queue under an
// I/O-priority-aware scheduler and measure a better disk than etcd sees, so
// the thread's I/O priority is pinned to best-effort level 4, what every
// nice-0 process gets, before the policy changes.
const (
	probeRTPriority = 1
	schedOther      = 0 // SCHED_OTHER (x/sys/unix names only SCHED_FIFO's kin)

	ioprioWhoProcess = 1 // IOPRIO_WHO_PROCESS: a thread id
	ioprioClassBE    = 2 // IOPRIO_CLASS_BE
	ioprioClassShift = 13
	ioprioNormal     = ioprioClassBE<<ioprioClassShift | 4
)

type schedParam struct{ priority int32 }

func setScheduler(tid, policy int, priority int32) unix.Errno {
	p := schedParam{priority}
	_, _, errno := unix.RawSyscall(unix.SYS_SCHED_SETSCHEDULER, uintptr(tid), uintptr(policy), uintptr(unsafe.Pointer(&p)))
	return errno
}

func setIOPriority(tid int, prio uintptr) unix.Errno {
	_, _, errno := unix.RawSyscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(tid), prio)
	return errno
}

// enterRealtime wires the calling goroutine to its thread and raises the
// thread to SCHED_FIFO, I/O priority pinned first; leaveRealtime(tid,
// raised) undoes what it did. A thread already at SCHED_FIFO is left as it
// is (raised false): a probe loop raises its thread once for its life,
// because a policy change costs ~2 µs, ~90 ns per op of a 50-op burst.
// Without CAP_SYS_NICE (or an RLIMIT_RTPRIO that allows it) the thread
// keeps its normal priority and the error says why. Neither allocates: they
// run once per burst, inside the no-allocation check.
func enterRealtime() (tid int, raised bool, err error) {
	runtime.LockOSThread()
	tid = unix.Gettid()
	if policy, _, _ := unix.RawSyscall(unix.SYS_SCHED_GETSCHEDULER, uintptr(tid), 0, 0); policy == unix.SCHED_FIFO {
		return tid, false, nil
	}
	if errno := setIOPriority(tid, ioprioNormal); errno != 0 {
		return tid, false, errno
	}
	if errno := setScheduler(tid, unix.SCHED_FIFO, probeRTPriority); errno != 0 {
		_ = setIOPriority(tid, 0)
		return tid, false, errno
	}
	return tid, true, nil
}

func leaveRealtime(tid int, raised bool) {
	if raised {
		_ = setScheduler(tid, schedOther, 0)
		_ = setIOPriority(tid, 0) // back to "derived from the scheduling policy"
	}
	runtime.UnlockOSThread()
}

// atNormalPriority runs f with the calling thread back at SCHED_OTHER if it
// was raised: work that is not a timed burst, such as writing the read
// working set, must not run ahead of the node's workloads.
func atNormalPriority(tid int, raised bool, f func() error) error {
	if raised {
		_ = setScheduler(tid, schedOther, 0)
		defer setScheduler(tid, unix.SCHED_FIFO, probeRTPriority)
	}
	return f()
}
