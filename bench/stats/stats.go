// Package stats is the benchmarks' arithmetic: medians over rounds, the
// paired ratio a verdict judges, and the bounds it is judged against.
//
// Percentiles of raw samples are not here: probes.Percentile is the
// project's one (nearest rank, fio's rule), and the daemon's histograms are
// read with Prometheus's own histogram_quantile (bench/read).
package stats

import (
	"fmt"
	"math"
	"slices"
)

// Median is the middle value, or the mean of the two middle values of an
// even count; NaN for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// PairedRatio is the median over rounds of x[i]/ref[i], rounds whose
// reference is not positive left out; NaN when none is left. Each round
// runs the two back to back, so the device's drift over a whole run (often
// ±10 % on a shared VM) cancels out of every pair, which a ratio of the two
// medians would keep.
func PairedRatio(x, ref []float64) float64 {
	if len(x) != len(ref) {
		panic(fmt.Sprintf("stats: %d rounds against %d", len(x), len(ref)))
	}
	var r []float64
	for i := range x {
		if ref[i] > 0 {
			r = append(r, x[i]/ref[i])
		}
	}
	return Median(r)
}

// Bound is the range a ratio must fall in.
type Bound struct {
	Lo, Hi float64
}

// Within is 1 ± tol: "measures the same".
func Within(tol float64) Bound { return Bound{1 - tol, 1 + tol} }

// AtMost is at most max: "no slower" (a one-sided bound, for what could
// only add to a measurement).
func AtMost(max float64) Bound { return Bound{math.Inf(-1), max} }

// Holds says whether r is in the bound; NaN (nothing to compare) is not.
func (b Bound) Holds(r float64) bool { return r >= b.Lo && r <= b.Hi }

func (b Bound) String() string {
	if math.IsInf(b.Lo, -1) {
		return fmt.Sprintf("≤ ×%.2f", b.Hi)
	}
	return fmt.Sprintf("±%.0f %%", (b.Hi-b.Lo)/2*100)
}

// Verdict is "ok" when the ratio holds, else "OUT OF RANGE", with the
// bound, as every comparison table prints it.
func (b Bound) Verdict(r float64) string {
	if b.Holds(r) {
		return "ok (" + b.String() + ")"
	}
	return "OUT OF RANGE (" + b.String() + ")"
}

// VerdictBesideAA is Verdict(r) beside aa, a reference tool's ratio to a
// second run of itself (an A/A run): when both miss the bound, the bound
// is below the machine's noise and the verdict says so. It stays a miss:
// noise that large hides a real difference as well as it makes one up.
func (b Bound) VerdictBesideAA(r, aa float64) string {
	v := b.Verdict(r)
	if !b.Holds(r) && !b.Holds(aa) {
		v += "; so is the A/A run beside it: the bound is below this machine's noise"
	}
	return v
}

// AAWiden is how far a bound may be widened beyond the reference's A/A
// spread: at most 5 points (issue 44's decision).
const AAWiden = 0.05

// AASpread is how far a percentile of the reference read in one set of
// windows lies from the same percentile in the adjacent windows of the
// same run: |a/b - 1|. NaN when b is not positive.
func AASpread(a, b float64) float64 {
	if !(b > 0) {
		return math.NaN()
	}
	return math.Abs(a/b - 1)
}

// AABound is the bound a ratio to the reference is held to: the
// reference's A/A spread, widened by AAWiden.
func AABound(aa float64) Bound { return Within(aa + AAWiden) }

// JudgeAA judges ratio r (a source over the reference timed in the same
// minutes) by the reference's A/A spread aa: "inconclusive" when aa is
// wider than effect, the smallest difference the comparison looks for
// (the reference's own noise would hide it, or make it up); else "pass"
// inside AABound(aa), "FAIL" outside. A NaN ratio or spread is a FAIL:
// nothing was compared.
func JudgeAA(r, aa, effect float64) string {
	switch {
	case math.IsNaN(r) || math.IsNaN(aa):
		return "FAIL"
	case aa > effect:
		return "inconclusive"
	case AABound(aa).Holds(r):
		return "pass"
	}
	return "FAIL"
}
