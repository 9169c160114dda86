package probes

// The op loops: the timed WAL and read bursts that the daemon and check share.

import (
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
