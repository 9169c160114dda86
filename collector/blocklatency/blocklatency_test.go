package blocklatency

import (
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// slotOf is where the BPF program's binary search puts a latency.
func slotOf(ns uint64) int {
	return sort.Search(len(Edges), func(i int) bool { return ns <= Edges[i] })
}

// The committed object and this build agree on the slot count, and the
// edges load into it (no kernel needed: the spec is only parsed).
func TestObjectMatchesEdges(t *testing.T) {
	require.Len(t, Edges, 231, "17 classic edges + 217 native edges (2^-20 s .. 2^7 s) - 3 shared (0.25, 0.5, 1 s)")
	_, err := loadSpec()
	require.NoError(t, err)
	require.Len(t, SlotClassic, 232)
	require.Len(t, SlotNative, 232)
}

// Classic buckets are exact at their edges (le is inclusive), and so are the
// native ones: bucket k is (2^((k-1)/8), 2^(k/8)] seconds.
func TestSlotsFallInsideOneBucketOfEach(t *testing.T) {
	for _, c := range []struct {
		ns      uint64
		classic int // index in buckets.Latency, 17 = +Inf
		native  int
	}{
		{500, 0, NativeZero},        // below 2^-20 s: the zero bucket
		{953, 0, NativeZero},        // floor(2^-20 s) = 953 ns, the threshold
		{954, 0, -159},              //
		{50_000, 0, -114},           // 50 µs: le=5e-05; 2^(-114/8) = 51.3 µs
		{50_001, 1, -114},           // past the classic edge, same native bucket
		{1_000_000, 4, -79},         // 1 ms: le=0.001; 2^(-79/8) = 1.065 ms
		{10_000_000, 7, -53},        // 10 ms: le=0.01; 2^(-53/8) = 10.13 ms
		{10_000_001, 8, -53},        // le=0.025
		{20_000_000, 8, -45},        // 20 ms; 2^(-45/8) = 20.26 ms
		{250_000_000, 11, -16},      // 0.25 s = 2^-2 exactly: both edges
		{250_000_001, 12, -15},      //
		{1_000_000_000, 13, 0},      // 1 s = 2^0
		{128_000_000_000, 17, 56},   // 2^7 s: the top native edge
		{128_000_000_001, 17, 57},   // above it: counted in 57
		{3_600_000_000_000, 17, 57}, // an hour
	} {
		s := slotOf(c.ns)
		require.Equal(t, c.classic, SlotClassic[s], "classic bucket of %d ns", c.ns)
		require.Equal(t, c.native, SlotNative[s], "native bucket of %d ns", c.ns)
	}
}

// The quantile of the requests between two readings, interpolated inside
// a slot: 100 requests in the slot (2^-10 s, 1 ms] (976,562 ns floored to
// 1,000,000 ns) have their median halfway, at 988,281 ns; 100 earlier
// requests in the slot below 954 ns are not counted.
func TestQuantileOverAnInterval(t *testing.T) {
	prev := make([]uint64, len(Edges)+1)
	curr := make([]uint64, len(Edges)+1)
	ms := slices.Index(Edges, 1_000_000)
	require.Equal(t, uint64(976_562), Edges[ms-1])
	prev[0], curr[0] = 100, 100
	curr[ms] = 100
	require.InDelta(t, 988_281e-9, Quantile(0.5, prev, curr), 1e-15)
	require.InDelta(t, (976_562+23_438*0.99)*1e-9, Quantile(0.99, prev, curr), 1e-15)
	// Without prev, the first slot's 100 count: the median is its top.
	require.InDelta(t, float64(Edges[0])*1e-9, Quantile(0.5, nil, curr), 1e-15)
	require.True(t, math.IsNaN(Quantile(0.5, curr, curr)), "no request in the interval")
	// Past the last edge (a request over 128 s): the last edge.
	last := make([]uint64, len(Edges)+1)
	last[len(Edges)] = 1
	require.Equal(t, float64(Edges[len(Edges)-1])/1e9, Quantile(0.99, nil, last))
}
