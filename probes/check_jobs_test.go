package probes

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testkit/testfs"
)

func us(v ...int) []time.Duration {
	d := make([]time.Duration, len(v))
	for i, x := range v {
		d[i] = time.Duration(x) * time.Microsecond
	}
	return d
}

// Several jobs are judged on the worst: its samples are the result, every
// job's p99 is beside it, warnings are merged once each. A job certain to
// fail is the worst whatever the others' p99s, and the interruption it
// caused the others is not the run's error.
func TestMergeJobsJudgesTheWorst(t *testing.T) {
	job := func(lat []time.Duration, exceeded bool, err error, warn ...string) *checkJob {
		return &checkJob{res: &CheckResult{Profile: ProfileEtcd, Planned: 4, Latencies: lat, Exceeded: exceeded, Warnings: warn}, err: err}
	}
	res, err := mergeJobs([]*checkJob{
		job(us(100, 110, 120, 130), false, nil, "fuse"),
		job(us(100, 110, 120, 900), false, nil, "fuse", "other"),
		job(us(100, 110, 120, 140), false, nil),
	})
	require.NoError(t, err)
	require.Equal(t, us(100, 110, 120, 900), res.Latencies)
	require.Equal(t, us(130, 900, 140), res.JobP99s)
	require.Equal(t, []string{"fuse", "other"}, res.Warnings)

	res, err = mergeJobs([]*checkJob{
		job(us(100, 9000), false, errInterrupted),
		job(us(20000, 20000), true, nil),
	})
	require.NoError(t, err, "the others were stopped by the FAIL")
	require.True(t, res.Exceeded)
	require.Equal(t, us(20000, 20000), res.Latencies)

	broken := errors.New("fdatasync: input/output error")
	_, err = mergeJobs([]*checkJob{job(us(100), false, nil), job(us(100), false, broken)})
	require.ErrorIs(t, err, broken)

	// Of two stopped jobs, the hung one's error says why.
	interrupted := errors.New("interrupted after 3 of 4 samples")
	stuck := errors.New("interrupted after 1 of 4 samples: an I/O has been in flight for 6s (hung disk?)")
	hung := job(us(100), false, stuck)
	hung.hung = true
	_, err = mergeJobs([]*checkJob{job(us(100), false, interrupted), hung, job(us(100), false, interrupted)})
	require.Equal(t, stuck, err)

	one := job(us(100), false, nil)
	res, _ = mergeJobs([]*checkJob{one})
	require.Same(t, one.res, res, "one job is its own result")
	require.Nil(t, res.JobP99s)
}

// --jobs 2: two writers, each on its own file, with an fdatasync in flight
// at the same time (both held by the hung test filesystem at once).
func TestCheckJobsWriteAtOnce(t *testing.T) {
	m := testfs.Start(t, "")
	m.Do(t, "hang")
	type outcome struct {
		res *CheckResult
		err error
	}
	out := make(chan outcome, 1)
	go func() {
		res, err := Check(context.Background(), CheckOptions{Dir: m.Dir, Profile: ProfileFioEtcd, Samples: 20, BlockSize: 2300, Jobs: 2})
		out <- outcome{res, err}
	}()
	require.Eventually(t, func() bool {
		_, blocked, err := m.Control.Stats()
		return err == nil && blocked == 2
	}, 10*time.Second, 20*time.Millisecond, "two fdatasyncs held at once")
	for _, f := range []string{".diskcanary-check-wal", ".diskcanary-check-2-wal"} {
		_, err := os.Stat(m.Backing + "/" + f)
		require.NoError(t, err, "each job writes its own file")
	}
	m.Do(t, "release")
	o := <-out
	require.NoError(t, o.err)
	require.Len(t, o.res.JobP99s, 2)
	require.Len(t, o.res.Latencies, 20)
	entries, err := os.ReadDir(m.Backing)
	require.NoError(t, err)
	require.Empty(t, entries, "both jobs' files removed")
}

// The progress callback sees the timed ops of every job as they come,
// with the injected latency in their percentiles.
func TestCheckProgressCountsEveryJob(t *testing.T) {
	m := testfs.Start(t, "")
	m.Do(t, "sync-delay 2ms")
	var mu sync.Mutex
	var seen []CheckProgress
	res, err := Check(context.Background(), CheckOptions{Dir: m.Dir, Profile: ProfileFioEtcd, Samples: 600, BlockSize: 2300, Jobs: 2,
		Progress: func(p CheckProgress) { mu.Lock(); seen = append(seen, p); mu.Unlock() }})
	require.NoError(t, err)
	require.Len(t, res.JobP99s, 2)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, seen, "a run of over a second reports progress")
	measured := false
	for _, p := range seen {
		require.Equal(t, 1200, p.Planned, "600 samples for each of 2 jobs")
		require.LessOrEqual(t, p.Done, 1200)
		if p.Done > 0 {
			measured = true
			require.GreaterOrEqual(t, p.P50, 2*time.Millisecond, "the injected 2 ms is in every fdatasync")
			require.GreaterOrEqual(t, p.P99, p.P50)
			if p.Done < 1200 {
				require.Positive(t, p.ETA)
			}
		}
	}
	require.True(t, measured)
}

// While the randread working set is written, progress reports its bytes:
// held at its closing fdatasync, all of it is laid out and nothing timed.
func TestCheckProgressWhileLayingOut(t *testing.T) {
	m := testfs.Start(t, "")
	m.Do(t, "hang")
	laidOut := make(chan CheckProgress, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Check(ctx, CheckOptions{Dir: m.Dir, Profile: ProfileRandRead, Samples: 100, BlockSize: 4096, WorkingSet: 4 << 20,
			AllowUnsafeFS: true, Progress: func(p CheckProgress) {
				if p.LaidOut == 4<<20 {
					select {
					case laidOut <- p:
					default:
					}
				}
			}})
		done <- err
	}()
	select {
	case p := <-laidOut:
		require.EqualValues(t, 4<<20, p.WorkingSet)
		require.Zero(t, p.Done)
	case <-time.After(10 * time.Second):
		t.Fatal("no progress line for the working-set write")
	}
	m.Do(t, "release")
	cancel()
	<-done
}
