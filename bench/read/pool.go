package read

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Pool pools the latencies of several runs as one run that took them all
// would have counted them: value (ns) to count. fio's runs come as its
// json+ bins, check's as its --lat-log ops.
type Pool map[int64]int64

// AddFIO pools one fio run's latencies; an error when fio printed no bins
// (not json+, or no ops).
func (p Pool) AddFIO(l FIOLatency) error {
	if len(l.Bins) == 0 {
		return fmt.Errorf("fio printed no latency bins (run with --output-format=json+)")
	}
	for v, n := range l.Bins {
		ns, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("fio latency bin %q: %w", v, err)
		}
		p[ns] += n
	}
	return nil
}

// AddLatLog pools the ops of `diskcanary check --lat-log`'s log
// (profile,job,op,latency_ns after a header line), every job's.
func (p Pool) AddLatLog(r io.Reader) error {
	s := bufio.NewScanner(r)
	if !s.Scan() || s.Text() != "profile,job,op,latency_ns" {
		return fmt.Errorf("check's latency log: no header line")
	}
	for line := 2; s.Scan(); line++ {
		f := strings.Split(s.Text(), ",")
		if len(f) != 4 {
			return fmt.Errorf("check's latency log, line %d: %d fields, want 4", line, len(f))
		}
		ns, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return fmt.Errorf("check's latency log, line %d: %w", line, err)
		}
		p.Add(time.Duration(ns))
	}
	return s.Err()
}

// Add pools one op's latency.
func (p Pool) Add(d time.Duration) { p[int64(d)]++ }

// AddPool pools the ops of another pool.
func (p Pool) AddPool(o Pool) {
	for v, n := range o {
		p[v] += n
	}
}

// Count is the number of ops pooled.
func (p Pool) Count() int64 {
	var n int64
	for _, c := range p {
		n += c
	}
	return n
}

// P is the pooled p-th percentile by fio's rule, which check follows: the
// first value at which the running count reaches p % of all ops (the
// nearest rank). 0 for an empty pool.
func (p Pool) P(pct float64) time.Duration {
	want := pct / 100 * float64(p.Count())
	var seen int64
	for _, v := range slices.Sorted(maps.Keys(p)) {
		seen += p[v]
		if float64(seen) >= want {
			return time.Duration(v)
		}
	}
	return 0
}
