package probes

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// With 10,000 planned samples the p99 is the 9,900th: 100 samples over
// the threshold still pass, the 101st makes the FAIL certain and stops
// the run. Samples at the threshold are not over it.
func TestRecorderStopsWhenTheP99CannotPass(t *testing.T) {
	for _, tc := range []struct{ planned, allowed int }{{10000, 100}, {1000, 10}, {200, 2}, {100, 1}, {50, 0}, {12345, 123}} {
		stop := new(atomic.Bool)
		r := newSampleRecorder(tc.planned, 10*time.Millisecond, stop)
		require.Equal(t, tc.allowed, r.allowed, "planned %d", tc.planned)
		r.recordWAL(time.Millisecond, 10*time.Millisecond)
		for i := 0; i < tc.allowed; i++ {
			r.recordWAL(time.Millisecond, 11*time.Millisecond)
			r.recordRead(time.Millisecond) // under: never counts
		}
		require.False(t, stop.Load(), "planned %d: %d over still pass", tc.planned, tc.allowed)
		r.recordWAL(time.Millisecond, 11*time.Millisecond)
		require.True(t, stop.Load(), "planned %d: %d over cannot pass", tc.planned, tc.allowed+1)
		require.True(t, r.exceeded)
	}
	// No threshold: every sample runs.
	stop := new(atomic.Bool)
	r := newSampleRecorder(10, 0, stop)
	for i := 0; i < 10; i++ {
		r.recordRead(time.Hour)
	}
	require.False(t, stop.Load())
	require.EqualValues(t, 10, r.taken.Load())
}

// The nearest-rank p99 over N samples is the ceil(0.99·N)th, the rank the
// recorder's allowance assumes.
func TestPercentileNearestRank(t *testing.T) {
	l := make([]time.Duration, 10000)
	for i := range l {
		l[i] = time.Duration(i+1) * time.Microsecond
	}
	require.Equal(t, 9900*time.Microsecond, Percentile(l, 99))
	require.Equal(t, 5000*time.Microsecond, Percentile(l, 50))
	require.Equal(t, 9990*time.Microsecond, Percentile(l, 99.9))
	require.Equal(t, 1*time.Microsecond, Percentile(l, 0))
	require.Equal(t, 50*time.Microsecond, Percentile(l[:50], 99), "below 100 samples the p99 is the maximum")
	require.Zero(t, Percentile(nil, 99))
}

// A stop during the working-set write (Ctrl-C in check, shutdown in the
// daemon) ends it between chunks and removes the partial file.
func TestWorkingSetWriteStops(t *testing.T) {
	dir := t.TempDir()
	d, err := openProbeDir(dir)
	require.NoError(t, err)
	defer d.close()
	stop := new(atomic.Bool)
	stop.Store(true)
	_, err = d.writeReadset(".diskcanary-rr-readset", 8<<20, newInflight(), stop)
	require.ErrorIs(t, err, errInterrupted)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// A context that ends mid-run returns the samples so far, with the probe
// file removed.
func TestCheckInterruptedReturnsSamplesTaken(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	gap := 10 * time.Millisecond
	res, err := Check(ctx, CheckOptions{Dir: dir, Profile: ProfileEtcd, Samples: 100000, BlockSize: 2300, Gap: &gap, MinFree: 0})
	require.ErrorIs(t, err, ErrInterrupted)
	require.Regexp(t, `^interrupted after \d+ of 100000 samples$`, err.Error())
	require.True(t, res.Partial)
	require.Equal(t, 100000, res.Planned)
	require.NotEmpty(t, res.Latencies)
	require.Less(t, len(res.Latencies), 100)
	require.Len(t, res.Writes, len(res.Latencies))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}
