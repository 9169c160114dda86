//go:build !race

package probes

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Timed I/O: each probe op is timed from inside the syscall wrapper, by
// clock reads (the runtime's vDSO monotonic clock, what fio reads too)
// taken immediately before and after the syscall.
//
// Why not time.Now() around unix.Pread: when a blocking syscall returns,
// the goroutine must get a P back from the Go scheduler before it can read
// the clock, and that wait lands in the measurement. Measured on 2 vCPUs:
// 4 KiB O_DIRECT read p50 63 µs in fio but ~100 µs through unix.Pread
// while any runtime timer was pending, and under 50 concurrent scrapers
// fdatasync means rose 18× and read p99 from 0.25 ms to 8.6 ms — the
// scheduler, not the disk. Timing inside the wrapper measures what fio
// measures.
//
// The daemon enters and leaves syscall state around the op exactly like
// syscall.Syscall does, so a hung op blocks only its own thread: a thread
// in a raw syscall keeps its P, and a garbage collection's stop-the-world
// would wait for a hung disk and /metrics with it. Syscall state has a
// cost of its own, though. When every P is idle, as during a gap slept by
// time.Sleep, the runtime's monitor thread sleeps; entering syscall state
// wakes it, it polls every 20 µs or so while the op is in flight, and at
// GOMAXPROCS 1 it hands the P to another thread it wakes. Each wake-up
// competes for the CPUs the kernel needs to finish the op. So a WAL op's
// gap is slept inside the op's syscall state, by the thread's own
// clock_nanosleep: the monitor's wake-up and the P's handoff happen at the
// gap's start, and by the time the op starts the runtime sleeps again.
// Traced on the loop device (2026-11-26, docs/benchmarks.md): the daemon's
// other threads woke 2.7-3.1 times per WAL op in flight with the gap slept
// by time.Sleep, 0.07-0.08 with it slept in syscall state; the same op in
// one process read 10-13 % lower at p50. `check`, which serves nothing
// while it measures, runs with the collector off and uses raw syscalls
// (raw=true), so the runtime does nothing around its ops, as in fio; the
// daemon never does. Both sleep the gap the same way. A read has no gap:
// the daemon's reads still pay the monitor's wake-up.
//
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

// timedPreads is a window of reads, timed: a pread of len(b) bytes at each
// of offs, its duration into durs at the same index, all in one pass
// through syscall state. One pass, not one per read: a read in syscall
// state longer than the runtime monitor's ~20 µs tick makes the monitor
// hand the P to another thread it wakes, and reads back to back re-enter
// syscall state each time, so every read paid those wake-ups on the CPUs
// that serve it (the WAL op's gap, docs/wal-gap.md). In one pass the P is
// handed off once, during the window's first read. Each read is marked in
// flight from the clock reading that starts its measurement. It stops at
// the first failed or short read, or when stop is set, and returns how many
// reads completed and whether a failed (errno) or short read ended it.
// Buffers passed as uintptr are the probes' mmap'd aligned buffers, outside
// the Go heap, so nothing needs keeping alive.
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

// timedWALOp is one WAL op, the gap before it, then pwrite and fdatasync,
// in one pass through syscall state and with three clock reads: the
// reading that ends the write starts the fdatasync (between them is only
// a branch), so the two are still timed apart, at the cost of one clock
// read fewer than timing them one by one. A failed or short write skips
// the fdatasync. The op is marked in flight after the gap.
//
//go:nosplit
func timedWALOp(fl *inflight, raw bool, fd int, b []byte, off int64, gap time.Duration) (op walOp) {
	if !raw {
		entersyscall()
	}
	if gap > 0 {
		sleepGap(gap)
	}
	t0 := nanotime()
	fl.mark(t0)
	n, _, werr := unix.RawSyscall6(unix.SYS_PWRITE64, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(off), 0, 0)
	t1 := nanotime()
	var serr unix.Errno
	t2 := t1
	if werr == 0 && int(n) == len(b) {
		_, _, serr = unix.RawSyscall6(unix.SYS_FDATASYNC, uintptr(fd), 0, 0, 0, 0, 0)
		t2 = nanotime()
	}
	fl.end()
	if !raw {
		exitsyscall()
	}
	return walOpResult(werr, serr, int(n), len(b), t0, t1, t2)
}

// sleepGap sleeps d on the monotonic clock in the calling thread (raw:
// it runs in syscall state, or holds the P in check), to an absolute
// deadline, so that a signal, which ends a sleep with EINTR whatever
// SA_RESTART says, only resumes it.
//
//go:nosplit
func sleepGap(d time.Duration) {
	dl := nanotime() + int64(d)
	ts := unix.Timespec{Sec: dl / 1e9, Nsec: dl % 1e9}
	for {
		_, _, e := unix.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if e != unix.EINTR {
			return
		}
	}
}
