package read

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Check is what the benches read of `diskcanary check --json`.
type Check struct {
	Profile string       `json:"profile"`
	Samples int          `json:"samples"`
	Latency CheckLatency `json:"latency_seconds"`
	Verdict string       `json:"verdict"`
}

// CheckLatency is the judged op's (fdatasync, or the read) percentiles in
// seconds, as check prints them (nearest rank of its raw samples).
type CheckLatency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

// Seconds converts one of check's values.
func Seconds(s float64) time.Duration { return time.Duration(s * 1e9) }

// ParseCheck reads check's --json output.
func ParseCheck(r io.Reader) (Check, error) {
	var c Check
	if err := json.NewDecoder(r).Decode(&c); err != nil {
		return Check{}, fmt.Errorf("check JSON: %w", err)
	}
	if c.Samples == 0 {
		return Check{}, fmt.Errorf("check JSON: no samples (verdict %q)", c.Verdict)
	}
	return c, nil
}
