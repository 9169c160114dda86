// Package read reads what the benchmarks' tools print: fio's JSON, hey's
// summary, iostat's reports, `diskcanary check --json` and --lat-log,
// `go test -bench` results, bpftrace's traced durations, text expositions
// (diskcanary's, node_exporter's) and the daemon's native histograms, into
// typed values, so no bench parses a tool's output twice or by hand.
package read

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// FIO is fio's --output-format=json or json+ (fio 3.x).
type FIO struct {
	Version string   `json:"fio version"`
	Jobs    []FIOJob `json:"jobs"`
}

// FIOJob is one job's results.
type FIOJob struct {
	Name string `json:"jobname"`
	// RuntimeMS is the job's run time in milliseconds.
	RuntimeMS float64 `json:"job_runtime"`
	Read      FIODir  `json:"read"`
	Write     FIODir  `json:"write"`
	// Sync holds the fdatasyncs of --fdatasync=N, timed as one latency.
	Sync FIODir `json:"sync"`
}

// FIODir is one direction's (read, write, sync) counts and latencies.
type FIODir struct {
	TotalIOs int `json:"total_ios"`
	// Lat is submission to completion, Clat completion only; for
	// synchronous engines (sync, psync) the two differ by fio's own
	// bookkeeping. Percentiles are where fio was asked for them: the
	// sync direction's Lat, the other directions' Clat.
	Lat  FIOLatency `json:"lat_ns"`
	Clat FIOLatency `json:"clat_ns"`
}

// FIOLatency is one latency distribution, in nanoseconds.
type FIOLatency struct {
	N    int     `json:"N"`
	Mean float64 `json:"mean"`
	// Percentile is keyed by fio's own "%f" spelling ("99.000000"). fio
	// computes them from its log-linear histogram (at most ~1.6 % wide per
	// bucket), the value of the bucket that holds the nearest rank.
	Percentile map[string]float64 `json:"percentile"`
	// Bins is that histogram itself (json+ only): each bucket's value in
	// nanoseconds, as fio prints it, and its count.
	Bins map[string]int64 `json:"bins"`
}

// P is the p-th percentile (50, 99, 99.9), an error when fio did not
// report it.
func (l FIOLatency) P(p float64) (time.Duration, error) {
	v, ok := l.Percentile[fmt.Sprintf("%f", p)]
	if !ok {
		return 0, fmt.Errorf("fio reported no %g th percentile here", p)
	}
	return time.Duration(v), nil
}

// ParseFIO reads fio's JSON output, which must hold exactly one job: the
// benches run one job per fio invocation.
func ParseFIO(r io.Reader) (FIOJob, error) {
	var f FIO
	if err := json.NewDecoder(r).Decode(&f); err != nil {
		return FIOJob{}, fmt.Errorf("fio JSON: %w", err)
	}
	if len(f.Jobs) != 1 {
		return FIOJob{}, fmt.Errorf("fio JSON: %d jobs, want 1", len(f.Jobs))
	}
	return f.Jobs[0], nil
}
