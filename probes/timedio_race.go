//go:build race

package probes

import (
	"sync/atomic"
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

func timedPreads(fl *inflight, _ bool, stop *atomic.Bool, fd int, b []byte, offs, durs []int64) (done int, short bool, errno unix.Errno) {
	for done < len(offs) && done < len(durs) {
		if stop != nil && stop.Load() {
			break
		}
		start := nanotime()
		fl.mark(start)
		n, _, e := unix.Syscall6(unix.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(offs[done]), 0, 0)
		end := nanotime()
		fl.end()
		if e != 0 {
			return done, false, e
		}
		if int(n) != len(b) {
			return done, true, 0
		}
		durs[done] = end - start
		done++
	}
	return done, false, 0
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
	t2, t3 := t1, t1
	if werr == 0 && int(n) == len(b) {
		t2 = nanotime()
		_, _, serr = unix.Syscall(unix.SYS_FDATASYNC, uintptr(fd), 0, 0)
		t3 = nanotime()
	}
	fl.end()
	return walOpResult(werr, serr, int(n), len(b), t0, t1, t2, t3)
}

func timedSubmit(ctx uintptr, cbs []*iocb) (n int, at int64, errno unix.Errno) {
	at = nanotime()
	r, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, ctx, uintptr(len(cbs)), uintptr(unsafe.Pointer(&cbs[0])))
	if e != 0 {
		return 0, at, e
	}
	return int(r), at, 0
}

func timedGetevents(ctx uintptr, minNr int, events []ioEvent, timeout *unix.Timespec) (n int, at int64, errno unix.Errno) {
	r, _, e := unix.Syscall6(unix.SYS_IO_GETEVENTS, ctx, uintptr(minNr), uintptr(len(events)), uintptr(unsafe.Pointer(&events[0])), uintptr(unsafe.Pointer(timeout)), 0)
	at = nanotime()
	if e != 0 {
		return 0, at, e
	}
	return int(r), at, 0
}
