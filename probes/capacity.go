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
	// Device, when set, is a block device the randread pattern reads in
	// place of Dir's working set: opened read-only, the whole device.
	Device string
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
// op's scheduled start, not from when it was issued: an op that waits for
// a free slot, or for the sweep's own turn, carries that wait (coordinated
// omission); ServiceP50 and ServiceP99 are from its submission.
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
	// OnDevice: the sweep read a block device in place (Options.Device).
	OnDevice bool
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

// opEngine carries a sweep's ops to the disk: begin starts op i in a free
// slot (depth of them; busy are taken), flush hands the ops begun since
// the last flush to the kernel (those it could not are dropped, their
// slots freed), and wait returns once an op has ended or the monotonic clock
// reads until (noDeadline: only once an op has ended), calling end for
// each op that ended; the first failed op's error is returned after its
// end is counted. close frees what the engine holds, with nothing in
// flight.
type opEngine interface {
	depth() int
	busy() int
	begin(i int)
	flush() error
	wait(until int64, end func(i int, at int64, svc time.Duration)) error
	close()
}

// noDeadline is a wait with no time limit.
const noDeadline = math.MaxInt64

// sweeper runs the steps open-loop from one goroutine: each turn it
// begins every op due while a slot is free, submits them in one batch,
// and waits for an end or for the next op's due time.
type sweeper struct {
	rates   []float64
	maxP99  time.Duration
	minOps  int
	minTime time.Duration
	ops     opEngine
	// before, when set, runs before each step with its op count, between
	// steps; errBudgetEnds from it ends the sweep there, without error.
	before      func(n int) error
	budgetEnded bool
	lat, svc    []time.Duration // one step's samples, sized for the largest
	issued      []bool
	stopped     atomic.Bool
}

func newSweeper(rates []float64, maxP99 time.Duration, minOps int, minTime time.Duration, ops opEngine) *sweeper {
	most := 0
	for _, r := range rates {
		most = max(most, stepOps(r, minOps, minTime))
	}
	return &sweeper{rates: rates, maxP99: maxP99, minOps: minOps, minTime: minTime, ops: ops,
		lat: make([]time.Duration, most), svc: make([]time.Duration, most), issued: make([]bool, most)}
}

// sweepHeadroom is how far the process's memory may grow during a sweep,
// whose GC is off, before the runtime collects anyway.
const sweepHeadroom = 256 << 20

// maxSleepSlice bounds one wait of the sweep, so a stop at a low rate is
// heard without waiting a period.
const maxSleepSlice = 100 * time.Millisecond

// errBudgetEnds is a sweeper's before saying the write budget ends the
// sweep before the next step.
var errBudgetEnds = errors.New("the write budget ends the sweep")

// run sweeps the rates until a step does not hold, calling done after each
// step; it returns the steps done and why it stopped early (nil when a
// step broke the bound or the rates ran out).
func (w *sweeper) run(done func(CapacityStep)) ([]CapacityStep, error) {
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
		st, err := w.step(rate)
		if err != nil {
			return steps, err
		}
		steps = append(steps, st)
		done(st)
		if !st.Held() {
			break
		}
	}
	return steps, nil
}

// stop ends the sweep between ops: those in flight end first.
func (w *sweeper) stop() { w.stopped.Store(true) }

// step offers n ops at rate: op i is due at start + i/rate whatever became
// of the ones before it, and its latency runs from then. An op due while
// every slot is busy waits for one (PoolFull), and that wait is in its
// latency. The step stops beginning ops capacityGrace past its planned
// length; those never begun count as late until then. A stop or a failed
// op ends it early: the ops in flight are waited for (a hung one holds the
// sweep here, and its caller gives up on it), and the step is dropped.
func (w *sweeper) step(rate float64) (st CapacityStep, err error) {
	n := stepOps(rate, w.minOps, w.minTime)
	st = CapacityStep{AskedIOPS: rate, Ops: n}
	period := 1e9 / rate
	planned := float64(n) * period
	start := nanotime() + int64(time.Millisecond)
	deadline := start + int64(planned*capacityGrace)
	due := func(i int) int64 { return start + int64(float64(i)*period) }
	clear(w.issued[:n])
	ended := func(i int, at int64, svc time.Duration) {
		w.lat[i] = time.Duration(at - due(i))
		w.svc[i] = svc
		w.issued[i] = true
	}
	next, last, depth := 0, n, w.ops.depth() // ops from last on are never begun
	gaveUp := int64(0)
	for err == nil && !w.stopped.Load() && (next < last || w.ops.busy() > 0) {
		now := nanotime()
		if next < last && now > deadline {
			gaveUp, last = now, next
			continue
		}
		for next < last && due(next) <= now && w.ops.busy() < depth {
			w.ops.begin(next)
			next++
		}
		if next < last && due(next) <= now {
			st.PoolFull = true
		}
		if err = w.ops.flush(); err != nil {
			break
		}
		until := now + int64(maxSleepSlice)
		if next < last && w.ops.busy() < depth {
			until = min(until, due(next))
		}
		err = w.ops.wait(until, ended)
	}
	for w.ops.busy() > 0 {
		if e := w.ops.wait(noDeadline, ended); err == nil {
			err = e
		}
	}
	if err != nil {
		return st, err
	}
	if w.stopped.Load() {
		return st, errInterrupted
	}
	end := nanotime()
	if gaveUp == 0 {
		gaveUp = end
	}
	// Ops never begun count with the wait until the step gave up; the
	// service times of those that ended go first, for their percentiles.
	issued := 0
	for i := range n {
		if !w.issued[i] {
			w.lat[i] = time.Duration(gaveUp - due(i))
			continue
		}
		w.svc[issued] = w.svc[i]
		issued++
	}
	span := max(end-start, int64(planned))
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
	return st, nil
}

// syncOps is the WAL pattern's engine: one writer, each append and its
// fdatasync done in begin, as the WAL probe makes them (timedWALOp); an
// append due while the previous one runs waits, and its latency shows it.
// Its waits sleep on a timerfd, or spin with yields under 50 µs, where a
// timer's slack would be longer than the wait.
type syncOps struct {
	op      func() (time.Duration, error)
	timerfd int
	ended   bool
	i       int
	at      int64
	svc     time.Duration
	err     error
}

func newSyncOps(op func() (time.Duration, error)) (*syncOps, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd: %w", err)
	}
	return &syncOps{op: op, timerfd: fd}, nil
}

func (e *syncOps) depth() int { return 1 }

func (e *syncOps) busy() int {
	if e.ended {
		return 1
	}
	return 0
}

func (e *syncOps) begin(i int) {
	e.svc, e.err = e.op()
	e.i, e.at, e.ended = i, nanotime(), true
}

func (e *syncOps) flush() error { return nil }

func (e *syncOps) wait(until int64, end func(i int, at int64, svc time.Duration)) error {
	if e.ended {
		e.ended = false
		end(e.i, e.at, e.svc)
		return e.err
	}
	switch d := until - nanotime(); {
	case d <= 0:
	case d < 50_000:
		runtime.Gosched()
	default:
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(until)}
		if unix.TimerfdSettime(e.timerfd, unix.TFD_TIMER_ABSTIME, &spec, nil) != nil {
			time.Sleep(time.Duration(d))
			break
		}
		var b [8]byte
		_, _ = unix.Read(e.timerfd, b[:])
	}
	return nil
}

func (e *syncOps) close() { unix.Close(e.timerfd) }

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
	if o.Device != "" {
		res.Path = o.Device
		if o.Pattern != CapacityRandRead {
			return res, fmt.Errorf("%s: a block device is only read (the randread pattern), never written", o.Device)
		}
		co.device, res.OnDevice = o.Device, true
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
	// No GC while measuring. The sweep's syscalls enter syscall state as
	// the daemon's ops do (timedio.go), not raw as check's randread: a raw
	// one holds its P, and a hung one would hang every stop-the-world.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
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
		var ops opEngine
		switch o.Pattern {
		case CapacityRandRead, CapacityRandWrite:
			r := cs.k.(*readProbe)
			if _, err := r.prepare(fls[0], stop); err != nil {
				done <- outcome{err: err}
				return
			}
			var w *atomic.Int64
			if o.Pattern == CapacityRandWrite {
				w = &written
			}
			// Freed only when the sweep returns: an op hung in flight
			// keeps its buffer and its AIO context.
			e, free, err := randomOps(r, fls, w)
			if err != nil {
				done <- outcome{err: err}
				return
			}
			defer free()
			ops = e
		case CapacityWAL:
			w := cs.k.(*walProbe)
			if _, err := w.prepare(fls[0], stop); err != nil {
				done <- outcome{err: err}
				return
			}
			op, walBefore, noFlush := walOps(w, fls[0], &written)
			walFlushes = noFlush
			e, err := newSyncOps(op)
			if err != nil {
				done <- outcome{err: err}
				return
			}
			defer e.close()
			ops = e
			budget := before
			before = func(n int) error {
				if err := budget(n); err != nil {
					return err
				}
				return walBefore(n)
			}
		}
		s := newSweeper(o.Rates, o.MaxP99, minOps, minTime, ops)
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

// slotBuffers are the sweep's op buffers, one a slot, each the block size
// and page-aligned for O_DIRECT, random for writes (as the working set's
// own data: a device that short-cuts zeros or compresses gets no easier
// writes); free unmaps them.
func slotBuffers(n int, bs int64, random bool) (bufs [][]byte, free func(), err error) {
	bufs = make([][]byte, n)
	free = func() {
		for _, b := range bufs {
			freeBuffer(b)
		}
	}
	for i := range bufs {
		if bufs[i], err = alignedBuffer(int(bs)); err != nil {
			free()
			return nil, nil, err
		}
		if random {
			fillRandom(bufs[i])
		}
	}
	return bufs, free, nil
}

// randomOps is the engine of the random patterns over r's working set:
// reads on r's file, or, with written set, O_DIRECT writes (O_DSYNC where
// O_DIRECT was refused and the page cache accepted) each counting its
// bytes in written. It returns the engine and what frees it.
func randomOps(r *readProbe, fls []*inflight, written *atomic.Int64) (*aioOps, func(), error) {
	fd, closeFD := r.fd, func() {}
	if written != nil {
		flags := unix.O_WRONLY | unix.O_DIRECT
		if r.buffered {
			flags = unix.O_WRONLY | unix.O_DSYNC
		}
		var err error
		if fd, err = r.s.dir.open(r.file, flags); err != nil {
			if errors.Is(err, unix.EINVAL) {
				return nil, nil, fmt.Errorf("%s: %w", r.s.dir.path, errNoODirect)
			}
			return nil, nil, err
		}
		closeFD = func() { unix.Close(fd) }
	}
	bufs, freeBufs, err := slotBuffers(len(fls), r.bs, written != nil)
	if err != nil {
		closeFD()
		return nil, nil, err
	}
	picker := newBlockPicker(r.picker.lo, r.picker.hi)
	e, err := newAIOOps(fd, bufs, fls, func() int64 { return picker.next() * r.bs }, r.s.where(), written)
	if err != nil {
		freeBufs()
		closeFD()
		return nil, nil, err
	}
	return e, func() {
		e.close()
		freeBufs()
		closeFD()
	}, nil
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

// walOps is the WAL pattern's op (one append and its fdatasync, at the
// segment's next offset: one writer), the hook that cuts a new segment
// between steps when the next step's appends would not fit (as etcd cuts
// one when its segment is full, but never inside a step, where it would
// add a spike the device did not cause), and the device's flush count
// before and after, for the check that a flush reaches a device.
func walOps(w *walProbe, fl *inflight, written *atomic.Int64) (func() (time.Duration, error), func(int) error, func() (noFlush bool)) {
	flushesBefore, known := w.deviceFlushes()
	op := func() (time.Duration, error) {
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
