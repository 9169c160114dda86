package blocklatency

import (
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
		classic int // index in probes.LatencyBuckets, 17 = +Inf
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
