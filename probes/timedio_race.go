//go:build race

package probes

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Under the race detector the timed ops take the ordinary syscall path:
// the race runtime instruments the in-flight mark's atomics, which cannot
// run in the syscall state timedio.go enters by hand (the stack may not
// grow there). Timings of a race build are not measurements; the logic
// around them (in-flight marks, recording, errors) is the same.

func (f *inflight) mark(now int64) { f.start.Store(now | 1) }

func (f *inflight) end() { f.start.Store(0) }

func timedPread(fl *inflight, _ bool, fd int, b []byte, off int64) (int, time.Duration, error) {
	start := nanotime()
	fl.mark(start)
	n, _, errno := unix.Syscall6(unix.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(off), 0, 0)
	end := nanotime()
	fl.end()
	if errno != 0 {
		return 0, 0, errno
	}
	return int(n), time.Duration(end - start), nil
}

func timedWALOp(fl *inflight, _ bool, fd int, b []byte, off int64, gap time.Duration) (op walOp) {
	if gap > 0 {
		time.Sleep(gap)
	}
	t0 := nanotime()
	fl.mark(t0)
	n, _, werr := unix.Syscall6(unix.SYS_PWRITE64, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(off), 0, 0)
	t1 := nanotime()
	var serr unix.Errno
	t2 := t1
	if werr == 0 && int(n) == len(b) {
		_, _, serr = unix.Syscall(unix.SYS_FDATASYNC, uintptr(fd), 0, 0)
		t2 = nanotime()
	}
	fl.end()
	return walOpResult(werr, serr, int(n), len(b), t0, t1, t2)
}
