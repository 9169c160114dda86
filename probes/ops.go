// Package probes owns diskcanary's canary probes: the etcd-WAL write probe
// (sequential small writes, fdatasync after each, the fdatasync timed on its
// own) and the 4 KiB O_DIRECT random-read probe over a pre-written working
// set or a read-only block device. It runs them on their own schedule, one
// op in flight per target, under a write budget, and keeps the results in
// Prometheus metrics that a scrape only reads.
//
// The same timed loops back `diskcanary check`, so the daemon and the CLI
// measure exactly the same way.
package probes

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"
	_ "unsafe" // go:linkname

	"golang.org/x/sys/unix"
)

// pageSize is the unit the kernel dirties and accounts (/proc/PID/io write_bytes).
var (
	pageSize  = int64(unix.Getpagesize())
	pageShift = uint(bits.TrailingZeros64(uint64(pageSize)))
)

// walRecorder receives one WAL op's timings. Implementations must not allocate.
type walRecorder interface {
	recordWAL(write, fdatasync time.Duration)
}

// readRecorder receives one read's latency. Implementations must not allocate.
type readRecorder interface {
	recordRead(d time.Duration)
}

// recorder takes both kinds' ops: the daemon's histograms, check's samples.
type recorder interface {
	walRecorder
	readRecorder
}

// runner is how a burst runs: where its ops go, the target's in-flight
// mark (for the stall watchdog), the flag that stops it between ops, and
// whether the syscalls are raw (check only, timedio.go).
type runner struct {
	rec  recorder
	fl   *inflight
	stop *atomic.Bool
	raw  bool
}

// burstResult is what a burst did besides its timed ops.
type burstResult struct {
	written   int64 // bytes dirtied, page-granular
	read      int64
	flushLies bool // fdatasync did not reach a device (wal)
}

// inflight tracks the single op in flight on a target, for the stall
// watchdog. It holds the op's start on the runtime's monotonic clock
// (cheaper than time.Now on every op), 0 when idle.
type inflight struct {
	start atomic.Int64
	// laidOut counts the setup bytes written so far (the read working
	// set), for check's progress line.
	laidOut atomic.Int64
}

func newInflight() *inflight { return &inflight{} }

func (f *inflight) begin() { f.mark(nanotime()) }

// mark and end are in timedio.go (timedio_race.go under -race).

// nanotime is CLOCK_MONOTONIC through the vDSO; callable in syscall state
// (the runtime itself reads it there).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// age is how long the current op has been in flight (0 when idle).
func (f *inflight) age() time.Duration {
	s := f.start.Load()
	if s == 0 {
		return 0
	}
	return time.Duration(nanotime() - s)
}

// opError is a failed syscall with the stage it failed in; reason() gives a
// bounded label value for diskcanary_probe_failures_total.
type opError struct {
	stage string // open, fallocate, write, fdatasync, read, ...
	path  string
	err   error
}

func (e *opError) Error() string { return fmt.Sprintf("%s %s: %v", e.stage, e.path, e.err) }
func (e *opError) Unwrap() error { return e.err }

// Failure reasons: a small closed set, so the label stays bounded.
const (
	reasonMissing     = "missing"
	reasonPermission  = "permission"
	reasonReadOnly    = "read_only"
	reasonNoSpace     = "no_space"
	reasonLowSpace    = "low_space"
	reasonIOError     = "io_error"
	reasonNoODirect   = "odirect_unsupported"
	reasonBudget      = "budget_exhausted"
	reasonLocked      = "locked"
	reasonUnsafe      = "unsafe_path"
	reasonShortIO     = "short_io"
	reasonOther       = "other"
	reasonInterrupted = "interrupted"
)

// failureReasons is every reason reasonOf returns: the engine exports each
// at 0 for every probe from the start, so a dashboard shows 0 rather than
// "No data" before the first failure, and the metric's help lists them.
var failureReasons = []string{
	reasonMissing, reasonPermission, reasonReadOnly, reasonNoSpace, reasonLowSpace, reasonIOError,
	reasonNoODirect, reasonBudget, reasonLocked, reasonUnsafe, reasonShortIO, reasonInterrupted, reasonOther,
}

var (
	errLowSpace    = errors.New("free space would drop below the floor (min_free)")
	errBudget      = errors.New("daily write budget exhausted (daily_write_budget)")
	errShortIO     = errors.New("short read or write")
	errInterrupted = errors.New("interrupted by shutdown")
)

// reasonOf maps an error to its failure reason.
func reasonOf(err error) string {
	var errno unix.Errno
	switch {
	case errors.Is(err, errLowSpace):
		return reasonLowSpace
	case errors.Is(err, errBudget):
		return reasonBudget
	case errors.Is(err, errShortIO):
		return reasonShortIO
	case errors.Is(err, errInterrupted):
		return reasonInterrupted
	case errors.Is(err, errUnsafe):
		return reasonUnsafe
	case errors.Is(err, errLocked):
		return reasonLocked
	case errors.Is(err, errNoODirect):
		return reasonNoODirect
	case errors.As(err, &errno):
		switch errno {
		case unix.ENOENT, unix.ENOTDIR:
			return reasonMissing
		case unix.EACCES, unix.EPERM:
			return reasonPermission
		case unix.EROFS:
			return reasonReadOnly
		case unix.ENOSPC, unix.EDQUOT:
			return reasonNoSpace
		case unix.EIO:
			return reasonIOError
		}
	}
	return reasonOther
}

// pagesDirtied is how many bytes of page cache a write of n bytes at off
// dirties, given every page was cleaned by the previous fdatasync. It is
// what the kernel adds to the process's write_bytes.
func pagesDirtied(off, n int64) int64 {
	if n <= 0 {
		return 0
	}
	// Shifts, not divisions: this runs once per op.
	first := off >> pageShift
	last := (off + n - 1) >> pageShift
	return (last - first + 1) << pageShift
}

// runWAL does n × {pwrite(bs at off); fdatasync} sequentially from off,
// sleeping gap before each op (after the previous one ended: fio's
// thinktime). The gap is slept and each op's write and fdatasync are timed
// apart on the monotonic clock inside the syscall wrapper (timedio.go). It
// returns the next offset and the bytes dirtied. The stop flag is checked
// between ops, so shutdown never waits for a whole burst.
func runWAL(fd int, buf []byte, off int64, n int, gap time.Duration, rec walRecorder, r *runner, path string) (int64, int64, error) {
	var dirtied int64
	bs := int64(len(buf))
	for i := 0; i < n; i++ {
		if r.stop != nil && r.stop.Load() {
			return off, dirtied, errInterrupted
		}
		op := timedWALOp(r.fl, r.raw, fd, buf, off, gap)
		dirtied += pagesDirtied(off, int64(op.wrote))
		if op.err != nil {
			return off, dirtied, &opError{op.stage, path, op.err}
		}
		rec.recordWAL(op.write, op.fdatasync)
		off += bs
	}
	return off, dirtied, nil
}

// unrecorded takes ops that are run but not measured.
type unrecorded struct{}

func (unrecorded) recordWAL(_, _ time.Duration) {}

// readWindow is how many reads go through syscall state in one pass
// (timedPreads): the default burst of 100 in one.
const readWindow = 128

// readTimes is a read window's offsets and durations, kept by the probe so
// that a burst allocates nothing.
type readTimes struct{ offs, durs [readWindow]int64 }

// runReads does n O_DIRECT preads of len(buf) bytes at uniform random
// aligned offsets in [lo, hi) blocks, timed in windows of up to readWindow
// reads and recorded after each window.
func runReads(fd int, buf []byte, rng *blockPicker, t *readTimes, n int, r *runner, path string) (int64, error) {
	var read int64
	bs := int64(len(buf))
	for n > 0 {
		k := min(n, readWindow)
		for i := range k {
			t.offs[i] = rng.next() * bs
		}
		done, short, errno := timedPreads(r.fl, r.raw, r.stop, fd, buf, t.offs[:k], t.durs[:k])
		for _, d := range t.durs[:done] {
			r.rec.recordRead(time.Duration(d))
		}
		read += int64(done) * bs
		switch {
		case errno != 0:
			return read, &opError{"read", path, errno}
		case short:
			return read, &opError{"read", path, errShortIO}
		case done < k:
			return read, errInterrupted
		}
		n -= k
	}
	return read, nil
}

// alignedBuffer returns a page-aligned buffer (anonymous mmap), which
// satisfies O_DIRECT's alignment for logical block sizes up to the page size.
func alignedBuffer(n int) ([]byte, error) {
	size := (int64(n) + pageSize - 1) / pageSize * pageSize
	b, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("allocate aligned buffer: %w", err)
	}
	return b[:n], nil
}

func freeBuffer(b []byte) {
	if b != nil {
		_ = unix.Munmap(b[:cap(b)])
	}
}

// walOp is one WAL op's outcome: the pwrite's result and both durations.
// stage names the syscall that failed when err is set.
type walOp struct {
	wrote     int
	write     time.Duration
	fdatasync time.Duration
	stage     string
	err       error
}

// walOpResult builds a WAL op's outcome from its syscalls' results and
// clock readings: t0 and t1 around the write, t2 and t3 around the
// fdatasync (both t1 when it was skipped).
func walOpResult(werr, serr unix.Errno, n, want int, t0, t1, t2, t3 int64) (op walOp) {
	switch {
	case werr != 0:
		op.stage, op.err = "write", werr
	case n != want:
		op.stage, op.err = "write", errShortIO
	case serr != 0:
		op.stage, op.err = "fdatasync", serr
	}
	if werr == 0 {
		op.wrote = n
	}
	op.write, op.fdatasync = time.Duration(t1-t0), time.Duration(t3-t2)
	return op
}
