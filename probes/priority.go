package probes

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Measuring at raised CPU priority. The clock that ends an op is read by
// the thread that made the syscall, once the kernel has woken it. When every
// CPU is busy (scrapes, the node's own work) that wakeup waits its turn and
// the wait lands in the measurement. So timed ops run with their thread at
// nice −10 and a 100 µs scheduler slice: the weight wins the CPU, and the
// short slice lets the wakeup preempt the running task at once instead of
// when its slice ends (EEVDF, Linux ≥ 6.12; older kernels ignore the
// slice). `check` raises its thread for its burst, a daemon probe for its
// loop's life (between bursts it does next to no CPU work) except while it
// writes its read working set, which must not run ahead of the node's
// workloads.
//
// Measured with `check` (10,000 fdatasyncs on ext4, 2 vCPUs), three rounds
// each. Idle, fio p50 155–189 µs: normal priority 165–201, this 166–183,
// SCHED_FIFO 233–249 (a real-time wakeup costs more on this VM, so it is not
// used). While 50 scrapers hammered a daemon: fio p99 2.7–4.0 ms, normal
// priority 2.1–2.4 ms, nice −10 alone 0.43–0.68 ms, this 0.36–0.47 ms.
//
// Only CPU priority: the kernel derives an I/O priority from the nice value,
// which would let the probe jump the disk's queue under an I/O-priority-
// aware scheduler (BFQ) and measure a better disk than etcd sees, so the
// thread's I/O priority is pinned first to best-effort level 4, what every
// nice-0 process gets.
const (
	probeNice  = -10
	probeSlice = 100_000 // ns; the kernel's minimum custom slice

	ioprioWhoProcess = 1 // IOPRIO_WHO_PROCESS: a thread id
	ioprioClassBE    = 2 // IOPRIO_CLASS_BE
	ioprioClassShift = 13
	ioprioNormal     = ioprioClassBE<<ioprioClassShift | 4
)

// schedAttr is struct sched_attr (SCHED_ATTR_SIZE_VER0).
type schedAttr struct {
	size     uint32
	policy   uint32
	flags    uint64
	nice     int32
	priority uint32
	runtime  uint64
	deadline uint64
	period   uint64
}

// setSched puts thread tid in SCHED_OTHER with nice and slice (0: the
// default slice).
func setSched(tid int, nice int32, slice uint64) unix.Errno {
	a := schedAttr{size: uint32(unsafe.Sizeof(schedAttr{})), nice: nice, runtime: slice}
	_, _, errno := unix.RawSyscall(unix.SYS_SCHED_SETATTR, uintptr(tid), uintptr(unsafe.Pointer(&a)), 0)
	return errno
}

func setIOPriority(tid int, prio uintptr) unix.Errno {
	_, _, errno := unix.RawSyscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(tid), prio)
	return errno
}

// threadNice is tid's nice value (getpriority's raw result is 20 − nice).
func threadNice(tid int) int {
	r, _, errno := unix.RawSyscall(unix.SYS_GETPRIORITY, unix.PRIO_PROCESS, uintptr(tid), 0)
	if errno != 0 {
		return 0
	}
	return 20 - int(r)
}

// raisePriority wires the calling goroutine to its thread and raises the
// thread (I/O priority pinned first); lowerPriority(tid, raised) undoes what
// it did. A thread already raised is left as it is (raised false): a probe
// loop raises its thread once for its life, because two priority changes
// per burst would cost more per op than fio spends on one. Without
// CAP_SYS_NICE (or an RLIMIT_NICE that allows nice −10) the thread keeps
// its normal priority and the error says why. Neither allocates: they run
// once per burst, inside the no-allocation check.
func raisePriority() (tid int, raised bool, err error) {
	runtime.LockOSThread()
	tid = unix.Gettid()
	if threadNice(tid) == probeNice {
		return tid, false, nil
	}
	if errno := setIOPriority(tid, ioprioNormal); errno != 0 {
		return tid, false, errno
	}
	if errno := setSched(tid, probeNice, probeSlice); errno != 0 {
		_ = setIOPriority(tid, 0)
		return tid, false, errno
	}
	return tid, true, nil
}

func lowerPriority(tid int, raised bool) {
	if raised {
		_ = setSched(tid, 0, 0)
		_ = setIOPriority(tid, 0) // back to "derived from the nice value"
	}
	runtime.UnlockOSThread()
}

// atNormalPriority runs f with the calling thread back at normal priority
// if it was raised: work that is not timed, such as writing the read
// working set, must not run ahead of the node's workloads.
func atNormalPriority(tid int, raised bool, f func() error) error {
	if raised {
		_ = setSched(tid, 0, 0)
		defer setSched(tid, probeNice, probeSlice)
	}
	return f()
}
