package probes

// timedSyscall does clock_gettime(CLOCK_MONOTONIC), the syscall trap with
// up to four arguments, and clock_gettime again, with nothing in between.
// errno is non-zero when the syscall failed. Assembly: timedio_amd64.s.
//
//go:noescape
func timedSyscall(trap, a1, a2, a3, a4 uintptr) (r1, errno uintptr, start, end int64)
