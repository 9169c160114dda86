package probes

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
)

// userfaultfd(2) ABI (include/uapi/linux/userfaultfd.h); x/sys/unix has
// only the syscall number.
const (
	uffdAPI               = 0xaa
	uffdioAPI             = 0xc018aa3f // _IOWR(0xAA, 0x3F, struct uffdio_api)
	uffdioRegister        = 0xc020aa00 // _IOWR(0xAA, 0x00, struct uffdio_register)
	uffdioRegisterMissing = 1
)

// A timed op in flight must not hold its P: the daemon's timed I/O enters
// syscall state by hand (timedio.go links runtime.entersyscall), so that a
// garbage collection's stop-the-world does not wait for a disk that hangs.
// If a Go upgrade leaves the linkname in place but it no longer hands the P
// over, this fails in seconds, where the FUSE test of a hung fdatasync
// (TestHungFdatasyncStallsAndRecovers) would freeze the whole test binary.
//
// The op is held without FUSE: pread into a page that a userfaultfd traps,
// released when the only other holder of the userfaultfd, a `sleep 2`,
// exits (the kernel then retries the fault as an ordinary one).
func TestTimedOpInFlightDoesNotHoldItsP(t *testing.T) {
	uffd, _, errno := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC, 0, 0)
	if errno != 0 {
		t.Skipf("skipping: userfaultfd for kernel faults needs root or vm.unprivileged_userfaultfd=1: %v", errno)
	}
	uffdFile := os.NewFile(uffd, "userfaultfd")
	defer uffdFile.Close()
	api := struct{ api, features, ioctls uint64 }{api: uffdAPI}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uffd, uffdioAPI, uintptr(unsafe.Pointer(&api))); errno != 0 {
		t.Skipf("skipping: UFFDIO_API: %v", errno)
	}
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer unix.Munmap(buf)
	reg := struct{ start, len, mode, ioctls uint64 }{
		start: uint64(uintptr(unsafe.Pointer(&buf[0]))), len: 4096, mode: uffdioRegisterMissing}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uffd, uffdioRegister, uintptr(unsafe.Pointer(&reg))); errno != 0 {
		t.Skipf("skipping: UFFDIO_REGISTER: %v", errno)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("skipping: no sleep(1) to hold the userfaultfd")
	}

	path := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.WriteFile(path, make([]byte, 4096), 0o600))
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)

	holder := exec.Command(sleep, "2")
	holder.ExtraFiles = []*os.File{uffdFile}
	require.NoError(t, holder.Start())
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	uffdFile.Close() // the sleep now holds the only reference

	fl := newInflight()
	readDone := make(chan time.Time, 1)
	start := time.Now()
	go func() {
		var offs, durs [1]int64
		done, short, errno := timedPreads(fl, false, nil, fd, buf, offs[:], durs[:])
		readDone <- time.Now()
		if done != 1 || short || errno != 0 {
			t.Errorf("pread: %d reads done, short %v, errno %v", done, short, errno)
		}
	}()
	require.Eventually(t, func() bool { return fl.age() > 0 }, 2*time.Second, time.Millisecond, "the read never started")
	time.Sleep(50 * time.Millisecond) // into the fault

	runtime.GC()
	gcAt := time.Now()
	readAt := <-readDone
	require.Greater(t, readAt.Sub(start), time.Second, "the read did not block on the trapped page: the test proves nothing")
	require.True(t, gcAt.Before(readAt),
		"runtime.GC waited %v for a read in flight: timedPreads' syscall state (runtime.entersyscall via go:linkname) no longer releases the P; see timedio.go", gcAt.Sub(start))
}

// A WAL op's gap must leave the P free, as etcd's idle WAL goroutine does
// (timedio.go): a collection during the gap finishes at once. And signals
// (the runtime's own SIGURG here) do not cut the gap short.
func TestWALGapDoesNotHoldItsPAndOutlastsSignals(t *testing.T) {
	const gap = time.Second
	path := filepath.Join(t.TempDir(), "wal")
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	require.NoError(t, err)
	defer unix.Close(fd)
	buf, err := alignedBuffer(2300)
	require.NoError(t, err)
	defer freeBuffer(buf)

	tids := make(chan int, 1)
	type result struct {
		op    walOp
		start time.Time
		took  time.Duration
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- unix.Gettid()
		start := time.Now()
		op := timedWALOp(newInflight(), false, fd, buf, 0, gap)
		done <- result{op, start, time.Since(start)}
	}()
	tid := <-tids
	time.Sleep(50 * time.Millisecond) // into the gap
	runtime.GC()
	gcAt := time.Now()
	for range 5 {
		require.NoError(t, unix.Tgkill(unix.Getpid(), tid, unix.SIGURG))
		time.Sleep(100 * time.Millisecond)
	}
	r := <-done
	require.NoError(t, r.op.err)
	require.Equal(t, 2300, r.op.wrote)
	require.GreaterOrEqual(t, r.took, gap, "the gap ended early: a signal cut the sleep short")
	require.Less(t, r.took, gap+time.Second)
	require.Less(t, gcAt.Sub(r.start), gap/2, "runtime.GC waited for the gap: the gap holds its P")
}

// countingReads counts the reads a burst records.
type countingReads struct{ n int }

func (c *countingReads) recordRead(time.Duration) { c.n++ }

func (c *countingReads) recordWAL(_, _ time.Duration) {}

// A burst longer than one syscall-state window (readWindow, 128) is timed
// in several and records every read once; a stop set before the burst
// ends it before its first read.
func TestReadBurstSpansWindowsAndStops(t *testing.T) {
	rr := readyProbe(t, config.Probe{Name: "rr", Kind: config.KindRandRead, Dir: t.TempDir(), WorkingSet: 4 << 20, MinFree: 1})
	r := rr.kind.(*readProbe)
	rec, stop := &countingReads{}, new(atomic.Bool)
	run := &runner{rec: rec, fl: rr.fl, stop: stop}
	read, err := runReads(r.fd, r.buf, r.picker, &r.times, 300, run, "x")
	require.NoError(t, err)
	require.Equal(t, int64(300*4096), read)
	require.Equal(t, 300, rec.n)

	stop.Store(true)
	read, err = runReads(r.fd, r.buf, r.picker, &r.times, 300, run, "x")
	require.ErrorIs(t, err, errInterrupted)
	require.Zero(t, read)
	require.Equal(t, 300, rec.n)
}
