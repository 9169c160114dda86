package probes

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The capacity sweep's random reads and writes go to the kernel through
// Linux AIO (io_setup, io_submit, io_getevents), from one thread: the
// ops due are submitted in one batch and their ends reaped in one, as fio's
// libaio engine does. A pool of threads each blocked in its own pread
// paid a wake-up per op, and on a fast disk with few CPUs those wake-ups,
// not the disk, set the sweep's ceiling (go run ./bench capacity-vs-fio).
// Linux AIO rather than io_uring: container runtimes' default seccomp
// profiles refuse io_uring_setup, and the daemon's capacity probe runs
// in one. An O_DIRECT op is asynchronous on a block device and on
// ext4/xfs/btrfs; where the filesystem serves it synchronously (a page
// cache fallback, a FUSE filesystem without async direct I/O), io_submit
// returns when the op has ended, and the sweep's latencies from each op's
// due time show the queue that makes.

// iocb is the kernel's struct iocb (64 bytes; the key and rw_flags
// order is little-endian's, both zero here).
type iocb struct {
	data   uint64
	_      uint32 // aio_key
	_      int32  // aio_rw_flags
	opcode uint16
	_      int16 // aio_reqprio
	fd     uint32
	buf    uint64
	nbytes uint64
	offset int64
	_      uint64 // aio_reserved2
	_      uint32 // aio_flags
	_      uint32 // aio_resfd
}

// ioEvent is the kernel's struct io_event.
type ioEvent struct {
	data uint64
	_    uint64 // obj
	res  int64
	_    int64 // res2
}

const (
	iocbCmdPread  = 0
	iocbCmdPwrite = 1
)

var (
	_ = [1]struct{}{}[unsafe.Sizeof(iocb{})-64]
	_ = [1]struct{}{}[unsafe.Sizeof(ioEvent{})-32]
)

// aioOps is the capacity sweep's engine for random reads or writes: depth
// slots, each with its own mmap'd buffer and in-flight mark (which the
// sweep's caller watches for a hung op), one AIO context.
type aioOps struct {
	ctx     uintptr
	fd      int
	bufs    [][]byte
	fls     []*inflight
	cbs     []iocb
	batch   []*iocb
	events  []ioEvent
	free    []int   // slots not in flight
	opOf    []int   // the op each slot carries
	started []int64 // when each slot's op was submitted (nanotime)
	ts      unix.Timespec
	offset  func() int64 // the next op's offset
	// where names the target of a failed op; written, set for writes,
	// counts the bytes each write wrote.
	where   string
	written *atomic.Int64
}

// newAIOOps sets up a slot for each of bufs (as many as the sweep's
// concurrency, each the block size) on fd: reads, or writes when written
// is set.
func newAIOOps(fd int, bufs [][]byte, fls []*inflight, offset func() int64, where string, written *atomic.Int64) (*aioOps, error) {
	e := &aioOps{fd: fd, bufs: bufs, fls: fls, offset: offset, where: where, written: written,
		cbs: make([]iocb, len(bufs)), batch: make([]*iocb, 0, len(bufs)), events: make([]ioEvent, len(bufs)),
		opOf: make([]int, len(bufs)), started: make([]int64, len(bufs))}
	for s := len(bufs) - 1; s >= 0; s-- {
		e.free = append(e.free, s)
	}
	if _, _, errno := unix.Syscall(unix.SYS_IO_SETUP, uintptr(len(bufs)), uintptr(unsafe.Pointer(&e.ctx)), 0); errno != 0 {
		if errno == unix.EAGAIN {
			return nil, fmt.Errorf("io_setup: %w (the system's AIO events, fs.aio-max-nr, are taken)", errno)
		}
		return nil, fmt.Errorf("io_setup: %w", errno)
	}
	return e, nil
}

func (e *aioOps) depth() int { return len(e.bufs) }

func (e *aioOps) busy() int { return len(e.bufs) - len(e.free) }

// stage names the ops in errors.
func (e *aioOps) stage() string {
	if e.written != nil {
		return "write"
	}
	return "read"
}

// begin fills a free slot's iocb for op i; flush submits it.
func (e *aioOps) begin(i int) {
	s := e.free[len(e.free)-1]
	e.free = e.free[:len(e.free)-1]
	e.opOf[s] = i
	cb := &e.cbs[s]
	*cb = iocb{data: uint64(s), opcode: iocbCmdPread, fd: uint32(e.fd), buf: uint64(uintptr(unsafe.Pointer(&e.bufs[s][0]))),
		nbytes: uint64(len(e.bufs[s])), offset: e.offset()}
	if e.written != nil {
		cb.opcode = iocbCmdPwrite
	}
	e.batch = append(e.batch, cb)
}

// flush submits the ops begun since the last flush, in one io_submit
// where the kernel takes them all; when it refuses one, the ops not
// taken are dropped and their slots freed.
func (e *aioOps) flush() error {
	for len(e.batch) > 0 {
		n, at, errno := timedSubmit(e.ctx, e.batch)
		for _, cb := range e.batch[:n] {
			e.started[cb.data] = at
			e.fls[cb.data].mark(at)
		}
		e.batch = e.batch[:copy(e.batch, e.batch[n:])]
		if errno == unix.EINTR || errno == 0 && n > 0 {
			continue
		}
		for _, cb := range e.batch {
			e.free = append(e.free, int(cb.data))
		}
		e.batch = e.batch[:0]
		if errno == 0 {
			return &opError{e.stage(), e.where, errors.New("io_submit took no op")}
		}
		return &opError{e.stage(), e.where, fmt.Errorf("io_submit: %w", errno)}
	}
	return nil
}

// wait returns once an op has ended or the clock reads until (a
// nanotime; never when until is noDeadline), calling end for each op that
// ended with its end time and service time; the first failed op's error
// is returned after every end is counted.
func (e *aioOps) wait(until int64, end func(i int, at int64, svc time.Duration)) error {
	timeout := &e.ts
	minNr := 1
	switch d := until - nanotime(); {
	case until == noDeadline:
		timeout = nil
	case d <= 0:
		minNr, e.ts = 0, unix.Timespec{}
	default:
		e.ts = unix.NsecToTimespec(d)
	}
	n, at, errno := timedGetevents(e.ctx, minNr, e.events, timeout)
	if errno != 0 && errno != unix.EINTR {
		return fmt.Errorf("io_getevents: %w", errno)
	}
	var failed error
	for _, ev := range e.events[:n] {
		s := int(ev.data)
		e.fls[s].end()
		e.free = append(e.free, s)
		if err := e.result(s, ev.res); err != nil && failed == nil {
			failed = err
		}
		end(e.opOf[s], at, time.Duration(at-e.started[s]))
	}
	return failed
}

// result is the error of slot s's op, which returned res (its bytes, or
// -errno), and counts a write's bytes.
func (e *aioOps) result(s int, res int64) error {
	if e.written != nil && res > 0 {
		e.written.Add(res)
	}
	switch {
	case res < 0:
		return &opError{e.stage(), e.where, unix.Errno(-res)}
	case res != int64(len(e.bufs[s])):
		return &opError{e.stage(), e.where, errShortIO}
	}
	return nil
}

// close releases the context; only with no op in flight (io_destroy waits
// for them).
func (e *aioOps) close() {
	_, _, _ = unix.Syscall(unix.SYS_IO_DESTROY, e.ctx, 0, 0)
}
