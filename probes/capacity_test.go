package probes

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/internal/testkit/testfs"
)

func TestStepOpsTakesTheLargerOfCountAndTime(t *testing.T) {
	require.Equal(t, 1000, stepOps(100, 1000, time.Second), "10 s at 100 IOPS: the count rules")
	require.Equal(t, 1250, stepOps(1250, 1000, time.Second), "a second's worth")
	require.Equal(t, 5000, stepOps(5000, 1000, time.Second))
	require.Equal(t, 1, stepOps(1, 1, 0))
}

func TestDefaultCapacityRatesAreR10(t *testing.T) {
	r := DefaultCapacityRates
	require.Len(t, r, 41)
	require.Equal(t, []float64{100, 125, 160, 200, 250, 315, 400, 500, 630, 800, 1000, 1250}, r[:12])
	require.Equal(t, []float64{630_000, 800_000, 1_000_000}, r[38:])
}

func TestKneeIsTheLastStepBeforeTheFirstBreak(t *testing.T) {
	held := CapacityStep{}
	over := CapacityStep{OverBound: true}
	short := CapacityStep{Short: true}
	require.Equal(t, -1, kneeOf(nil))
	require.Equal(t, -1, kneeOf([]CapacityStep{over}), "the first step broke: no knee")
	require.Equal(t, 0, kneeOf([]CapacityStep{held, short}))
	require.Equal(t, 2, kneeOf([]CapacityStep{held, held, held, over}))
	require.Equal(t, 2, kneeOf([]CapacityStep{held, held, held}), "the rates ran out: the last one")
	// A step that held after a break does not move the knee up.
	require.Equal(t, 1, kneeOf([]CapacityStep{held, held, short, held}))
}

// sleepOp is a fake read whose service time is d (a sleep: only ever
// longer, so the assertions below are lower bounds where load could
// lengthen them).
func sleepOp(d time.Duration) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		t0 := time.Now()
		time.Sleep(d)
		return time.Since(t0), nil
	}
}

// goOps stands in for the kernel's asynchronous I/O in the sweep's logic
// tests: each op begun runs op on a goroutine of its own, at most depth
// at once, and its end comes back through a channel.
type goOps struct {
	slots, taken int
	op           func() (time.Duration, error)
	ends         chan goEnd
}

type goEnd struct {
	i   int
	at  int64
	svc time.Duration
	err error
}

func goOpsOf(depth int, op func() (time.Duration, error)) *goOps {
	return &goOps{slots: depth, op: op, ends: make(chan goEnd, depth)}
}

func (g *goOps) depth() int   { return g.slots }
func (g *goOps) busy() int    { return g.taken }
func (g *goOps) flush() error { return nil }
func (g *goOps) close()       {}

func (g *goOps) begin(i int) {
	g.taken++
	go func() {
		svc, err := g.op()
		g.ends <- goEnd{i, nanotime(), svc, err}
	}()
}

func (g *goOps) wait(until int64, end func(i int, at int64, svc time.Duration)) error {
	var e goEnd
	switch d := time.Duration(until - nanotime()); {
	case until == noDeadline:
		e = <-g.ends
	case d <= 0:
		select {
		case e = <-g.ends:
		default:
			return nil
		}
	default:
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case e = <-g.ends:
		case <-t.C:
			return nil
		}
	}
	var failed error
	for {
		g.taken--
		end(e.i, e.at, e.svc)
		if e.err != nil && failed == nil {
			failed = e.err
		}
		select {
		case e = <-g.ends:
		default:
			return failed
		}
	}
}

// The open-loop accounting: one slot, 3 ms reads, asked 400 IOPS (one due
// every 2.5 ms). Read k is due at 2.5k ms but can start only at 3k ms, so
// it ends at 3(k+1) ms: its latency from its scheduled start is
// 0.5k + 3 ms, 27.5 ms at the p50 (k=49) and 52 ms at the p99 (k=98) of
// 100, where a closed loop would report 3 ms for every read. The 100 reads
// take 300 ms, not the planned 250: 333 IOPS achieved, short of 90 % of 400.
func TestSweepTimesFromTheScheduledStart(t *testing.T) {
	w := newSweeper([]float64{400}, 10*time.Millisecond, 100, time.Millisecond, goOpsOf(1, sleepOp(3*time.Millisecond)))
	steps, err := w.run(func(CapacityStep) {})
	require.NoError(t, err)
	require.Len(t, steps, 1)
	s := steps[0]
	t.Logf("p50 %v p99 %v service p99 %v achieved %.0f missed %d", s.P50, s.P99, s.ServiceP99, s.AchievedIOPS, s.Missed)
	require.Equal(t, 400.0, s.AskedIOPS)
	require.Equal(t, 100, s.Ops)
	require.GreaterOrEqual(t, s.P50, 27*time.Millisecond)
	require.GreaterOrEqual(t, s.P99, 51*time.Millisecond)
	require.GreaterOrEqual(t, s.ServiceP99, 3*time.Millisecond)
	require.Less(t, s.AchievedIOPS, 340.0)
	require.True(t, s.PoolFull, "reads waited for the one slot")
	require.True(t, s.OverBound)
	require.True(t, s.Short)
	require.Equal(t, -1, kneeOf(steps))
}

// The same 3 ms reads on one slot carry 50 and 100 IOPS (due every 20 and
// 10 ms) within a 150 ms bound, and break at 400 by falling short of the
// rate, as above (whatever the machine does: a sleep only lengthens); the
// sweep stops there and never asks 800. The bound leaves the held steps
// room for a loaded machine, where a 3 ms sleep's own p99 can pass 45 ms.
func TestSweepStopsAtTheFirstStepThatBreaks(t *testing.T) {
	testkit.SkipUnderRace(t)
	var seen []float64
	w := newSweeper([]float64{50, 100, 400, 800}, 150*time.Millisecond, 100, time.Millisecond, goOpsOf(1, sleepOp(3*time.Millisecond)))
	steps, err := w.run(func(s CapacityStep) { seen = append(seen, s.AskedIOPS) })
	require.NoError(t, err)
	require.Equal(t, []float64{50, 100, 400}, seen)
	require.Len(t, steps, 3)
	for _, s := range steps[:2] {
		t.Logf("%.0f IOPS: achieved %.1f p99 %v", s.AskedIOPS, s.AchievedIOPS, s.P99)
		require.True(t, s.Held(), "%+v", s)
		require.Equal(t, 0, s.Missed)
		require.GreaterOrEqual(t, s.P50, 3*time.Millisecond)
		require.InDelta(t, s.AskedIOPS, s.AchievedIOPS, s.AskedIOPS*0.05, "on schedule: the achieved rate is the asked one")
	}
	require.False(t, steps[2].Held())
	require.True(t, steps[2].Short, "%+v", steps[2])
	require.Less(t, steps[2].AchievedIOPS, 340.0)
	require.GreaterOrEqual(t, steps[2].P99, 51*time.Millisecond)
	require.Equal(t, 1, kneeOf(steps))
}

// Many slots carry the rate, but every read takes 15 ms: the p99 breaks a
// 10 ms bound while the rate holds.
func TestSweepBreaksOnTheBoundAlone(t *testing.T) {
	testkit.SkipUnderRace(t)
	w := newSweeper([]float64{200, 400}, 10*time.Millisecond, 100, time.Millisecond, goOpsOf(32, sleepOp(15*time.Millisecond)))
	steps, err := w.run(func(CapacityStep) {})
	require.NoError(t, err)
	require.Len(t, steps, 1)
	require.True(t, steps[0].OverBound)
	require.False(t, steps[0].Short, "32 slots at 15 ms carry 2,000 IOPS")
	require.GreaterOrEqual(t, steps[0].P50, 15*time.Millisecond)
}

// A read that fails ends the sweep with its error and no half step.
func TestSweepEndsOnAReadError(t *testing.T) {
	boom := errors.New("read: input/output error")
	var n atomic.Int32
	op := func() (time.Duration, error) {
		if n.Add(1) == 150 {
			return 0, boom
		}
		return time.Microsecond, nil
	}
	// Rates a loaded machine still keeps (a short step would end the
	// sweep before the failing read).
	w := newSweeper([]float64{200, 400}, time.Second, 100, time.Millisecond, goOpsOf(4, op))
	steps, err := w.run(func(CapacityStep) {})
	require.ErrorIs(t, err, boom)
	require.Len(t, steps, 1, "the first step's 100 reads were all good")
}

// A stop mid-step keeps the steps done and drops the unfinished one: it
// comes 100 ms into the second step, which takes 10 s. The rates are
// ones a loaded machine keeps (a short first step would end the sweep).
func TestSweepStoppedKeepsTheStepsDone(t *testing.T) {
	w := newSweeper([]float64{200, 10}, time.Second, 100, time.Millisecond, goOpsOf(4, sleepOp(0)))
	steps, err := w.run(func(CapacityStep) {
		time.AfterFunc(100*time.Millisecond, w.stop)
	})
	require.ErrorIs(t, err, errInterrupted)
	require.Len(t, steps, 1)
	require.Equal(t, 200.0, steps[0].AskedIOPS)
}

// The sweep over a real working set: every step reported, the working set
// removed after it; and a context that ends mid-sweep keeps the steps done,
// marks the result partial and removes the working set too.
func TestCapacityRemovesItsFiles(t *testing.T) {
	dir := t.TempDir()
	o := CapacityOptions{Dir: dir, BlockSize: 4096, WorkingSet: 1 << 20, Rates: []float64{50, 100}, MaxP99: time.Second,
		Concurrency: 4, MinStepOps: 50, MinStepTime: time.Millisecond, AllowUnsafeFS: true}
	res, err := Capacity(context.Background(), o)
	require.NoError(t, err)
	require.Len(t, res.Steps, 2)
	require.Equal(t, 1, res.Knee)
	require.False(t, res.Partial)
	require.Equal(t, 4, res.Concurrency)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)

	o.Rates = []float64{100, 1}
	var steps int
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Step = func(CapacityStep) {
		steps++
		time.AfterFunc(100*time.Millisecond, cancel) // the second step takes 50 s
	}
	res, err = Capacity(ctx, o)
	require.ErrorIs(t, err, ErrInterrupted)
	require.EqualError(t, err, "interrupted after 1 step")
	require.True(t, res.Partial)
	require.Len(t, res.Steps, 1)
	require.Equal(t, 1, steps)
	require.Equal(t, 0, res.Knee)
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// While the working set is laid out, LayOut hears how far it is about once
// a second: here the layout's final fdatasync takes 1.5 s on the FUSE test
// filesystem, after all of its 1 MiB is written.
func TestCapacityReportsTheLayout(t *testing.T) {
	m := testfs.Start(t, "", "--sync-delay", "1500ms")
	var seen []CheckProgress
	res, err := Capacity(context.Background(), CapacityOptions{Dir: m.Dir, BlockSize: 4096, WorkingSet: 1 << 20, Rates: []float64{1000},
		MaxP99: time.Second, MinStepOps: 50, MinStepTime: time.Millisecond, AllowUnsafeFS: true,
		LayOut: func(p CheckProgress) { seen = append(seen, p) }})
	require.NoError(t, err)
	require.Len(t, res.Steps, 1)
	require.NotEmpty(t, seen)
	for _, p := range seen {
		require.Equal(t, int64(1<<20), p.LaidOut)
		require.Equal(t, int64(1<<20), p.WorkingSet)
		require.Equal(t, 0, p.Done)
	}
}

func TestCapacityBytesPerOp(t *testing.T) {
	require.Equal(t, int64(0), CapacityBytesPerOp(CapacityRandRead, 4096))
	require.Equal(t, int64(4096), CapacityBytesPerOp(CapacityRandWrite, 4096))
	// 2300 bytes touch at most 2 pages, and 8 KiB of journal per fdatasync.
	require.Equal(t, int64(2*4096+8192), CapacityBytesPerOp(CapacityWAL, 2300))
	require.Equal(t, 1, CapacityConcurrency(CapacityWAL))
	require.Equal(t, 32, CapacityConcurrency(CapacityRandWrite))
}

// Random writes go into the working set after its header: 50 writes of
// 4 KiB a step, counted; the kept working set is still one the next run
// takes as laid out.
func TestCapacityRandWrite(t *testing.T) {
	dir := t.TempDir()
	limit := debug.SetMemoryLimit(-1)
	res, err := Capacity(context.Background(), CapacityOptions{Dir: dir, Pattern: CapacityRandWrite, BlockSize: 4096, WorkingSet: 1 << 20,
		Rates: []float64{50, 100}, MaxP99: time.Second, Concurrency: 4, MinStepOps: 50, MinStepTime: time.Millisecond,
		AllowUnsafeFS: true, KeepWorkingSet: true})
	require.NoError(t, err)
	require.Equal(t, CapacityRandWrite, res.Pattern)
	require.Len(t, res.Steps, 2)
	require.Equal(t, int64(100*4096), res.Written)
	require.False(t, res.BudgetEnded)
	require.Equal(t, limit, debug.SetMemoryLimit(-1), "the sweep's memory limit is lifted after it")
	require.Equal(t, filepath.Join(dir, ".diskcanary-check-readset"), res.WorkingSetFile)
	d, err := openDirSite(dir, "/proc", "/sys", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer d.close()
	require.True(t, d.dir.readsetValid(".diskcanary-check-readset", 1<<20), "the header is never written")
}

// The WAL pattern: one writer whatever Concurrency says, 2300-byte
// appends, each counted with the pages it dirtied and 8 KiB of journal;
// the segment removed at the end.
func TestCapacityWAL(t *testing.T) {
	dir := t.TempDir()
	res, err := Capacity(context.Background(), CapacityOptions{Dir: dir, Pattern: CapacityWAL,
		Rates: []float64{25, 50}, MaxP99: time.Second, Concurrency: 8, MinStepOps: 25, MinStepTime: time.Millisecond, AllowUnsafeFS: true})
	require.NoError(t, err)
	require.Equal(t, 1, res.Concurrency)
	require.Equal(t, int64(2300), res.BlockSize)
	require.Len(t, res.Steps, 2)
	require.Equal(t, int64(729088), res.Written, "50 appends from offset 0")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// The write budget: the second step would pass it, so the sweep ends
// after the first, which held; nothing is partial, and the budget was kept.
func TestCapacityWriteBudgetEndsTheSweep(t *testing.T) {
	dir := t.TempDir()
	var seen int
	res, err := Capacity(context.Background(), CapacityOptions{Dir: dir, Pattern: CapacityRandWrite, BlockSize: 4096, WorkingSet: 1 << 20,
		Rates: []float64{50, 100, 200}, MaxP99: time.Second, MinStepOps: 50, MinStepTime: time.Millisecond,
		AllowUnsafeFS: true, WriteBudget: 50*4096 + 4095, Step: func(CapacityStep) { seen++ }})
	require.NoError(t, err)
	require.Len(t, res.Steps, 1)
	require.Equal(t, 1, seen)
	require.True(t, res.BudgetEnded)
	require.False(t, res.Partial)
	require.Equal(t, 0, res.Knee)
	require.Equal(t, int64(50*4096), res.Written)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

func TestCapacityUnknownPattern(t *testing.T) {
	_, err := Capacity(context.Background(), CapacityOptions{Dir: t.TempDir(), Pattern: "seqread", Rates: []float64{100}, MaxP99: time.Second})
	require.EqualError(t, err, `unknown capacity pattern "seqread" (randread, randwrite, wal)`)
}

// A stop mid-sweep keeps the step done, marks the result partial and
// removes the writing patterns' files too: the working set, the segment.
// The stop comes once the first step is reported (20 ops at 20 a second,
// which hold unless an op takes 50 ms on average); the second would take
// 20 s.
func TestCapacityWritePatternsRemoveTheirFilesWhenStopped(t *testing.T) {
	for _, pattern := range []string{CapacityRandWrite, CapacityWAL} {
		dir := t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		res, err := Capacity(ctx, CapacityOptions{Dir: dir, Pattern: pattern, WorkingSet: 1 << 20, Rates: []float64{20, 1},
			MaxP99: time.Minute, MinStepOps: 20, MinStepTime: time.Millisecond, AllowUnsafeFS: true,
			Step: func(CapacityStep) { cancel() }})
		cancel()
		require.ErrorIs(t, err, ErrInterrupted, pattern)
		require.EqualError(t, err, "interrupted after 1 step", pattern)
		require.True(t, res.Partial)
		require.Len(t, res.Steps, 1)
		require.Equal(t, 0, res.Knee)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, entries, pattern)
	}
}

// A stop is heard between ops at once, not a period later: at 0.01 ops a
// second the next op is 100 s away, and with a free worker ready the stop
// still wins.
func TestSweepStopsWithoutWaitingAPeriod(t *testing.T) {
	w := newSweeper([]float64{20, 0.01}, time.Second, 10, time.Millisecond, goOpsOf(4, sleepOp(0)))
	var stopped time.Time
	steps, err := w.run(func(CapacityStep) {
		stopped = time.Now()
		w.stop()
	})
	require.ErrorIs(t, err, errInterrupted)
	require.Len(t, steps, 1)
	require.Less(t, time.Since(stopped), 2*time.Second, "at most a sleep slice (100 ms), not 100 s")
}
