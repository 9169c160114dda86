package probes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
)

// Check profiles.
const (
	// ProfileEtcd is the WAL probe as the daemon runs it: paced like etcd's
	// appends (Gap), so its percentiles predict etcd's own WAL fsyncs.
	ProfileEtcd = "etcd"
	// ProfileFioEtcd is fio's etcd recipe, writes back to back (Gap 0):
	// for comparison with fio and installer gates that use it. It reads
	// faster than etcd sees (docs/measuring.md, "The write probe").
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
	Timeout time.Duration
	// MaxP99 is the pass threshold for the p99: the run stops as soon as
	// it can no longer pass. 0 runs every sample.
	MaxP99 time.Duration
	// AllowUnsafeFS measures a filesystem that does not tell the truth
	// about the disk (tmpfs, overlayfs, FUSE, ZFS, NFS), and randread
	// without O_DIRECT, instead of refusing to.
	AllowUnsafeFS bool
	// StallThreshold is how long an op may be in flight before it is
	// called hung; 0 is the daemon's default.
	StallThreshold time.Duration
	// Jobs is how many writers run an etcd profile at once in Dir, each
	// on its own file, each judged on its own samples (OpenShift's
	// assisted installer runs fio's etcd recipe twice at once "to simulate
	// overload"); 0 is one. The randread profile always runs one.
	Jobs int
	// Progress, when set, is called about once a second with how far the
	// run is, from the goroutine that waits on it (never a timed thread).
	Progress func(CheckProgress)
	// name and log are a daemon capacity probe's: its files are named
	// after it, and its site logs as its probe does; "check" and no log
	// otherwise.
	name string
	log  *slog.Logger
	// device, for the capacity sweep's randread, is a block device read
	// in place of Dir's working set (read-only, the whole device).
	device string
	// Paths are the host's /proc and /sys; the zero value is this host's.
	Paths hostpath.Paths
}

// CheckProgress is how far a check run is, for a status line.
type CheckProgress struct {
	Elapsed time.Duration
	// LaidOut bytes of WorkingSet written so far, while the randread
	// working set is being written (0 otherwise).
	LaidOut, WorkingSet int64
	// Done of Planned timed ops, summed over the jobs, and the judged
	// latency's percentiles over the samples so far.
	Done, Planned int
	P50, P99      time.Duration
	// ETA of the timed ops at the rate so far (0 until one is done).
	ETA time.Duration
}

// paced is whether the profile is the paced etcd one (a gap between
// ops: the WAL probe's default when none is given).
func (o CheckOptions) paced() bool {
	return o.Profile == ProfileEtcd && (o.Gap == nil || *o.Gap > 0)
}

// jobs is how many writers a run starts.
func (o CheckOptions) jobs() int {
	if o.Profile == ProfileRandRead || o.Jobs < 1 {
		return 1
	}
	return o.Jobs
}

// probeConfig is the daemon's probe config for a check profile, defaults
// applied: check runs the daemon's probe kinds.
func (o CheckOptions) probeConfig(job int) (config.Probe, error) {
	name := "check"
	if o.name != "" {
		name = o.name
	}
	if job > 0 {
		name = fmt.Sprintf("check-%d", job+1)
	}
	c := config.Probe{Name: name, Dir: o.Dir, BlockSize: config.ByteSize(o.BlockSize), MinFree: config.ByteSize(o.MinFree)}
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
		c.Device = o.device
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

// CheckResult is what a check measured. Check returns one even with an
// error, so a run that could not finish still reports what it took.
type CheckResult struct {
	Profile    string
	Path       string
	Device     string
	Filesystem string
	// Planned is the number of timed ops asked for; fewer were taken when
	// Partial.
	Planned int
	Partial bool
	// Exceeded: more ops than the p99 allows of Planned were over MaxP99,
	// so the p99 could not pass any more and the run stopped there.
	Exceeded bool
	// Latencies are the timed ops (fdatasync for etcd, read for randread), sorted.
	Latencies []time.Duration
	// Gap is the pause between WAL ops; nil for randread.
	Gap *time.Duration
	// Writes are the etcd profiles' pwrite latencies, sorted.
	Writes []time.Duration
	// Ops are each job's timed ops (what Latencies holds) in the order
	// they were taken: check --lat-log writes them.
	Ops      [][]time.Duration
	Warnings []string
	// Untrusted says why these latencies do not describe a disk (a
	// filesystem that lies about durability, a flush that reaches no
	// device, reads from the page cache); empty when they do.
	Untrusted string
	// WorkingSetFile is the randread file, if kept.
	WorkingSetFile string
	// JobP99s is each job's p99 when several ran at once; the result's
	// samples are the worst job's.
	JobP99s []time.Duration
}

// sampleRecorder keeps check's samples in slices sized for the whole run,
// so recording never allocates, and judges each as it comes: once more are
// over the threshold than the p99 allows of the planned total, the verdict
// is certain and the run stops.
type sampleRecorder struct {
	// Sized once and never resliced: Check reads them while the runner
	// may still be writing, so only the elements below taken are shared.
	writes, syncs, reads []time.Duration
	n                    int // the runner's own count
	// taken is n, published after each sample, so Check can read the
	// samples so far while a hung op keeps the runner from returning.
	taken atomic.Int64

	threshold time.Duration // 0: never stop early
	allowed   int           // samples over the threshold the p99 can absorb
	over      int
	exceeded  bool
	stop      *atomic.Bool
}

func newSampleRecorder(planned int, threshold time.Duration, stop *atomic.Bool) *sampleRecorder {
	return &sampleRecorder{
		syncs:  make([]time.Duration, planned),
		writes: make([]time.Duration, planned),
		reads:  make([]time.Duration, planned),
		// The p99 is the nearest-rank ceil(0.99·N)th sample (Percentile):
		// it stays under the threshold while at most N - ceil(0.99·N) are over.
		threshold: threshold, allowed: planned - (99*planned+99)/100, stop: stop,
	}
}

func (r *sampleRecorder) judge(d time.Duration) {
	if r.threshold > 0 && d > r.threshold {
		r.over++
		if r.over > r.allowed && !r.exceeded {
			r.exceeded = true
			r.stop.Store(true)
		}
	}
	r.n++
	r.taken.Store(int64(r.n))
}

func (r *sampleRecorder) recordWAL(w, s time.Duration) {
	if r.n < len(r.syncs) {
		r.writes[r.n], r.syncs[r.n] = w, s
		r.judge(s)
	}
}

func (r *sampleRecorder) recordRead(d time.Duration) {
	if r.n < len(r.reads) {
		r.reads[r.n] = d
		r.judge(d)
	}
}

// samples copies the first n samples out, sorted; kind is the probe kind.
func (r *sampleRecorder) samples(kind string, n int) (judged, writes []time.Duration) {
	if kind == config.KindRandRead {
		return sortedCopy(r.reads[:n]), nil
	}
	return sortedCopy(r.syncs[:n]), sortedCopy(r.writes[:n])
}

// inOrder copies the first n judged samples out in the order taken.
func (r *sampleRecorder) inOrder(kind string, n int) []time.Duration {
	if kind == config.KindRandRead {
		return slices.Clone(r.reads[:n])
	}
	return slices.Clone(r.syncs[:n])
}

func sortedCopy(d []time.Duration) []time.Duration {
	c := slices.Clone(d)
	slices.Sort(c)
	return c
}

// Percentile is the nearest-rank percentile of sorted samples, fio's rule.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// The epsilon keeps float error from moving an exact rank up one:
	// 99.9/100 × 10,000 is 9990.000000000002 in float64.
	rank := int(math.Ceil(p/100*float64(len(sorted)) - 1e-6))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Reasons a check ended before its planned samples.
var (
	// ErrTimeout is returned when a check runs past CheckOptions.Timeout.
	ErrTimeout = errors.New("timed out")
	// ErrInterrupted is returned when the context ends first (a signal).
	ErrInterrupted = errors.New("interrupted")
	// ErrUntrusted is returned when nothing was measured because the
	// filesystem is memory (tmpfs, ramfs): there is no disk behind it.
	ErrUntrusted = errors.New("no disk to measure")
)

// Check runs one profile. If ctx ends or the timeout passes first, it stops
// the run between two ops and returns the samples taken with ErrInterrupted
// or ErrTimeout, its probe files removed; an op stuck in the kernel longer
// than the stall threshold is not waited for (the error says so, and which
// file it holds). With several jobs, the result is the worst job's (the
// highest p99), and a job certain to fail stops them all. The timeout and
// progress ticks are timerfds, not Go timers: a pending runtime timer adds
// tens of µs to every blocking syscall (go run ./bench probes-vs-fio).
func Check(ctx context.Context, o CheckOptions) (*CheckResult, error) {
	if o.StallThreshold <= 0 {
		o.StallThreshold = config.DefaultStallThreshold
	}
	// No GC while measuring: a stop-the-world must never wait on a raw
	// syscall, which also holds its P, so keep one more P than jobs for
	// the timeout's goroutine. The paced profile's ops hold no P and run
	// at the daemon's GOMAXPROCS (1), on which the op's cost depends
	// (go run ./bench daemon-vs-fio, its check column).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	switch {
	case o.paced():
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	case runtime.GOMAXPROCS(0) < o.jobs()+1:
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.jobs() + 1))
	}
	stop := new(atomic.Bool)
	jobs := make([]*checkJob, o.jobs())
	done := make(chan *checkJob, len(jobs))
	for i := range jobs {
		j := &checkJob{fl: newInflight(), rec: newSampleRecorder(o.Samples, o.MaxP99, stop), started: make(chan checkStart, 1)}
		jobs[i] = j
		go func() {
			j.res, j.err = runCheck(o, i, j.rec, j.fl, stop, j.started)
			done <- j
		}()
	}
	expired, cancelTimer, err := timerfdTicks(o.Timeout, 0)
	if err != nil {
		stop.Store(true)
		for range jobs {
			<-done
		}
		res, _ := mergeJobs(jobs)
		return res, err
	}
	defer cancelTimer()
	var ticks <-chan struct{}
	var prog *progressMeter
	if o.Progress != nil {
		t, cancelTicks, err := timerfdTicks(time.Second, time.Second)
		if err == nil {
			defer cancelTicks()
			ticks, prog = t, newProgressMeter(o, jobs)
		}
	}
	var cause error
	for running := len(jobs); running > 0 && cause == nil; {
		select {
		case j := <-done:
			j.finished = true
			running--
		case <-ctx.Done():
			cause = ErrInterrupted
		case <-expired:
			cause = ErrTimeout
		case <-ticks:
			o.Progress(prog.read())
		}
	}
	if cause == nil {
		return mergeJobs(jobs)
	}
	stop.Store(true)
	stopped := time.Now()
	// A working disk ends the op in flight within milliseconds; only one
	// in flight past the stall threshold (the daemon's, config) is hung.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		running := 0
		for _, j := range jobs {
			if !j.finished {
				running++
			}
		}
		if running == 0 {
			for _, j := range jobs {
				if errors.Is(j.err, errInterrupted) {
					j.err = fmt.Errorf("%w after %d of %d samples", cause, len(j.res.Latencies), o.Samples)
				}
			}
			return mergeJobs(jobs)
		}
		select {
		case j := <-done:
			j.finished = true
			continue
		case <-tick.C:
		}
		var age time.Duration
		for _, j := range jobs {
			if !j.finished {
				age = max(age, j.fl.age())
			}
		}
		if age <= o.StallThreshold && time.Since(stopped) <= o.StallThreshold {
			continue
		}
		// Give up on the jobs still running: their results are what they
		// recorded, their files named, not removed (leftBehind).
		for _, j := range jobs {
			if j.finished {
				continue
			}
			var st checkStart
			select {
			case st = <-j.started:
			default:
				st.res = &CheckResult{Profile: o.Profile, Path: o.Dir, Planned: o.Samples, Partial: true}
			}
			n := int(j.rec.taken.Load())
			j.res = st.res
			j.res.Latencies, j.res.Writes = j.rec.samples(st.kind, n)
			j.res.Ops = [][]time.Duration{j.rec.inOrder(st.kind, n)}
			j.res.Partial = n < o.Samples
			stuck := fmt.Sprintf("an I/O on %s has been in flight for %v (hung disk?)", o.Dir, j.fl.age().Round(time.Millisecond))
			if j.fl.age() <= o.StallThreshold {
				stuck = fmt.Sprintf("the run did not stop within %v", o.StallThreshold)
			}
			j.err = fmt.Errorf("%w after %d of %d samples: %s%s", cause, n, o.Samples, stuck, st.leftBehind())
			j.finished, j.hung = true, true
		}
	}
}

// checkJob is one writer of a check run. res and err are set by its
// goroutine before it sends on done, or by Check once it gives up on it.
type checkJob struct {
	fl       *inflight
	rec      *sampleRecorder
	started  chan checkStart
	res      *CheckResult
	err      error
	finished bool // Check's own view: done received, or given up on
	hung     bool // given up on: its error names the stuck I/O
}

// mergeJobs is the run's result: one job's as it is, several jobs' as the
// worst one's, with every job's p99 beside it. A job certain to fail
// stopped the others, so their interruption is not the run's error; a
// hung job's error, which names the stuck I/O, outranks the others'.
func mergeJobs(jobs []*checkJob) (*CheckResult, error) {
	if len(jobs) == 1 {
		return jobs[0].res, jobs[0].err
	}
	worst := jobs[0]
	p99s := make([]time.Duration, len(jobs))
	exceeded := false
	for i, j := range jobs {
		p99s[i] = Percentile(j.res.Latencies, 99)
		exceeded = exceeded || j.res.Exceeded
		if (j.res.Exceeded && !worst.res.Exceeded) || (j.res.Exceeded == worst.res.Exceeded && p99s[i] > Percentile(worst.res.Latencies, 99)) {
			worst = j
		}
	}
	res := *worst.res
	res.JobP99s = p99s
	res.Warnings = nil
	res.Ops = nil
	var err error
	for _, j := range jobs {
		res.Ops = append(res.Ops, j.res.Ops...)
		for _, w := range j.res.Warnings {
			if !slices.Contains(res.Warnings, w) {
				res.Warnings = append(res.Warnings, w)
			}
		}
		res.Partial = res.Partial || j.res.Partial
		if res.Untrusted == "" {
			res.Untrusted = j.res.Untrusted
		}
		if j.err != nil && (err == nil || j.hung) && !(exceeded && errors.Is(j.err, errInterrupted)) {
			err = j.err
		}
	}
	return &res, err
}

// progressMeter reads the jobs' recorders for the status line into one
// buffer sized for the whole run (GC is off while check runs).
type progressMeter struct {
	o       CheckOptions
	jobs    []*checkJob
	start   time.Time
	first   time.Time // when the first timed op was seen
	scratch []time.Duration
}

func newProgressMeter(o CheckOptions, jobs []*checkJob) *progressMeter {
	return &progressMeter{o: o, jobs: jobs, start: time.Now(), scratch: make([]time.Duration, 0, len(jobs)*o.Samples)}
}

// read is safe while the jobs run: a recorder's samples below its
// published count are never written again.
func (m *progressMeter) read() CheckProgress {
	p := CheckProgress{Elapsed: time.Since(m.start), Planned: len(m.jobs) * m.o.Samples}
	m.scratch = m.scratch[:0]
	for _, j := range m.jobs {
		n := int(j.rec.taken.Load())
		p.Done += n
		src := j.rec.syncs
		if m.o.Profile == ProfileRandRead {
			src = j.rec.reads
		}
		m.scratch = append(m.scratch, src[:n]...)
		p.LaidOut += j.fl.laidOut.Load()
	}
	if p.Done == 0 {
		if p.LaidOut > 0 {
			p.WorkingSet = m.o.WorkingSet
		}
		return p
	}
	if m.first.IsZero() {
		m.first = time.Now()
	}
	p.LaidOut = 0
	slices.Sort(m.scratch)
	p.P50, p.P99 = Percentile(m.scratch, 50), Percentile(m.scratch, 99)
	if ran := time.Since(m.first); ran > 0 && p.Done > 0 {
		p.ETA = time.Duration(float64(ran) / float64(p.Done) * float64(p.Planned-p.Done))
	}
	return p
}

// checkStart is a run's result before its first timed op, and its probe
// file.
type checkStart struct {
	res  *CheckResult
	kind string
	file string // the probe file's path, removed at the end; "" when kept
}

// leftBehind names the probe file a hung op still holds. Not unlinked
// here: the unlink would wait on the hung op too (FUSE holds the inode lock
// through fsync) while holding the directory's, so listing the directory
// would hang for everyone until the disk answers.
func (st checkStart) leftBehind() string {
	if st.file == "" {
		return ""
	}
	return fmt.Sprintf("; %s is left behind while that I/O is stuck: remove it once the disk answers", st.file)
}

// timerfdTicks returns a channel that receives after d and then every
// `every` (once, if every is 0; never, if d <= 0), backed by a kernel
// timerfd so no Go runtime timer is pending meanwhile. A tick nobody has
// taken yet is not doubled.
func timerfdTicks(d, every time.Duration) (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	if d <= 0 {
		return ch, func() {}, nil
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("timerfd: %w", err)
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds()), Interval: unix.NsecToTimespec(every.Nanoseconds())}
	if err := unix.TimerfdSettime(fd, 0, &spec, nil); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("timerfd: %w", err)
	}
	// The reader closes the fd when it is done; mu keeps cancel from
	// touching an fd number that was closed (and maybe reused) by then.
	var mu sync.Mutex
	closed, cancelled := false, false
	go func() {
		var b [8]byte
		for {
			_, err := unix.Read(fd, b[:])
			mu.Lock()
			if err != nil || cancelled || every <= 0 {
				if err == nil && !cancelled {
					ch <- struct{}{}
				}
				unix.Close(fd)
				closed = true
				mu.Unlock()
				return
			}
			mu.Unlock()
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	cancel := func() {
		mu.Lock()
		defer mu.Unlock()
		cancelled = true
		if !closed {
			// Fire it now so the reader returns and closes the fd.
			_ = unix.TimerfdSettime(fd, 0, &unix.ItimerSpec{Value: unix.Timespec{Nsec: 1}}, nil)
		}
	}
	return ch, cancel, nil
}

// checkSite is a check run's target, opened: the site, the kind's prober,
// and what is known before the first op.
type checkSite struct {
	res *CheckResult
	c   config.Probe
	s   *site
	k   prober
	// remove is the probe file's path, for leftBehind; "" when kept.
	remove string
	// dropReadset: the randread working set is removed at close.
	dropReadset bool
}

// close removes the working set unless it is kept, and closes the prober
// and the site.
func (cs *checkSite) close() {
	if cs.dropReadset {
		_ = cs.s.dir.remove(cs.k.(*readProbe).file)
	}
	cs.k.close()
	cs.s.close()
}

// openCheckSite opens job's probe directory and prober as check runs them
// (the randread profile's also serves the capacity sweep). A filesystem
// that does not tell the truth is refused when it is memory, and so is a
// refused O_DIRECT, unless o.AllowUnsafeFS; otherwise res says why its
// latencies are not a disk's. On error res is still set (what is known).
func openCheckSite(o CheckOptions, job int) (*checkSite, *CheckResult, error) {
	res := &CheckResult{Profile: o.Profile, Path: o.Dir, Planned: o.Samples}
	c, err := o.probeConfig(job)
	if err != nil {
		return nil, res, err
	}
	log := o.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var s *site
	if o.device != "" {
		res.Path = o.device
		s, err = openDeviceSite(o.device, int64(c.BlockSize), o.Paths.Proc(), o.Paths.Sys(), log)
	} else {
		s, err = openDirSite(o.Dir, o.Paths.Proc(), o.Paths.Sys(), log)
	}
	if err != nil {
		return nil, res, err
	}
	res.Device, res.Filesystem = s.backing.Device, s.backing.FSType
	if s.backing.Path != "" {
		res.Path = s.backing.Path
	}
	if w, why := s.untrusted(); w != "" {
		res.Untrusted = fmt.Sprintf("%s: this filesystem does not tell the truth about a disk", why)
		res.Warnings = append(res.Warnings, res.Untrusted)
		// Memory has no latency to fail on either: without the opt-in,
		// the answer is known before the first op.
		if w == "tmpfs" && !o.AllowUnsafeFS {
			s.close()
			return nil, res, fmt.Errorf("%s is %s (memory): %w (--allow-unsafe-fs to run it anyway)", o.Dir, why, ErrUntrusted)
		}
	}
	file := filePrefix + c.Name + "-" + fileSuffix(c)
	cs := &checkSite{res: res, c: c, s: s, k: kinds[c.Kind](c, file)}
	if s.dir != nil {
		cs.remove = filepath.Join(s.dir.path, file)
	}
	if err := cs.k.open(s); err != nil {
		cs.k.close()
		s.close()
		return nil, res, err
	}
	if c.Kind == config.KindWAL {
		res.Gap = c.Gap
	}
	if r, ok := cs.k.(*readProbe); ok {
		if r.odirectRefused {
			if !o.AllowUnsafeFS {
				cs.k.close()
				s.close()
				return nil, res, fmt.Errorf("%s: %w (--allow-unsafe-fs to time page-cache reads anyway)", o.Dir, errNoODirect)
			}
			r.buffered = true
			res.Untrusted = "O_DIRECT refused: the reads come from the page cache, not the disk"
			res.Warnings = append(res.Warnings, res.Untrusted)
		}
		switch {
		case r.device != "":
		case o.KeepWorkingSet:
			res.WorkingSetFile, cs.remove = cs.remove, ""
		default:
			cs.dropReadset = true
		}
	}
	return cs, res, nil
}

// runCheck is job number job of a run (its own probe file).
func runCheck(o CheckOptions, job int, rec *sampleRecorder, fl *inflight, stop *atomic.Bool, started chan<- checkStart) (*CheckResult, error) {
	// On one OS thread, as a daemon probe's loop is (probe.go).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cs, res, err := openCheckSite(o, job)
	if err != nil {
		return res, err
	}
	defer cs.close()
	c, k := cs.c, cs.k
	st := *res
	st.Warnings = slices.Clone(res.Warnings)
	started <- checkStart{res: &st, kind: c.Kind, file: cs.remove}
	if _, err := k.prepare(fl, stop); err != nil {
		res.Partial = true
		return res, err
	}
	// The paced etcd profile makes its ops as the daemon does, etcd's way;
	// the back-to-back recipe and the reads run raw, as fio does
	// (timedio.go).
	out, err := k.burst(&runner{rec: rec, fl: fl, stop: stop, raw: !o.paced()}, c.Ops)
	n := int(rec.taken.Load())
	res.Latencies, res.Writes = rec.samples(c.Kind, n)
	res.Ops = [][]time.Duration{rec.inOrder(c.Kind, n)}
	res.Partial = len(res.Latencies) < o.Samples
	if rec.exceeded {
		res.Exceeded = true
		return res, nil
	}
	if err != nil {
		return res, err
	}
	if out.flushLies {
		lie := "fdatasync p50 < 10µs and no flush reached a device: the flush is not reaching a disk (cache, tmpfs or a lying write cache)"
		res.Warnings = append(res.Warnings, lie)
		if res.Untrusted == "" {
			res.Untrusted = lie
		}
	}
	return res, nil
}
