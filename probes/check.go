package probes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
)

// Check profiles.
const (
	// ProfileEtcd is the WAL probe as the daemon runs it: paced like etcd's
	// appends (Gap), so its percentiles predict etcd's own WAL fsyncs.
	ProfileEtcd = "etcd"
	// ProfileFioEtcd is fio's etcd recipe, writes back to back (Gap 0):
	// for comparison with fio and installer gates that use it. It reads
	// faster than etcd sees (README "How it measures").
	ProfileFioEtcd  = "fio-etcd"
	ProfileRandRead = "randread"
)

// CheckOptions configure a one-shot `diskcanary check` run.
type CheckOptions struct {
	Dir     string
	Profile string
	// Samples is the number of timed ops: 10,000 by default, which for the
	// etcd profiles is fio's --bs=2300 --size=22m recipe.
	Samples   int
	BlockSize int64
	// Gap is the etcd profile's pause between ops (fio's thinktime); nil
	// is the WAL probe's default. The fio-etcd profile always uses 0.
	Gap        *time.Duration
	WorkingSet int64 // randread
	// KeepWorkingSet leaves the randread working set in Dir for the next run
	// (and for fio to read the same file).
	KeepWorkingSet bool
	MinFree        int64
	// Timeout gives up on a run (a hung disk) after this long; 0 = never.
	Timeout       time.Duration
	ProcFS, SysFS string
}

// probeConfig is the daemon's probe config for a check profile, defaults
// applied: check runs the daemon's probe kinds.
func (o CheckOptions) probeConfig() (config.Probe, error) {
	c := config.Probe{Name: "check", Dir: o.Dir, BlockSize: config.ByteSize(o.BlockSize), MinFree: config.ByteSize(o.MinFree)}
	switch o.Profile {
	case ProfileEtcd, ProfileFioEtcd:
		c.Kind = config.KindWAL
		c.Gap = o.Gap
		if o.Profile == ProfileFioEtcd {
			c.Gap = new(time.Duration)
		}
		// The priming op comes on top of the samples (wal.go).
		c.Ops = o.Samples + 1
	case ProfileRandRead:
		c.Kind = config.KindRandRead
		c.WorkingSet = config.ByteSize(o.WorkingSet)
		c.Ops = o.Samples
	default:
		return c, fmt.Errorf("unknown profile %q (etcd, fio-etcd, randread)", o.Profile)
	}
	c.ApplyProbeDefaults()
	// check's own floor: 0 is a floor of 0 here, not "the default".
	c.MinFree = config.ByteSize(o.MinFree)
	if c.Kind == config.KindWAL {
		// One segment holds the whole run, as fio's one file does.
		c.SegmentSize = max(c.SegmentSize, config.ByteSize(int64(c.Ops)*int64(c.BlockSize)))
	}
	return c, nil
}

// CheckResult is what a check measured.
type CheckResult struct {
	Profile    string
	Path       string
	Device     string
	Filesystem string
	// Latencies are the timed ops (fdatasync for etcd, read for randread), sorted.
	Latencies []time.Duration
	// Gap is the pause between WAL ops; nil for randread.
	Gap *time.Duration
	// Writes are the etcd profiles' pwrite latencies, sorted.
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
	stop := new(atomic.Bool)
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

func runCheck(o CheckOptions, fl *inflight, stop *atomic.Bool) (*CheckResult, error) {
	// No garbage collection during the measurement: the timed loops do
	// not allocate, and a stop-the-world must never wait on a raw syscall
	// (timedio.go). A raw syscall also holds its P, so keep a second P for
	// the goroutine that enforces the timeout, even in a one-CPU container.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	c, err := o.probeConfig()
	if err != nil {
		return nil, err
	}
	s, err := openDirSite(o.Dir, o.ProcFS, o.SysFS, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer s.close()
	res := &CheckResult{Profile: o.Profile, Path: o.Dir, Device: s.target.Device, Filesystem: s.target.FSType}
	if s.target.Path != "" {
		res.Path = s.target.Path
	}
	if w := s.dir.fsWarning(); w != "" {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s: this filesystem does not measure a disk", w))
	}
	file := filePrefix + c.Name + "-" + fileSuffix(c)
	k := kinds[c.Kind](c, file)
	defer k.close()
	if err := k.open(s); err != nil {
		return nil, err
	}
	if r, ok := k.(*readProbe); ok {
		if r.odirectRefused {
			return nil, fmt.Errorf("%s: %w", o.Dir, errNoODirect)
		}
		if o.KeepWorkingSet {
			res.WorkingSetFile = filepath.Join(s.dir.path, file)
		} else {
			defer s.dir.remove(file)
		}
	}
	if _, err := k.prepare(fl); err != nil {
		return nil, err
	}
	rec := &sampleRecorder{
		syncs:  make([]time.Duration, 0, o.Samples),
		writes: make([]time.Duration, 0, o.Samples),
		reads:  make([]time.Duration, 0, o.Samples),
	}
	out, err := k.burst(&runner{rec: rec, fl: fl, stop: stop, raw: true}, c.Ops)
	if err != nil {
		return nil, err
	}
	res.Latencies, res.Writes, res.Gap = rec.syncs, rec.writes, c.Gap
	if c.Kind == config.KindRandRead {
		res.Latencies, res.Gap = rec.reads, nil
	}
	slices.Sort(res.Latencies)
	slices.Sort(res.Writes)
	if out.flushLies {
		res.Warnings = append(res.Warnings, "fdatasync p50 < 10µs and no flush reached a device: the flush is not reaching a disk (cache, tmpfs or a lying write cache)")
	}
	return res, nil
}
