//go:build !race

package probes

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Timed I/O: each op is timed by monotonic clock reads taken immediately
// before and after the syscall, inside the wrapper, as fio times it. Around
// unix.Pread the wait for a P after the syscall would land in the sample:
// the scheduler, not the disk (go run ./bench scrape-load,
// go run ./bench syscall-vs-tools).
//
// Each syscall enters and leaves syscall state as syscall.Syscall does, so a
// hung op blocks only its thread and never a GC's stop-the-world.
//
// A WAL op is made the way etcd's WAL makes it, since etcd's fdatasyncs are
// what it predicts: the gap slept by time.Sleep, then the write and the
// fdatasync each in syscall state of its own, paying the runtime monitor's
// wake-ups as etcd does (go run ./bench etcd-vs-daemon). check's
// back-to-back recipe and the reads run raw, as in fio; reads in a burst
// share one pass through syscall state (timedPreads).

// A Go upgrade can break this. Three runtime internals are reached
// by go:linkname: runtime.entersyscall and runtime.exitsyscall here (what
// syscall.Syscall does around a syscall, with our clock reads inside), and
// runtime.nanotime in ops.go (the vDSO clock; nosplit, so callable in
// syscall state). The Go 1.23+ linker refuses a pull linkname
// unless the runtime marks the symbol as linkable; these three are, kept
// for other users (the runtime's comments: "Do not remove or change the
// type signature. See go.dev/issue/67401"). What can go wrong, and how we
// would notice:
//   - the runtime stops exporting one: `go build` fails at link time;
//   - its contract changes (what it needs from the caller's frame, what
//     may run between the two calls): the runtime throws at the first
//     timed op ("entersyscall inconsistent sp", "exitsyscall: syscall
//     frame is no longer valid"), and every probe test fails;
//   - it links and runs but no longer hands the P over, so a hung disk
//     stalls every garbage collection, and /metrics with it:
//     TestTimedOpInFlightDoesNotHoldItsP fails within seconds, and
//     TestHungFdatasyncStallsAndRecovers (DISKCANARY_E2E=1) hangs until
//     go test kills it;
//   - the //go:nosplit chain below outgrows the linker's nosplit limit
//     (a bigger frame in unix.RawSyscall6 or the atomics): `go build`
//     fails with "nosplit stack over N byte limit".
//
// The fallback is timedio_race.go's plain path, which race builds take
// already: the same ops through unix.Syscall6, timed by nanotime around
// the call. It loses the reason for all this (the wait for a P after the
// syscall lands in each sample again), so its figures read high under
// load; it still needs runtime.nanotime, whose stand-in would be
// time.Since from a start time taken at init.

//go:linkname entersyscall runtime.entersyscall
func entersyscall()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()

// mark records an op that started at now (a nanotime reading). mark and
// end run in syscall state, where the stack must not grow: nosplit.
//
//go:nosplit
func (f *inflight) mark(now int64) { f.start.Store(now | 1) } // |1 keeps it non-zero

// end marks the op done.
//
//go:nosplit
func (f *inflight) end() { f.start.Store(0) }

// timedPreads times a pread of len(b) bytes at each of offs into durs, all
// in one pass through syscall state, so the runtime monitor's handoff of
// the P (and its wake-ups on the CPUs serving the reads) happens once per
// window, not once per read. It stops at the first failed or short read or
// when stop is set. b is an mmap'd buffer outside the Go heap.
//
//go:nosplit
func timedPreads(fl *inflight, raw bool, stop *atomic.Bool, fd int, b []byte, offs, durs []int64) (done int, short bool, errno unix.Errno) {
	if !raw {
		entersyscall()
	}
	for done < len(offs) && done < len(durs) {
		if stop != nil && stop.Load() {
			break
		}
		start := nanotime()
		fl.mark(start)
		n, _, e := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(offs[done]), 0, 0)
		end := nanotime()
		fl.end()
		if e != 0 {
			errno = e
			break
		}
		if int(n) != len(b) {
			short = true
			break
		}
		durs[done] = end - start
		done++
	}
	if !raw {
		exitsyscall()
	}
	return done, short, errno
}

// timedWALOp is one WAL op: the gap, then pwrite and fdatasync, each
// timed by clock reads immediately around its syscall. The gap is slept by
// the runtime and, unless raw, each syscall runs in syscall state of its
// own (the way etcd's WAL makes them, see above). A failed or short write
// skips the fdatasync. The op is marked in flight after the gap.
//
//go:nosplit
func timedWALOp(fl *inflight, raw bool, fd int, b []byte, off int64, gap time.Duration) (op walOp) {
	if gap > 0 {
		time.Sleep(gap)
	}
	if !raw {
		entersyscall()
	}
	t0 := nanotime()
	fl.mark(t0)
	n, _, werr := unix.RawSyscall6(unix.SYS_PWRITE64, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(off), 0, 0)
	t1 := nanotime()
	if !raw {
		exitsyscall()
	}
	var serr unix.Errno
	t2, t3 := t1, t1
	if werr == 0 && int(n) == len(b) {
		if !raw {
			entersyscall()
		}
		t2 = nanotime()
		_, _, serr = unix.RawSyscall6(unix.SYS_FDATASYNC, uintptr(fd), 0, 0, 0, 0, 0)
		t3 = nanotime()
		if !raw {
			exitsyscall()
		}
	}
	fl.end()
	return walOpResult(werr, serr, int(n), len(b), t0, t1, t2, t3)
}

// timedSubmit submits cbs with io_submit in syscall state and returns how
// many the kernel took and the clock just before the call, each op's
// start (as fio's libaio engine stamps its issue time).
//
//go:nosplit
func timedSubmit(ctx uintptr, cbs []*iocb) (n int, at int64, errno unix.Errno) {
	entersyscall()
	at = nanotime()
	r, _, e := unix.RawSyscall(unix.SYS_IO_SUBMIT, ctx, uintptr(len(cbs)), uintptr(unsafe.Pointer(&cbs[0])))
	exitsyscall()
	if e != 0 {
		return 0, at, e
	}
	return int(r), at, 0
}

// timedGetevents reaps at least minNr ended ops into events, waiting at
// most timeout (nil: no limit), in syscall state; at is the clock read
// the moment the kernel returns, each reaped op's end (as fio's libaio
// engine stamps completions when it reaps them).
//
//go:nosplit
func timedGetevents(ctx uintptr, minNr int, events []ioEvent, timeout *unix.Timespec) (n int, at int64, errno unix.Errno) {
	entersyscall()
	r, _, e := unix.RawSyscall6(unix.SYS_IO_GETEVENTS, ctx, uintptr(minNr), uintptr(len(events)), uintptr(unsafe.Pointer(&events[0])), uintptr(unsafe.Pointer(timeout)), 0)
	at = nanotime()
	exitsyscall()
	if e != 0 {
		return 0, at, e
	}
	return int(r), at, 0
}
