package probes

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/blockdev"
)

// Check profiles.
const (
	ProfileEtcd     = "etcd"
	ProfileRandRead = "randread"
)

// CheckOptions configure a one-shot `diskcanary check` run.
type CheckOptions struct {
	Dir     string
	Profile string
	// Samples is the number of timed ops: 10,000 by default, which for the
	// etcd profile is fio's --bs=2300 --size=22m recipe.
	Samples    int
	BlockSize  int64
	WorkingSet int64 // randread
	// KeepWorkingSet leaves the randread working set in Dir for the next run
	// (and for fio to read the same file).
	KeepWorkingSet bool
	MinFree        int64
	// Timeout gives up on a run (a hung disk) after this long; 0 = never.
	Timeout       time.Duration
	ProcFS, SysFS string
}

// CheckResult is what a check measured.
type CheckResult struct {
	Profile    string
	Path       string
	Device     string
	Filesystem string
	// Latencies are the timed ops (fdatasync for etcd, read for randread), sorted.
	Latencies []time.Duration
	// Writes are the etcd profile's pwrite latencies, sorted.
	Writes   []time.Duration
	Warnings []string
	// WorkingSetFile is the randread file, if kept.
	WorkingSetFile string
}

type sampleRecorder struct {
	writes, syncs, reads []time.Duration
}

func (r *sampleRecorder) recordWAL(w, s time.Duration) {
	r.writes = append(r.writes, w)
	r.syncs = append(r.syncs, s)
}

func (r *sampleRecorder) recordRead(d time.Duration) { r.reads = append(r.reads, d) }

// ErrTimeout is returned when a check runs past CheckOptions.Timeout.
var ErrTimeout = errors.New("timed out")

// Check runs one profile. If ctx ends or the timeout passes first, it
// returns at once with an error, even when an I/O is stuck in the kernel.
//
// The timeout is a timerfd read by a blocked goroutine, not a Go timer: any
// pending Go runtime timer adds tens of microseconds to every blocking
// syscall on a 2-CPU machine (measured: 4 KiB O_DIRECT read p50 63 µs →
// ~100 µs), which would make check disagree with fio.
func Check(ctx context.Context, o CheckOptions) (*CheckResult, error) {
	if o.ProcFS == "" {
		o.ProcFS = "/proc"
	}
	if o.SysFS == "" {
		o.SysFS = "/sys"
	}
	fl := newInflight()
	stop := new(stopFlag)
	type outcome struct {
		res *CheckResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := runCheck(o, fl, stop)
		done <- outcome{res, err}
	}()
	expired, cancelTimer, err := timerfdAfter(o.Timeout)
	if err != nil {
		return nil, err
	}
	defer cancelTimer()
	var cause error
	select {
	case out := <-done:
		return out.res, out.err
	case <-ctx.Done():
		cause = ctx.Err()
	case <-expired:
		cause = ErrTimeout
	}
	stop.Store(true)
	if age := fl.age(); age > 0 {
		return nil, fmt.Errorf("%w: an I/O on %s has been in flight for %v (hung disk?)", cause, o.Dir, age.Round(time.Millisecond))
	}
	return nil, cause
}

// timerfdAfter returns a channel closed after d (never, if d <= 0), backed
// by a kernel timerfd so no Go runtime timer is pending meanwhile.
func timerfdAfter(d time.Duration) (<-chan struct{}, func(), error) {
	ch := make(chan struct{})
	if d <= 0 {
		return ch, func() {}, nil
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("timerfd: %w", err)
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds())}
	if err := unix.TimerfdSettime(fd, 0, &spec, nil); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("timerfd: %w", err)
	}
	var cancelled atomic.Bool
	go func() {
		var b [8]byte
		_, err := unix.Read(fd, b[:])
		if err == nil && !cancelled.Load() {
			close(ch)
		}
	}()
	cancel := func() {
		cancelled.Store(true)
		// Fire it now so the reader returns and the fd can be closed.
		_ = unix.TimerfdSettime(fd, 0, &unix.ItimerSpec{Value: unix.Timespec{Nsec: 1}}, nil)
		go func() { time.Sleep(10 * time.Millisecond); unix.Close(fd) }()
	}
	return ch, cancel, nil
}

func runCheck(o CheckOptions, fl *inflight, stop *stopFlag) (*CheckResult, error) {
	// No garbage collection during the measurement: the timed loops do
	// not allocate, and a stop-the-world must never wait on a raw syscall
	// (timedio.go). A raw syscall also holds its P, so keep a second P for
	// the goroutine that enforces the timeout, even in a one-CPU container.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	d, err := openProbeDir(o.Dir)
	if err != nil {
		return nil, err
	}
	defer d.close()
	res := &CheckResult{Profile: o.Profile, Path: o.Dir}
	if t, err := blockdev.Resolve(o.Dir, o.ProcFS, o.SysFS); err == nil {
		res.Path, res.Device, res.Filesystem = t.Path, t.Device, t.FSType
	}
	if w := d.fsWarning(); w != "" {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s: this filesystem does not measure a disk", w))
	}
	rec := &sampleRecorder{}
	switch o.Profile {
	case ProfileEtcd:
		err = checkWAL(d, o, rec, fl, stop)
		res.Latencies, res.Writes = rec.syncs, rec.writes
	case ProfileRandRead:
		err = checkRead(d, o, rec, fl, stop, res)
		res.Latencies = rec.reads
	default:
		return nil, fmt.Errorf("unknown profile %q (etcd, randread)", o.Profile)
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(res.Latencies)
	slices.Sort(res.Writes)
	if o.Profile == ProfileEtcd && len(res.Latencies) > 0 && res.Latencies[len(res.Latencies)/2] < 10*time.Microsecond {
		res.Warnings = append(res.Warnings, "fdatasync p50 < 10µs: the flush is not reaching a device (cache, tmpfs or a lying write cache)")
	}
	return res, nil
}

// checkWAL is fio's etcd recipe: one fresh file, fallocated, N sequential
// writes with fdatasync after each, then deleted.
func checkWAL(d *probeDir, o CheckOptions, rec *sampleRecorder, fl *inflight, stop *stopFlag) error {
	size := int64(o.Samples) * o.BlockSize
	if err := d.checkFree(size, o.MinFree); err != nil {
		return err
	}
	name := filePrefix + "check-wal"
	fd, err := d.create(name, 0)
	if err != nil {
		return err
	}
	defer func() {
		unix.Close(fd)
		_ = d.remove(name)
	}()
	if err := unix.Fallocate(fd, 0, 0, size); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		return &opError{"fallocate", filepath.Join(d.path, name), err}
	}
	buf, err := alignedBuffer(int(o.BlockSize))
	if err != nil {
		return err
	}
	defer freeBuffer(buf)
	fillRandom(buf)
	rec.syncs = make([]time.Duration, 0, o.Samples)
	rec.writes = make([]time.Duration, 0, o.Samples)
	_, _, err = runWAL(fd, buf, 0, o.Samples, rec, fl, &stop.Bool, filepath.Join(d.path, name), true)
	return err
}

// checkRead reads a working set that is pre-written with random data (and
// kept, recognised by its header, when asked), with O_DIRECT.
func checkRead(d *probeDir, o CheckOptions, rec *sampleRecorder, fl *inflight, stop *stopFlag, res *CheckResult) error {
	name := filePrefix + "check-readset"
	if !d.readsetValid(name, o.WorkingSet) {
		if err := d.checkFree(o.WorkingSet, o.MinFree); err != nil {
			return err
		}
		if _, err := d.writeReadset(name, o.WorkingSet, fl); err != nil {
			return err
		}
	}
	if o.KeepWorkingSet {
		res.WorkingSetFile = filepath.Join(d.path, name)
	} else {
		defer d.remove(name)
	}
	fd, err := d.open(name, unix.O_RDONLY|unix.O_DIRECT)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("%s: %w", o.Dir, errNoODirect)
		}
		return err
	}
	defer unix.Close(fd)
	bs := o.BlockSize
	lo, hi := (readsetHeader+bs-1)/bs, o.WorkingSet/bs
	if hi-lo < 1 {
		return fmt.Errorf("working set of %d bytes holds no %d-byte block", o.WorkingSet, bs)
	}
	buf, err := alignedBuffer(int(bs))
	if err != nil {
		return err
	}
	defer freeBuffer(buf)
	rec.reads = make([]time.Duration, 0, o.Samples)
	_, err = runReads(fd, buf, newBlockPicker(lo, hi), o.Samples, rec, fl, &stop.Bool, filepath.Join(d.path, name), true)
	return err
}
