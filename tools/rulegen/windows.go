package rulegen

import (
	"fmt"
	"time"
)

// The 15-minute histogram windows, built from increases recorded once a
// step. A quantile over rate(x_bucket[15m]) re-reads a quarter hour of
// every raw bucket each time it runs, the costliest rules at fleet scale.
// Instead each 15-minute group records every bucket's increase over one
// step (its own interval), summed to the labels the quantile keeps, and
// takes the quantile of sum_over_time of the last 15m/step of them: each
// raw sample is read about once, the quantile a handful of recorded
// samples. Both run in the group that records the increases, right after
// them, so they never read another group's output before its first run.

// window15m is the window the stepped sums cover.
const window15m = 15 * time.Minute

// windowStep is the step the 15-minute figures are summed from: the
// groups' own interval, so that consecutive recorded increases tile the
// window. It must be whole minutes (promtool evaluates every group at the
// test's 1 m interval, and the sum must tile there too), divide 15 m, and
// stay under the 5 m lookback other groups read the results with. 0 (any
// other Interval15m, as the end-to-end tests' 1 s evaluations): the
// figures come from the raw buckets.
func (p Params) windowStep() time.Duration {
	s := p.Interval15m
	if s < time.Minute || s%time.Minute != 0 || window15m%s != 0 || s >= 5*time.Minute {
		return 0
	}
	return s
}

// increaseRule names the per-step bucket increases of metric (a
// histogram's base name) at level.
func increaseRule(level, metric string, step time.Duration) string {
	return fmt.Sprintf("%s:%s_bucket:increase%s", level, metric, promDuration(step))
}

// stepWindow is the range that holds the last 15m/step recorded steps of
// a series recorded every step by the group reading it: 15 minutes less a
// second, so the step recorded exactly 15 minutes ago (inside a closed
// range) is out.
func stepWindow() string {
	w := window15m - time.Second
	return fmt.Sprintf("%dm%ds", w/time.Minute, (w%time.Minute)/time.Second)
}

// steppedQuantile is the q-quantile over 15 minutes of inc, a recorded
// per-step bucket increase. Where the group runs every step the range
// holds exactly the steps that tile the window; where it runs more often
// (promtool's 1 m evaluations) it holds overlapping steps, which weight
// the window's edges less but, a quantile being a ratio of bucket counts,
// give a steady histogram's quantile exactly.
func steppedQuantile(q, inc string) string {
	return fmt.Sprintf("histogram_quantile(%s, sum_over_time(%s[%s]))", q, inc, stepWindow())
}
