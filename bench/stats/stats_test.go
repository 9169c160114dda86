package stats

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMedian(t *testing.T) {
	require.Equal(t, 3.0, Median([]float64{5, 1, 3}))
	require.Equal(t, 2.5, Median([]float64{4, 1, 3, 2}))
	require.Equal(t, 7.0, Median([]float64{7}))
	require.True(t, math.IsNaN(Median(nil)))
}

func TestMedianLeavesItsInputUnsorted(t *testing.T) {
	xs := []float64{3, 1, 2}
	Median(xs)
	require.Equal(t, []float64{3, 1, 2}, xs)
}

// Rounds where the device drifted: the medians' ratio (110/100 = 1.10)
// carries the drift, the paired ratio (round ratios 1.02, 0.98, 1.01, 1.00)
// does not.
func TestPairedRatio(t *testing.T) {
	tool := []float64{102, 98, 202, 110}
	ref := []float64{100, 100, 200, 110}
	require.InDelta(t, 1.005, PairedRatio(tool, ref), 1e-12)
}

func TestPairedRatioLeavesOutRoundsWithoutAReference(t *testing.T) {
	require.InDelta(t, 2.0, PairedRatio([]float64{2, 5, 4}, []float64{1, 0, 2}), 1e-12)
	require.True(t, math.IsNaN(PairedRatio([]float64{1}, []float64{0})))
}

func TestBounds(t *testing.T) {
	b := Within(0.05)
	require.True(t, b.Holds(0.95))
	require.True(t, b.Holds(1.05))
	require.False(t, b.Holds(1.051))
	require.False(t, b.Holds(0.949))
	require.False(t, b.Holds(math.NaN()))
	require.Equal(t, "ok (±5 %)", b.Verdict(1.02))
	require.Equal(t, "OUT OF RANGE (±10 %)", Within(0.10).Verdict(1.2))

	m := AtMost(1.25)
	require.True(t, m.Holds(0.5))
	require.True(t, m.Holds(1.25))
	require.False(t, m.Holds(1.26))
	require.Equal(t, "OUT OF RANGE (≤ ×1.25)", m.Verdict(1.3))
}

// A miss is only said to be below the noise when the reference's A/A
// ratio misses the bound too (go run ./bench daemon-vs-fio).
func TestVerdictBesideAA(t *testing.T) {
	b := Within(0.10)
	require.Equal(t, "OUT OF RANGE (±10 %); so is the A/A run beside it: the bound is below this machine's noise", b.VerdictBesideAA(1.115, 1.212))
	require.Equal(t, "OUT OF RANGE (±10 %); so is the A/A run beside it: the bound is below this machine's noise", b.VerdictBesideAA(1.115, 0.85))
	require.Equal(t, "OUT OF RANGE (±10 %)", b.VerdictBesideAA(1.147, 1.058))
	require.Equal(t, "ok (±10 %)", b.VerdictBesideAA(0.967, 1.212))
	require.Equal(t, "OUT OF RANGE (±10 %)", b.VerdictBesideAA(math.NaN(), 1.0))
}

// The bound is etcd's own A/A spread plus 5 points: a spread of 8 % holds
// a ratio to ×0.87-1.13.
func TestAABound(t *testing.T) {
	require.InDelta(t, 0.08, AASpread(270, 250), 1e-12)
	require.InDelta(t, 0.08, AASpread(230, 250), 1e-12)
	require.True(t, math.IsNaN(AASpread(230, 0)))
	b := AABound(0.08)
	require.InDelta(t, 0.87, b.Lo, 1e-12)
	require.InDelta(t, 1.13, b.Hi, 1e-12)
	require.Equal(t, "±13 %", b.String())
}

// Judged against etcd's A/A spread: inside it plus 5 points passes, outside
// fails, and a spread wider than the effect looked for is inconclusive,
// whatever the ratio.
func TestJudgeAA(t *testing.T) {
	require.Equal(t, "pass", JudgeAA(1.12, 0.08, 0.15))
	require.Equal(t, "pass", JudgeAA(0.88, 0.08, 0.15))
	require.Equal(t, "FAIL", JudgeAA(1.14, 0.08, 0.15))
	require.Equal(t, "FAIL", JudgeAA(1.76, 0.20, 0.30))
	require.Equal(t, "inconclusive", JudgeAA(1.76, 0.35, 0.30))
	require.Equal(t, "inconclusive", JudgeAA(1.00, 0.16, 0.15))
	require.Equal(t, "pass", JudgeAA(1.20, 0.15, 0.15)) // a spread equal to the effect still judges
	require.Equal(t, "FAIL", JudgeAA(math.NaN(), 0.05, 0.10))
	require.Equal(t, "FAIL", JudgeAA(1.0, math.NaN(), 0.10))
}
