package rulegen

import (
	"fmt"
	"strings"
	"time"
)

// The 15-minute histogram windows, built from increases recorded once a
// step. A quantile over rate(x_bucket[15m]) re-reads a quarter hour of
// every raw bucket each time it runs, the costliest rules at fleet scale;
// recording each bucket's increase over one step (aggregated to the labels
// the quantile keeps) and adding the last 15m/step of them reads each raw
// sample about once, and the quantile a handful of recorded ones. The sum
// runs in the group that records the increases, right after them, so it
// never reads another group's output before that group's first run.

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

// steppedSum is the 15-minute increase of the recorded per-step series
// sel: the latest step's increase plus the steps before it, each taken at
// its offset. A step not recorded yet (the first minutes after the rules
// are loaded, a gap) counts as no samples, as the raw window would have
// none there, rather than hiding the whole window.
func steppedSum(sel string, step time.Duration) string {
	terms := []string{sel}
	for k := 1; k < int(window15m/step); k++ {
		off := fmt.Sprintf("%s offset %s", sel, promDuration(time.Duration(k)*step))
		terms = append(terms, fmt.Sprintf("(%s or %s * 0)", off, sel))
	}
	return strings.Join(terms, "\n+ ")
}
