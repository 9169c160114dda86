// Package capacityjson is the JSON object `diskcanary check --profile
// capacity --json` prints (docs/contract.md#check): written by the daemon
// binary and read by diskcanary-plot, which draws it without linking the
// probes, so the daemon does not carry the charting library.
package capacityjson

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Profile is the value of "profile" in a capacity sweep.
const Profile = "capacity"

// Result is one pattern's sweep: the IOPS at the bound, the step that
// broke it, and every step.
type Result struct {
	Version   string `json:"version"`
	StartTime string `json:"start_time"`
	Profile   string `json:"profile"`
	// Pattern is what the sweep offered: randread, randwrite or wal.
	Pattern          string  `json:"pattern"`
	Path             string  `json:"path"`
	Device           string  `json:"device"`
	Filesystem       string  `json:"filesystem"`
	BlockSize        int64   `json:"block_size"`
	Concurrency      int     `json:"concurrency"`
	ThresholdSeconds float64 `json:"threshold_seconds"`
	// IOPSAtBound is the achieved rate of the last step that held (null
	// when none did); AskedIOPSAtBound what that step asked.
	IOPSAtBound      *float64 `json:"iops_at_bound"`
	AskedIOPSAtBound *float64 `json:"asked_iops_at_bound"`
	// BoundReached: a step broke the bound (the next step after the knee);
	// false when the rates ran out first, so the IOPS at the bound is a
	// floor.
	BoundReached bool     `json:"bound_reached"`
	Partial      bool     `json:"partial"`
	Steps        []Step   `json:"steps"`
	Pass         bool     `json:"pass"`
	Verdict      string   `json:"verdict"`
	Reason       string   `json:"reason,omitempty"`
	Trusted      bool     `json:"trusted"`
	Warnings     []string `json:"warnings"`
	// WrittenBytes is what the steps wrote, as --write-budget counts it
	// (0 for reads).
	WrittenBytes int64 `json:"written_bytes"`
}

// Step is one rate of the sweep.
type Step struct {
	AskedIOPS       float64 `json:"asked_iops"`
	AchievedIOPS    float64 `json:"achieved_iops"`
	Ops             int     `json:"ops"`
	Missed          int     `json:"missed"`
	DurationSeconds float64 `json:"duration_seconds"`
	// LatencySeconds run from each op's scheduled start.
	LatencySeconds    StepLatency `json:"latency_seconds"`
	ServiceP99Seconds float64     `json:"service_p99_seconds"`
	PoolFull          bool        `json:"pool_full"`
	OverBound         bool        `json:"over_bound"`
	Short             bool        `json:"short"`
	Held              bool        `json:"held"`
}

// StepLatency is a step's percentiles, in seconds.
type StepLatency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// Knee is the index of the last step that held before the first that did
// not, -1 when the first did not (or there are none).
func (r *Result) Knee() int {
	for i, s := range r.Steps {
		if !s.Held {
			return i - 1
		}
	}
	return len(r.Steps) - 1
}

// PlotFormat refuses a picture's path that could not be written (an
// unknown format, a symlink, something other than a regular file, a
// missing directory) and returns its format, "svg" or "png". Both binaries
// ask it before anything is read or measured, so a sweep is never run for a
// picture that cannot be drawn.
func PlotFormat(path string) (string, error) {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	if format != "svg" && format != "png" {
		return "", fmt.Errorf("%s: want a .svg or .png file", path)
	}
	fi, err := os.Lstat(path)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return "", fmt.Errorf("%s: is a symlink; not followed: name the file itself", path)
	case err == nil && !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s: is not a regular file (%v)", path, fi.Mode().Type())
	case err == nil:
		return format, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s: directory %s does not exist", path, filepath.Dir(path))
	}
	return format, nil
}
