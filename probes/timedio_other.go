//go:build !amd64

package probes

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// timedSyscall on architectures without the assembly version: the clock is
// read with raw clock_gettime syscalls around a raw syscall, all inside the
// caller's syscall state, so the scheduler stays out of the measurement.
//
//go:nosplit
func timedSyscall(trap, a1, a2, a3, a4 uintptr) (r1, errno uintptr, start, end int64) {
	var ts unix.Timespec
	unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(&ts)), 0)
	start = ts.Nano()
	r1, _, e := unix.RawSyscall6(trap, a1, a2, a3, a4, 0, 0)
	unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(&ts)), 0)
	return r1, uintptr(e), start, ts.Nano()
}
