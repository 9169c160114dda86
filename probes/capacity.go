package probes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
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

// ProfileCapacity is check's latency-bounded capacity sweep: one pattern of
// I/O offered open-loop at rising rates until the p99 leaves its bound.
const ProfileCapacity = "capacity"

// The capacity sweep's patterns (config owns the names: a capacity probe
// names its pattern in the config file).
const (
	CapacityRandRead  = config.CapacityRandRead
	CapacityRandWrite = config.CapacityRandWrite
	CapacityWAL       = config.CapacityWAL
)

// CapacityPatterns are the patterns, the default first.
var CapacityPatterns = config.CapacityPatterns

// CapacityConcurrency is how many ops of a pattern may be outstanding: one
// for the WAL, which has one writer whose fdatasyncs serialise (an append
// due while the previous one runs waits, and its latency shows it).
func CapacityConcurrency(pattern string) int {
	if pattern == CapacityWAL {
		return 1
	}
	return DefaultCapacityConcurrency
}

// CapacityBytesPerOp is the most one op of a pattern writes to the disk,
// for the write budget: a random write its block; a WAL append the pages
// it dirties (at most one more than its size fills) and the journal an
// fdatasync commits (as the daemon's budget counts it); a read nothing.
func CapacityBytesPerOp(pattern string, bs int64) int64 {
	switch pattern {
	case CapacityRandWrite:
		return bs
	case CapacityWAL:
		return ((bs+pageSize-1)/pageSize+1)*pageSize + journalPerSync
	}
	return 0
}

// StepOps is how many ops a step at rate schedules with the default step
// size.
func StepOps(rate float64) int { return stepOps(rate, CapacityMinStepOps, CapacityMinStepTime) }

// The sweep's defaults.
const (
	// DefaultCapacityConcurrency bounds the reads outstanding at once: a
	// queue deep enough for an SSD's parallelism, and a cap on what the
	// sweep can pile onto a struggling disk.
	DefaultCapacityConcurrency = 32
	// CapacityMinStepOps and CapacityMinStepTime size a step: a p99 needs
	// 1,000 samples behind it (docs/contract.md, measurement rule 1), and a
	// step of at least a second spans several of a throttle's slices.
	CapacityMinStepOps  = 1000
	CapacityMinStepTime = time.Second
	// MaxCapacityRate bounds --rates and a probe's rates.
	MaxCapacityRate = config.MaxCapacityRate
	// capacityHeld: a step whose achieved rate is under 90 % of the asked
	// one did not carry its load.
	capacityHeld = 0.9
	// capacityGrace: a step stops issuing reads 25 % past its planned
	// length; the reads it never issued count as late (missed).
	capacityGrace = 1.25
)

// DefaultCapacityRates is the sweep's rate list: the R10 preferred numbers
// (×1.25 a step, ten a decade) from 100 to 1,000,000 IOPS, so the bound is
// known within 25 %.
var DefaultCapacityRates = func() []float64 {
	r10 := []float64{1, 1.25, 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8}
	var rates []float64
	for decade := 100.0; decade < MaxCapacityRate; decade *= 10 {
		for _, m := range r10 {
			rates = append(rates, m*decade)
		}
	}
	return append(rates, MaxCapacityRate)
}()

// CapacityOptions configure a capacity sweep.
type CapacityOptions struct {
	Dir string
	// Pattern is one of CapacityPatterns; "" is randread.
	Pattern    string
	BlockSize  int64
	WorkingSet int64
	MinFree    int64
	// WriteBudget bounds the bytes a writing pattern's steps may write
	// (CapacityBytesPerOp each): a step that could take the sweep past it
	// is not started, and the sweep ends there. 0 = no bound.
	WriteBudget int64
	// Rates are the IOPS asked of each step, rising.
	Rates  []float64
	MaxP99 time.Duration
	// Concurrency bounds the reads outstanding; 0 is the default.
	Concurrency int
	// MinStepOps and MinStepTime size each step; 0 are the defaults.
	MinStepOps  int
	MinStepTime time.Duration
	// Timeout ends the sweep after this long, the steps done kept; 0 = never.
	Timeout        time.Duration
	AllowUnsafeFS  bool
	StallThreshold time.Duration
	// KeepWorkingSet leaves the working set in Dir for the next run.
	KeepWorkingSet bool
	// Step, when set, is called after each step, and LayOut about once a
	// second while the working set is written, from the goroutine that
	// waits on the sweep.
	Step   func(CapacityStep)
	LayOut func(CheckProgress)
	Paths  hostpath.Paths

	// The daemon's capacity probe (capacityprobe.go): name and log as
	// CheckOptions'; hold, when set, is called with the device's gate key
	// once the site is open and before its first write, and the sweep
	// runs until the release it returns is called.
	name string
	log  *slog.Logger
	hold func(gateKey uint64) (release func(), err error)
}

// CapacityStep is one rate of the sweep. Latencies are measured from each
// read's scheduled start, not from when it was issued: a read that waits
// for a free worker, or for its worker's wake-up, carries that wait
// (coordinated omission); ServiceP50 and ServiceP99 are the syscalls alone.
type CapacityStep struct {
	AskedIOPS, AchievedIOPS float64
	// Ops were scheduled; Missed of them were never issued before the step
	// gave up (their latency counts as the wait until then, a lower bound).
	Ops, Missed   int
	Duration      time.Duration
	P50, P90, P99 time.Duration
	P999, Max     time.Duration
	// ServiceP50 and ServiceP99 are of the syscalls alone.
	ServiceP50, ServiceP99 time.Duration
	// PoolFull: some read waited for one of the Concurrency slots.
	PoolFull bool
	// OverBound: the p99 was over MaxP99; Short: the achieved rate was
	// under 90 % of the asked one. Either ends the sweep.
	OverBound, Short bool
}

// Held is whether the step stayed within the bound at its rate.
func (s CapacityStep) Held() bool { return !s.OverBound && !s.Short }

// CapacityResult is a sweep's outcome; Capacity returns one even with an
// error, with the steps done.
type CapacityResult struct {
	Path, Device, Filesystem string
	Pattern                  string
	BlockSize                int64
	Concurrency              int
	Steps                    []CapacityStep
	// Written is what the steps wrote, as the write budget counts it.
	Written int64
	// BudgetEnded: the next step could have passed the write budget, so
	// the sweep ended before a step broke the bound.
	BudgetEnded bool
	// Knee is the index of the last step that held before the first that
	// did not, -1 when the first did not.
	Knee int
	// Partial: the sweep stopped before a step broke the bound or the
	// rates ran out (a signal, --timeout, an error).
	Partial   bool
	Warnings  []string
	Untrusted string
	// WorkingSetFile is the working set, if kept.
	WorkingSetFile string
	// LeftBehind names the working set when a hung read keeps it.
	LeftBehind string
}

// kneeOf is the last step that held before the first that did not.
func kneeOf(steps []CapacityStep) int {
	for i, s := range steps {
		if !s.Held() {
			return i - 1
		}
	}
	return len(steps) - 1
}

// stepOps is how many reads a step at rate schedules: at least minOps and
// at least minTime's worth.
func stepOps(rate float64, minOps int, minTime time.Duration) int {
	return max(minOps, int(math.Ceil(rate*minTime.Seconds())))
}

// capacityOp does one read on worker w's own buffer and returns its
// service time.
type capacityOp func(w int) (time.Duration, error)

// sweeper runs the steps open-loop on pool workers: a free worker claims
// the next op, sleeps until it is due and issues it, so an op costs one
// wake-up of its own thread, not a dispatcher's and a hand-off too (on 2
// busy CPUs those wake-ups capped the sweep below what the disk took:
// go run ./bench capacity-vs-fio).
type sweeper struct {
	rates   []float64
	maxP99  time.Duration
	pool    int
	minOps  int
	minTime time.Duration
	op      capacityOp
	// before, when set, runs before each step with its op count, between
	// steps; errBudgetEnds from it ends the sweep there, without error.
	before      func(n int) error
	budgetEnded bool
	quit        chan struct{}   // closed to stop between reads
	lat, svc    []time.Duration // one step's samples, sized for the largest
	issued      []bool
	steps       []chan *stepRun // one a worker
	errMu       sync.Mutex
	err         error
	stopped     atomic.Bool
}

// stepRun is one step as its workers share it.
type stepRun struct {
	n               int
	start, deadline int64 // nanotime
	period          float64
	next            atomic.Int64 // the next op to claim
	gaveUp          atomic.Int64 // when a worker first found the deadline passed
	poolFull        atomic.Bool
	done            sync.WaitGroup
}

// due is when op i of the step is due.
func (sr *stepRun) due(i int) int64 { return sr.start + int64(float64(i)*sr.period) }

func newSweeper(rates []float64, maxP99 time.Duration, pool, minOps int, minTime time.Duration, op capacityOp) *sweeper {
	most := 0
	for _, r := range rates {
		most = max(most, stepOps(r, minOps, minTime))
	}
	return &sweeper{rates: rates, maxP99: maxP99, pool: pool, minOps: minOps, minTime: minTime, op: op,
		quit: make(chan struct{}), lat: make([]time.Duration, most), svc: make([]time.Duration, most), issued: make([]bool, most)}
}

// sweepHeadroom is how far the process's memory may grow during a sweep,
// whose GC is off, before the runtime collects anyway.
const sweepHeadroom = 256 << 20

// maxSleepSlice bounds one wait of a worker for its op.
const maxSleepSlice = 100 * time.Millisecond

// errBudgetEnds is a sweeper's before saying the write budget ends the
// sweep before the next step.
var errBudgetEnds = errors.New("the write budget ends the sweep")

// run sweeps the rates until a step does not hold, calling done after each
// step; it returns the steps done and why it stopped early (nil when a
// step broke the bound or the rates ran out).
func (w *sweeper) run(done func(CapacityStep)) ([]CapacityStep, error) {
	fds := make([]int, 0, w.pool)
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for range w.pool {
		fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC)
		if err != nil {
			return nil, fmt.Errorf("timerfd: %w", err)
		}
		fds = append(fds, fd)
	}
	var workers sync.WaitGroup
	w.steps = make([]chan *stepRun, w.pool)
	for i := range w.pool {
		w.steps[i] = make(chan *stepRun)
		workers.Add(1)
		go func() {
			defer workers.Done()
			w.worker(i, fds[i])
		}()
	}
	defer func() {
		for _, c := range w.steps {
			close(c)
		}
		workers.Wait()
	}()
	var steps []CapacityStep
	for _, rate := range w.rates {
		if w.before != nil {
			err := w.before(stepOps(rate, w.minOps, w.minTime))
			if errors.Is(err, errBudgetEnds) {
				w.budgetEnded = true
				return steps, nil
			}
			if err != nil {
				return steps, err
			}
		}
		st, complete := w.step(rate)
		if err := w.failed(); err != nil {
			return steps, err
		}
		if !complete {
			return steps, errInterrupted
		}
		steps = append(steps, st)
		done(st)
		if !st.Held() {
			break
		}
	}
	return steps, nil
}

// worker claims the ops of each step in turn until none is left, the
// step's deadline has passed or the sweep is stopped. An op already due
// when claimed waited for a worker: every one was busy (PoolFull).
func (w *sweeper) worker(id, timerfd int) {
	for sr := range w.steps[id] {
		w.claim(sr, id, timerfd)
		sr.done.Done()
	}
}

func (w *sweeper) claim(sr *stepRun, id, timerfd int) {
	for !w.stopped.Load() {
		i := int(sr.next.Add(1) - 1)
		if i >= sr.n {
			return
		}
		due, now := sr.due(i), nanotime()
		if now > sr.deadline {
			sr.gaveUp.CompareAndSwap(0, now)
			return
		}
		if now > due {
			sr.poolFull.Store(true)
		} else if w.sleepUntil(timerfd, due); w.stopped.Load() {
			return
		}
		svc, err := w.op(id)
		w.lat[i] = time.Duration(nanotime() - due)
		w.svc[i] = svc
		w.issued[i] = true
		if err != nil {
			w.fail(err)
			return
		}
	}
}

func (w *sweeper) fail(err error) {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	if w.err == nil {
		w.err = err
		w.stop()
	}
}

func (w *sweeper) failed() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

// stop ends the sweep between reads (once).
func (w *sweeper) stop() {
	if w.stopped.CompareAndSwap(false, true) {
		close(w.quit)
	}
}

// step offers n reads at rate: read i is due at start + i/rate whatever
// became of the ones before it, and its latency runs from then. complete
// is false when the sweep was stopped during the step.
func (w *sweeper) step(rate float64) (st CapacityStep, complete bool) {
	n := stepOps(rate, w.minOps, w.minTime)
	st = CapacityStep{AskedIOPS: rate, Ops: n}
	sr := &stepRun{n: n, period: 1e9 / rate}
	planned := float64(n) * sr.period
	sr.start = nanotime() + int64(time.Millisecond)
	sr.deadline = sr.start + int64(planned*capacityGrace)
	clear(w.issued[:n])
	sr.done.Add(w.pool)
	for _, c := range w.steps {
		c <- sr
	}
	sr.done.Wait()
	select {
	case <-w.quit:
		return st, false
	default:
	}
	end := nanotime()
	gaveUp := sr.gaveUp.Load()
	if gaveUp == 0 {
		gaveUp = end
	}
	// Reads never issued count with the wait until the step gave up;
	// the service times of those issued go first, for their percentiles.
	issued := 0
	for i := range n {
		if !w.issued[i] {
			w.lat[i] = time.Duration(gaveUp - sr.due(i))
			continue
		}
		w.svc[issued] = w.svc[i]
		issued++
	}
	span := max(end-sr.start, int64(planned))
	st.PoolFull = sr.poolFull.Load()
	st.Missed = n - issued
	st.Duration = time.Duration(span)
	st.AchievedIOPS = float64(issued) / (float64(span) / 1e9)
	lat, svc := w.lat[:n], w.svc[:issued]
	slices.Sort(lat)
	slices.Sort(svc)
	st.P50, st.P90, st.P99, st.P999, st.Max = Percentile(lat, 50), Percentile(lat, 90), Percentile(lat, 99), Percentile(lat, 99.9), lat[n-1]
	st.ServiceP50, st.ServiceP99 = Percentile(svc, 50), Percentile(svc, 99)
	st.OverBound = st.P99 > w.maxP99
	st.Short = st.AchievedIOPS < capacityHeld*rate
	return st, true
}

// sleepUntil sleeps on the timerfd until the monotonic clock reads t
// (nanotime's clock), or the sweep is stopped (it looks every
// maxSleepSlice, so a stop at a low rate is not a period late); a wait
// under 50µs is spun with yields instead, as a timer's slack would be
// longer than the wait.
func (w *sweeper) sleepUntil(timerfd int, t int64) {
	for !w.stopped.Load() {
		d := t - nanotime()
		switch {
		case d <= 0:
			return
		case d < 50_000:
			runtime.Gosched()
			continue
		}
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(min(t, nanotime()+int64(maxSleepSlice)))}
		if unix.TimerfdSettime(timerfd, unix.TFD_TIMER_ABSTIME, &spec, nil) != nil {
			time.Sleep(min(time.Duration(d), maxSleepSlice))
			continue
		}
		var b [8]byte
		_, _ = unix.Read(timerfd, b[:])
	}
}

// Capacity runs the latency-bounded capacity sweep in o.Dir: 4 KiB O_DIRECT
// random reads over the randread profile's working set (laid out as check's
// randread and the daemon's read probe do, read as the daemon's), offered open-loop at
// each of o.Rates until a step's p99 leaves o.MaxP99 or its achieved rate
// falls short. A signal or the timeout stops it between reads; the steps
// done are kept and the working set removed, unless a read is hung (then
// LeftBehind names it, as check does).
func Capacity(ctx context.Context, o CapacityOptions) (*CapacityResult, error) {
	if o.StallThreshold <= 0 {
		o.StallThreshold = config.DefaultStallThreshold
	}
	pool := o.Concurrency
	if pool <= 0 {
		pool = DefaultCapacityConcurrency
	}
	minOps, minTime := o.MinStepOps, o.MinStepTime
	if minOps <= 0 {
		minOps = CapacityMinStepOps
	}
	if minTime <= 0 {
		minTime = CapacityMinStepTime
	}
	if o.Pattern == "" {
		o.Pattern = CapacityRandRead
	}
	if o.Pattern == CapacityWAL {
		pool = 1 // one writer, its appends in order
	}
	res := &CapacityResult{Path: o.Dir, Pattern: o.Pattern, Concurrency: pool, Knee: -1}
	co := CheckOptions{Dir: o.Dir, Profile: ProfileRandRead, Samples: 1, BlockSize: o.BlockSize,
		WorkingSet: o.WorkingSet, KeepWorkingSet: o.KeepWorkingSet, MinFree: o.MinFree, AllowUnsafeFS: o.AllowUnsafeFS, Paths: o.Paths,
		name: o.name, log: o.log}
	switch o.Pattern {
	case CapacityRandRead, CapacityRandWrite:
	case CapacityWAL:
		// fio-etcd: the WAL probe's appends with no gap, the sweep's
		// schedule being the only pacing.
		co.Profile, co.WorkingSet, co.KeepWorkingSet = ProfileFioEtcd, 0, false
	default:
		return res, fmt.Errorf("unknown capacity pattern %q (randread, randwrite, wal)", o.Pattern)
	}
	cs, cr, err := openCheckSite(co, 0)
	res.Path, res.Device, res.Filesystem = cr.Path, cr.Device, cr.Filesystem
	res.Warnings, res.Untrusted, res.WorkingSetFile = cr.Warnings, cr.Untrusted, cr.WorkingSetFile
	if err != nil {
		return res, err
	}
	res.BlockSize = int64(cs.c.BlockSize)
	closeSite := true
	release := func() {}
	defer func() {
		if closeSite {
			cs.close()
		}
		release() // after the files are removed: that is I/O too
	}()
	if o.hold != nil {
		if release, err = o.hold(cs.s.gateKey); err != nil {
			release = func() {}
			return res, err
		}
	}
	// No GC while measuring, and a P for each worker, the sweep's own
	// goroutine and this one, so an op that returns never waits for one.
	// The ops enter syscall state as the daemon's do (timedio.go), not raw
	// as check's randread: a raw op holds its P, and a hung one would then
	// hang the stop-the-world that restoring GOMAXPROCS needs.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), pool+2)))
	// With the GC off, a memory limit is what still collects: in the
	// daemon, scrapes and collectors go on allocating during a sweep, so
	// the heap may grow by sweepHeadroom and no more.
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(min(debug.SetMemoryLimit(-1), int64(ms.Sys)+sweepHeadroom)))

	fls := make([]*inflight, pool)
	for i := range fls {
		fls[i] = newInflight()
	}
	stop := new(atomic.Bool)
	var sw *sweeper
	type outcome struct {
		steps       []CapacityStep
		err         error
		budgetEnded bool
	}
	var written atomic.Int64
	perOp := CapacityBytesPerOp(o.Pattern, res.BlockSize)
	// before keeps the sweep within the write budget: a step that could
	// take it past is not started.
	before := func(n int) error {
		if o.WriteBudget > 0 && written.Load()+int64(n)*perOp > o.WriteBudget {
			return errBudgetEnds
		}
		return nil
	}
	done := make(chan outcome, 1)
	stepDone := make(chan CapacityStep, len(o.Rates))
	started := make(chan *sweeper, 1)
	var walFlushes func() (noFlush bool)
	go func() {
		var op capacityOp
		var err error // this goroutine's own
		switch o.Pattern {
		case CapacityRandRead, CapacityRandWrite:
			r := cs.k.(*readProbe)
			if _, err := r.prepare(fls[0], stop); err != nil {
				done <- outcome{err: err}
				return
			}
			var free func()
			if o.Pattern == CapacityRandRead {
				op, free, err = readOps(r, fls)
			} else {
				op, free, err = writeOps(r, fls, &written)
			}
			if err != nil {
				done <- outcome{err: err}
				return
			}
			defer free()
		case CapacityWAL:
			w := cs.k.(*walProbe)
			if _, err := w.prepare(fls[0], stop); err != nil {
				done <- outcome{err: err}
				return
			}
			var walBefore func(int) error
			op, walBefore, walFlushes = walOps(w, fls[0], &written)
			budget := before
			before = func(n int) error {
				if err := budget(n); err != nil {
					return err
				}
				return walBefore(n)
			}
		}
		s := newSweeper(o.Rates, o.MaxP99, pool, minOps, minTime, op)
		s.before = before
		started <- s
		if stop.Load() {
			s.stop()
		}
		steps, err := s.run(func(st CapacityStep) { stepDone <- st })
		done <- outcome{steps, err, s.budgetEnded}
	}()
	expired, cancelTimer, err := timerfdTicks(o.Timeout, 0)
	if err != nil {
		return res, err
	}
	defer cancelTimer()
	var cause error
	halt := func(c error) {
		cause = c
		stop.Store(true)
		select {
		case sw = <-started:
		default:
		}
		if sw != nil {
			sw.stop()
		}
	}
	var layout <-chan struct{}
	if o.LayOut != nil {
		t, cancel, err := timerfdTicks(time.Second, time.Second)
		if err == nil {
			defer cancel()
			layout = t
		}
	}
	began := time.Now()
	var stopped time.Time
	var tick <-chan time.Time
	for {
		select {
		case <-layout:
			if n := fls[0].laidOut.Load(); sw == nil && n > 0 {
				o.LayOut(CheckProgress{Elapsed: time.Since(began), LaidOut: n, WorkingSet: o.WorkingSet})
			}
			continue
		case st := <-stepDone:
			res.Steps = append(res.Steps, st)
			if o.Step != nil {
				o.Step(st)
			}
			continue
		case out := <-done:
			// Steps reported before the sweep ended are all in stepDone.
			for len(stepDone) > 0 {
				st := <-stepDone
				res.Steps = append(res.Steps, st)
				if o.Step != nil {
					o.Step(st)
				}
			}
			res.Knee = kneeOf(res.Steps)
			res.Written, res.BudgetEnded = written.Load(), out.budgetEnded
			err := out.err
			if cause != nil {
				err = fmt.Errorf("%w after %s", cause, stepsDone(len(res.Steps)))
			}
			res.Partial = err != nil
			if err == nil && walFlushes != nil {
				walFlushCheck(res, walFlushes)
			}
			return res, err
		case s := <-started:
			sw, layout = s, nil
			if cause != nil {
				sw.stop()
			}
			continue
		case <-ctx.Done():
			halt(ErrInterrupted)
		case <-expired:
			halt(ErrTimeout)
		case <-tick:
		}
		if cause == nil {
			continue
		}
		if stopped.IsZero() {
			stopped = time.Now()
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			tick = t.C
			expired, ctx = nil, context.Background()
		}
		// A working disk ends the reads in flight within milliseconds;
		// one in flight past the stall threshold is hung: give up on it
		// and leave the working set, which it holds, behind (leftBehind).
		var age time.Duration
		for _, fl := range fls {
			age = max(age, fl.age())
		}
		if age > o.StallThreshold || time.Since(stopped) > o.StallThreshold {
			closeSite = false
			res.Knee, res.Partial = kneeOf(res.Steps), true
			res.Written = written.Load()
			res.LeftBehind = cs.remove
			stuck := fmt.Sprintf("%s on %s has been in flight for %v (hung disk?)", opNoun(o.Pattern), o.Dir, age.Round(time.Millisecond))
			if age <= o.StallThreshold {
				stuck = fmt.Sprintf("the sweep did not stop within %v", o.StallThreshold)
			}
			return res, fmt.Errorf("%w after %s: %s%s", cause, stepsDone(len(res.Steps)), stuck, checkStart{file: cs.remove}.leftBehind())
		}
	}
}

// stepsDone counts the steps a stopped sweep kept.
func stepsDone(n int) string {
	if n == 1 {
		return "1 step"
	}
	return fmt.Sprintf("%d steps", n)
}

// readOps gives each worker its own aligned buffer, offset picker and
// in-flight mark over r's file, and returns the op and what frees them.
func readOps(r *readProbe, fls []*inflight) (capacityOp, func(), error) {
	bufs := make([][]byte, len(fls))
	pickers := make([]*blockPicker, len(fls))
	times := make([][2]int64, len(fls)) // offset, duration
	free := func() {
		for _, b := range bufs {
			freeBuffer(b)
		}
	}
	for i := range bufs {
		b, err := alignedBuffer(int(r.bs))
		if err != nil {
			free()
			return nil, nil, err
		}
		bufs[i] = b
		pickers[i] = newBlockPicker(r.picker.lo, r.picker.hi)
	}
	where := r.s.where()
	op := func(w int) (time.Duration, error) {
		t := &times[w]
		t[0] = pickers[w].next() * r.bs
		done, short, errno := timedPreads(fls[w], false, nil, r.fd, bufs[w], t[0:1], t[1:2])
		switch {
		case errno != 0:
			return 0, &opError{"read", where, errno}
		case short || done != 1:
			return 0, &opError{"read", where, errShortIO}
		}
		return time.Duration(t[1]), nil
	}
	return op, free, nil
}

// opNoun names one op of a pattern.
func opNoun(pattern string) string {
	switch pattern {
	case CapacityRandWrite:
		return "a write"
	case CapacityWAL:
		return "an append"
	}
	return "a read"
}

// writeOps opens r's working set for O_DIRECT writes (O_DSYNC where
// O_DIRECT was refused and the page cache accepted) and gives each worker
// its own buffer of random data and offset picker; each write counts its
// bytes in written. It returns the op and what frees them.
func writeOps(r *readProbe, fls []*inflight, written *atomic.Int64) (capacityOp, func(), error) {
	flags := unix.O_WRONLY | unix.O_DIRECT
	if r.buffered {
		flags = unix.O_WRONLY | unix.O_DSYNC
	}
	fd, err := r.s.dir.open(r.file, flags)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return nil, nil, fmt.Errorf("%s: %w", r.s.dir.path, errNoODirect)
		}
		return nil, nil, err
	}
	bufs := make([][]byte, len(fls))
	pickers := make([]*blockPicker, len(fls))
	free := func() {
		for _, b := range bufs {
			freeBuffer(b)
		}
		unix.Close(fd)
	}
	for i := range bufs {
		b, err := alignedBuffer(int(r.bs))
		if err != nil {
			free()
			return nil, nil, err
		}
		// Random, as the working set's own data: a device that
		// short-cuts zeros or compresses gets no easier writes.
		fillRandom(b)
		bufs[i] = b
		pickers[i] = newBlockPicker(r.picker.lo, r.picker.hi)
	}
	where := r.s.where()
	op := func(w int) (time.Duration, error) {
		d, n, errno := timedPwrite(fls[w], false, fd, bufs[w], pickers[w].next()*r.bs)
		if n > 0 {
			written.Add(int64(n))
		}
		switch {
		case errno != 0:
			return 0, &opError{"write", where, errno}
		case n != len(bufs[w]):
			return 0, &opError{"write", where, errShortIO}
		}
		return time.Duration(d), nil
	}
	return op, free, nil
}

// walOps is the WAL pattern's op (one append and its fdatasync, at the
// segment's next offset: one worker), the hook that cuts a new segment
// between steps when the next step's appends would not fit (as etcd cuts
// one when its segment is full, but never inside a step, where it would
// add a spike the device did not cause), and the device's flush count
// before and after, for the check that a flush reaches a device.
func walOps(w *walProbe, fl *inflight, written *atomic.Int64) (capacityOp, func(int) error, func() (noFlush bool)) {
	flushesBefore, known := w.deviceFlushes()
	op := func(int) (time.Duration, error) {
		r := timedWALOp(fl, false, w.fd, w.buf, w.off, 0)
		written.Add(pagesDirtied(w.off, int64(r.wrote)) + journalPerSync)
		if r.err != nil {
			return 0, &opError{r.stage, w.path(), r.err}
		}
		w.off += w.bs
		return r.write + r.fdatasync, nil
	}
	before := func(n int) error {
		if need := int64(n) * w.bs; w.off+need > w.segment {
			w.segment = max(config.DefaultSegmentSize, need)
			return w.cutSegment()
		}
		return nil
	}
	noFlush := func() bool {
		after, _ := w.deviceFlushes()
		return w.s.backing.Device == "" || known && after == flushesBefore
	}
	return op, before, noFlush
}

// walFlushCheck marks a WAL sweep untrusted when its flushes reached no
// device: the first step's service p50 (the append's pwrite and fdatasync)
// under 10 µs while the device counted no flush, or there is no device, as
// the WAL probe's check (flushLies) says.
func walFlushCheck(res *CapacityResult, noFlush func() bool) {
	if len(res.Steps) == 0 {
		return
	}
	if res.Steps[0].ServiceP50 < 10*time.Microsecond && noFlush() {
		lie := "fdatasync p50 < 10µs and no flush reached a device: the flush is not reaching a disk (cache, tmpfs or a lying write cache)"
		res.Warnings = append(res.Warnings, lie)
		if res.Untrusted == "" {
			res.Untrusted = lie
		}
	}
}
