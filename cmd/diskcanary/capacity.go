package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"

	"github.com/diskcanary/diskcanary/internal/capacityjson"
	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/process"
	"github.com/diskcanary/diskcanary/probes"
)

// defaultCapacityWriteBudget bounds what a writing sweep writes unless
// --write-budget says otherwise: about half a million 4 KiB writes, the
// R10 steps up to about 100,000 write IOPS, or about 130,000 WAL appends.
const defaultCapacityWriteBudget = 2 << 30

// capacityUsage checks the capacity profile's own flags and returns the
// rates to sweep and the write budget; changed says whether a flag was
// given, bs is --block-size (0: the pattern's default).
func (f *checkFlags) capacityUsage(changed func(string) bool, bs int64) ([]float64, int64, error) {
	rates, err := f.capacityRates(changed)
	if err != nil {
		return nil, 0, err
	}
	if !slices.Contains(probes.CapacityPatterns, f.pattern) {
		return nil, 0, fmt.Errorf("--pattern %q: want %s", f.pattern, strings.Join(probes.CapacityPatterns, ", "))
	}
	if f.pattern == probes.CapacityWAL {
		for _, flag := range []string{"working-set", "keep-working-set"} {
			if changed(flag) {
				return nil, 0, fmt.Errorf("--%s does not apply to --pattern wal: it appends to a segment of its own", flag)
			}
		}
	}
	if f.plot != "" {
		if _, err := capacityjson.PlotFormat(f.plot); err != nil {
			return nil, 0, fmt.Errorf("--plot %w", err)
		}
	}
	b, err := config.ParseByteSize(f.writeBudget)
	if err != nil || b <= 0 {
		return nil, 0, fmt.Errorf("--write-budget %q: want a positive size, e.g. 2GiB", f.writeBudget)
	}
	budget := int64(b)
	if bs == 0 {
		bs = config.DefaultReadBlockSize
		if f.pattern == probes.CapacityWAL {
			bs = config.DefaultWALBlockSize
		}
	}
	// The first step is a sweep's least: a budget under it is a mistake
	// to say before anything is written.
	if per := probes.CapacityBytesPerOp(f.pattern, bs); per > 0 {
		if first := int64(probes.StepOps(rates[0])) * per; first > budget {
			return nil, 0, fmt.Errorf("--write-budget %s: the first step alone (%d ops at %.0f IOPS asked) may write %s", f.writeBudget, probes.StepOps(rates[0]), rates[0], config.ByteSize(first).Show())
		}
	}
	return rates, budget, nil
}

// capacityRates checks the flags every pattern shares and returns the
// rates to sweep.
func (f *checkFlags) capacityRates(changed func(string) bool) ([]float64, error) {
	if changed("samples") {
		return nil, fmt.Errorf("--samples does not apply to --profile capacity: each step takes at least %d ops and at least %v", probes.CapacityMinStepOps, probes.CapacityMinStepTime)
	}
	if changed("gap") {
		return nil, fmt.Errorf("--gap does not apply to --profile capacity: the ops come at the step's rate")
	}
	if f.rates == "" {
		return probes.DefaultCapacityRates, nil
	}
	fields := strings.Split(f.rates, ",")
	if len(fields) > config.MaxCapacitySteps { // said before the list is parsed, and not echoed
		return nil, fmt.Errorf("--rates: %d steps; at most %d", len(fields), config.MaxCapacitySteps)
	}
	var rates []float64
	for _, s := range fields {
		r, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("--rates %q: %q is not an IOPS rate (a number over 0, at most %d)", f.rates, s, probes.MaxCapacityRate)
		}
		rates = append(rates, r)
	}
	if err := config.CheckCapacityRates(rates); err != nil {
		return nil, fmt.Errorf("--rates %q: %w", f.rates, err)
	}
	return rates, nil
}

// capacityJSON is the capacity profile's --json result (diskcanary-plot
// reads it).
type capacityJSON = capacityjson.Result

// runCapacity runs the capacity profile in dir, or on device when set;
// stopped says a signal or the timeout ended it (a read may be hung there).
func (f *checkFlags) runCapacity(ctx context.Context, cmd *cobra.Command, dir, device string, rates []float64, budget int64, ws, minFree config.ByteSize, bs int64) (stopped bool, err error) {
	out := cmd.OutOrStdout()
	status := newStatusLine(cmd.ErrOrStderr(), f.quiet, f.jsonOut)
	start := time.Now()
	res, err := probes.Capacity(ctx, probes.CapacityOptions{
		Dir: dir, Device: device, Pattern: f.pattern, BlockSize: bs, WorkingSet: int64(ws), MinFree: int64(minFree), KeepWorkingSet: f.keep, WriteBudget: budget,
		Rates: rates, MaxP99: f.maxP99, Timeout: f.timeout, AllowUnsafeFS: f.allowUnsafe,
		LayOut: status.progress(probes.ProfileCapacity),
		Step: func(st probes.CapacityStep) {
			if status != nil {
				status.clear()
				fmt.Fprintf(status.w, "capacity: [%.0f IOPS asked][%.1f achieved][p50=%s p99=%s][%s]\n",
					st.AskedIOPS, st.AchievedIOPS, fmtDur(st.P50), fmtDur(st.P99), stepResult(st, f.maxP99))
			}
		},
	})
	status.clear()
	stopped = errors.Is(err, probes.ErrInterrupted) || errors.Is(err, probes.ErrTimeout)
	if errors.Is(err, probes.ErrTimeout) {
		err = fmt.Errorf("--timeout %v: %w", f.timeout, err)
	}
	j := f.summarizeCapacity(res, err, start)
	if f.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(j); err != nil {
			return stopped, &exitError{checkExitNotKnown, err}
		}
	} else {
		f.printCapacity(out, res, j)
	}
	if f.plot != "" && len(j.Steps) > 0 {
		// A picture that could not be drawn fails a pass; a FAIL or a
		// could-not-measure keeps its own exit, the reason said beside it.
		if err := drawPlot(f.plotter, f.plot, j); err != nil {
			if j.Verdict == verdictPass {
				return stopped, &exitError{checkExitNotKnown, err}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "diskcanary check: %v\n", err)
		}
	}
	switch j.Verdict {
	case verdictFail:
		return stopped, &exitError{checkExitExceeded, errors.New("capacity: even the first step broke the bound")}
	case verdictNotKnown:
		return stopped, &exitError{checkExitNotKnown, fmt.Errorf("could not measure capacity on %s: %s", dir, j.Reason)}
	}
	return stopped, nil
}

// plotterName is the binary that draws a capacity curve: the charting
// library lives there, out of the daemon (TestDaemonDoesNotLinkThePlotLibrary).
const plotterName = "diskcanary-plot"

// findPlotter finds diskcanary-plot beside this binary (the release archive
// and the image ship them together), or else in PATH; asked before the
// sweep, so a sweep is never run for a picture that cannot be drawn.
func findPlotter() (string, error) {
	var beside string
	if self, err := os.Executable(); err == nil {
		beside = filepath.Join(filepath.Dir(self), plotterName)
		if p, err := process.LookPath(beside); err == nil {
			return p, nil
		}
	}
	p, err := process.LookPath(plotterName)
	if err != nil {
		return "", fmt.Errorf("--plot needs %s, found neither beside diskcanary (%s) nor in PATH (docs/cli.md#diskcanary-plot)", plotterName, beside)
	}
	return p, nil
}

// plotTimeout bounds diskcanary-plot's run: a picture of a few steps takes
// well under a second, and a wedged plotter must not hold check's exit.
const plotTimeout = 30 * time.Second

// drawPlot hands the sweep's JSON to diskcanary-plot on its stdin, as a
// pipe from --json would, and says why it could not draw. It runs on after
// a Ctrl-C that ended the sweep, to draw the steps done.
func drawPlot(plotter, path string, j capacityJSON) error {
	b, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	res := process.Run(context.Background(), plotter, process.Options{Name: plotterName, Timeout: plotTimeout,
		MaxStdout: 64 << 10, MaxStderr: 64 << 10, Stdin: b}, "-o", path)
	switch {
	case res.Err != nil:
		return fmt.Errorf("--plot %s: %w", path, res.Err)
	case res.TimedOut:
		return fmt.Errorf("--plot %s: %s took over %v and was killed", path, plotter, plotTimeout)
	case res.Code != 0:
		return fmt.Errorf("--plot %s: %s: exit status %d: %s", path, plotter, res.Code, res.Stderr)
	}
	return nil
}

// summarizeCapacity judges a sweep: 0 steps or an error is "could not
// measure" (the steps done are kept), a first step that broke the bound a
// FAIL, a step that held a pass. As check's, a FAIL on a filesystem that
// does not tell the truth stands, a pass there needs --allow-unsafe-fs.
func (f *checkFlags) summarizeCapacity(r *probes.CapacityResult, err error, start time.Time) capacityJSON {
	j := capacityJSON{
		Version: version.Version, StartTime: start.UTC().Format(time.RFC3339), Profile: probes.ProfileCapacity, Pattern: r.Pattern,
		Path: r.Path, Device: r.Device, Filesystem: r.Filesystem, BlockSize: r.BlockSize, Concurrency: r.Concurrency, WrittenBytes: r.Written,
		ThresholdSeconds: f.maxP99.Seconds(), Partial: r.Partial, Steps: []capacityjson.Step{},
		Trusted: r.Untrusted == "", Warnings: append([]string{}, r.Warnings...),
	}
	for _, s := range r.Steps {
		j.Steps = append(j.Steps, capacityjson.Step{
			AskedIOPS: s.AskedIOPS, AchievedIOPS: s.AchievedIOPS, Ops: s.Ops, Missed: s.Missed, DurationSeconds: s.Duration.Seconds(),
			LatencySeconds:    capacityjson.StepLatency{P50: s.P50.Seconds(), P90: s.P90.Seconds(), P99: s.P99.Seconds(), P999: s.P999.Seconds(), Max: s.Max.Seconds()},
			ServiceP99Seconds: s.ServiceP99.Seconds(), PoolFull: s.PoolFull, OverBound: s.OverBound, Short: s.Short, Held: s.Held(),
		})
	}
	if r.Knee >= 0 {
		k := r.Steps[r.Knee]
		j.IOPSAtBound, j.AskedIOPSAtBound = &k.AchievedIOPS, &k.AskedIOPS
	}
	j.BoundReached = r.Knee+1 < len(r.Steps)
	switch {
	case err != nil:
		j.Verdict, j.Reason = verdictNotKnown, err.Error()
	case len(r.Steps) == 0:
		j.Verdict, j.Reason = verdictNotKnown, "no steps"
	case r.Knee < 0:
		j.Verdict = verdictFail
	case r.Untrusted != "" && !f.allowUnsafe:
		j.Verdict, j.Reason = verdictNotKnown, r.Untrusted+" (--allow-unsafe-fs to judge it anyway)"
	default:
		j.Verdict = verdictPass
		if r.Untrusted != "" {
			j.Warnings = append(j.Warnings, "accepted with --allow-unsafe-fs: this capacity does not describe a disk")
		}
		switch {
		case r.BudgetEnded:
			j.Warnings = append(j.Warnings, fmt.Sprintf("the write budget ended the sweep before a step broke the bound: the disk holds at least %.0f IOPS; a larger --write-budget goes further", *j.IOPSAtBound))
		case !j.BoundReached:
			j.Warnings = append(j.Warnings, fmt.Sprintf("no step broke the bound: the disk holds at least %.0f IOPS; ask higher --rates to find its bound", *j.IOPSAtBound))
		}
	}
	j.Pass = j.Verdict == verdictPass
	return j
}

// stepResult says whether a step held, and if not why.
func stepResult(s probes.CapacityStep, bound time.Duration) string {
	var why []string
	if s.OverBound {
		why = append(why, "p99 over "+fmtDur(bound))
	}
	if s.Short {
		why = append(why, "rate short")
	}
	if len(why) == 0 {
		return "held"
	}
	return strings.Join(why, ", ")
}

// printCapacity prints the curve as a table and the answer under it.
func (f *checkFlags) printCapacity(w io.Writer, r *probes.CapacityResult, j capacityJSON) {
	where := r.Filesystem
	switch {
	case r.OnDevice:
		where = strings.TrimSpace("block device " + r.Device)
	case r.Device != "":
		where += " on " + r.Device
	}
	fmt.Fprintf(w, "diskcanary check: capacity profile, %s pattern, %s (%s)\n", j.Pattern, r.Path, where)
	switch {
	case j.BlockSize == 0: // nothing was opened: no op to describe
	case r.OnDevice:
		fmt.Fprintf(w, "  random %d-byte O_DIRECT reads over the whole device, read in place (nothing written), open loop, up to %d outstanding;\n", j.BlockSize, j.Concurrency)
	case j.Pattern == probes.CapacityRandWrite:
		fmt.Fprintf(w, "  random %d-byte O_DIRECT writes into a pre-written working set, open loop, up to %d outstanding;\n", j.BlockSize, j.Concurrency)
	case j.Pattern == probes.CapacityWAL:
		fmt.Fprintf(w, "  %d-byte appends into a preallocated segment, fdatasync after each, open loop, one writer;\n", j.BlockSize)
	default:
		fmt.Fprintf(w, "  random %d-byte O_DIRECT reads over a pre-written working set, open loop, up to %d outstanding;\n", j.BlockSize, j.Concurrency)
	}
	if j.BlockSize > 0 {
		fmt.Fprintf(w, "  latency from each op's scheduled start\n")
	}
	if len(r.Steps) > 0 {
		fmt.Fprintf(w, "  %10s %10s %10s %10s %10s %10s  %s\n", "asked", "achieved", "p50", "p90", "p99", "p99.9", "result")
	}
	for _, s := range r.Steps {
		fmt.Fprintf(w, "  %10.0f %10.1f %10s %10s %10s %10s  %s\n", s.AskedIOPS, s.AchievedIOPS,
			fmtDur(s.P50), fmtDur(s.P90), fmtDur(s.P99), fmtDur(s.P999), stepResult(s, time.Duration(j.ThresholdSeconds*1e9)))
	}
	for _, warn := range j.Warnings {
		fmt.Fprintf(w, "  WARNING: %s\n", warn)
	}
	if r.WorkingSetFile != "" {
		fmt.Fprintf(w, "  working set kept: %s\n", r.WorkingSetFile)
	}
	if j.Pattern != probes.CapacityRandRead {
		fmt.Fprintf(w, "  written: %s of the --write-budget %s\n", config.ByteSize(j.WrittenBytes).Show(), f.writeBudget)
	}
	bound := fmtSec(j.ThresholdSeconds)
	if r.Knee >= 0 {
		k := r.Steps[r.Knee]
		fmt.Fprintf(w, "  IOPS at the p99 bound of %s: %.0f (asked %.0f, p99 %s)", bound, k.AchievedIOPS, k.AskedIOPS, fmtDur(k.P99))
		if j.BoundReached {
			n := r.Steps[r.Knee+1]
			fmt.Fprintf(w, "; the next step, %.0f asked, broke it (%.1f achieved, p99 %s)", n.AskedIOPS, n.AchievedIOPS, fmtDur(n.P99))
		}
		fmt.Fprintln(w)
	}
	switch j.Verdict {
	case verdictPass:
		fmt.Fprintf(w, "  PASS: %d of %d steps held\n\n", r.Knee+1, len(r.Steps))
	case verdictFail:
		f := r.Steps[0]
		fmt.Fprintf(w, "  FAIL: the first step, %.0f IOPS asked, broke the bound (%s)\n\n", f.AskedIOPS, stepResult(f, time.Duration(j.ThresholdSeconds*1e9)))
	default:
		fmt.Fprintf(w, "  COULD NOT MEASURE: %s\n\n", j.Reason)
	}
}
