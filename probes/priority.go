package probes

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Probe threads. The clock that ends an op is read by the thread that made
// the syscall, once the kernel has woken it. When every CPU is busy
// (scrapes, the node's own work) that wakeup waits its turn and the wait
// lands in the measurement. Measured with `diskcanary check` on 2 vCPUs with
// both CPUs kept busy: fdatasync p99 0.9–4.2 ms at normal priority, against
// 0.21–0.22 ms at nice −10 and 0.23–0.31 ms with the CPUs idle.
//
// So each probe's loop runs on its own OS thread at nice probeNice. Only CPU
// priority is raised: the kernel derives an I/O priority from the nice
// value, which would let the probe jump the disk's queue under an
// I/O-priority-aware scheduler (BFQ) and measure a better disk than etcd
// sees, so the thread's I/O priority is pinned first to best-effort level
// 4, what every nice-0 process gets.
const (
	probeNice = -10

	ioprioWhoProcess = 1 // IOPRIO_WHO_PROCESS: a thread id
	ioprioClassBE    = 2 // IOPRIO_CLASS_BE
	ioprioClassShift = 13
	ioprioNormal     = ioprioClassBE<<ioprioClassShift | 4
)

// lockProbeThread wires the calling goroutine to its OS thread for good:
// never unlocked, so the thread exits with the goroutine and its priority
// never passes to other work. It then raises the thread's CPU priority;
// without CAP_SYS_NICE (or an RLIMIT_NICE that allows it) the thread keeps
// its normal priority and the error says so. The goroutine calls release
// before it exits: the runtime cannot end the process's main thread, if
// that is the one it got, and parks it instead, so priority is put back.
func lockProbeThread() (release func(), err error) {
	runtime.LockOSThread()
	tid := unix.Gettid()
	release = func() {
		_ = unix.Setpriority(unix.PRIO_PROCESS, tid, 0)
		_, _, _ = unix.RawSyscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(tid), 0)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(tid), ioprioNormal); errno != 0 {
		return release, fmt.Errorf("ioprio_set best-effort 4: %w", errno)
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, tid, probeNice); err != nil {
		return release, fmt.Errorf("setpriority nice %d: %w", probeNice, err)
	}
	return release, nil
}
