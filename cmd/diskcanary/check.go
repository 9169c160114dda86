package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/probes"
)

type checkFlags struct {
	profile    string
	samples    int
	maxP99     time.Duration
	gap        time.Duration
	jsonOut    bool
	blockSize  string
	workingSet string
	keep       bool
	timeout    time.Duration
	minFree    string
}

func newCheckCmd() *cobra.Command {
	f := &checkFlags{}
	cmd := &cobra.Command{
		Use:   "check [DIR]",
		Short: "One-shot fio-style check: is this directory's disk good enough for etcd?",
		Long: `Run a one-shot probe in DIR (default: the current directory) and judge it.

The etcd profile is the daemon's WAL probe: 10,000 sequential 2300-byte
appends into a preallocated segment, fdatasync after each, --gap between
ops as between a busy etcd's appends; it predicts etcd's own WAL fsync
latency, judged on the fdatasync p99 against --max-p99 (etcd asks for
< 10 ms). The fio-etcd profile is the well-known fio recipe, writes back
to back,
  fio --rw=write --ioengine=sync --fdatasync=1 --bs=2300 --size=22m
which reads faster than etcd sees: an fdatasync after a gap costs more.
The randread profile times 4 KiB O_DIRECT reads at random offsets of a
working set pre-written with random data.

Exit status: 0 pass, 1 threshold exceeded, 2 could not measure.`,
		Example: `  diskcanary check /var/lib/etcd
  diskcanary check --profile all --json /mnt/newvolume`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			return f.run(cmd, dir)
		},
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.StringVar(&f.profile, "profile", probes.ProfileEtcd, "etcd (paced like etcd), fio-etcd (back to back, fio's recipe), randread, or all three")
	fl.IntVar(&f.samples, "samples", 10000, "timed operations per profile (p99 needs >= 1,000)")
	fl.DurationVar(&f.maxP99, "max-p99", 10*time.Millisecond, "pass threshold for the p99 latency")
	fl.DurationVar(&f.gap, "gap", config.DefaultWALGap, "etcd profile: pause between one op's end and the next one's start (fio's thinktime)")
	fl.BoolVar(&f.jsonOut, "json", false, "print a machine-readable result")
	fl.StringVar(&f.blockSize, "block-size", "", "bytes per op (default 2300 for etcd, 4096 for randread)")
	fl.StringVar(&f.workingSet, "working-set", "1GiB", "randread working-set size (pre-written with random data)")
	fl.BoolVar(&f.keep, "keep-working-set", false, "keep the randread working set in DIR for the next run")
	fl.StringVar(&f.minFree, "min-free", "1GiB", "refuse to run if free space would drop below this")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "give up (exit 2) after this long, e.g. on a hung disk")
	return cmd
}

// checkJSON is the --json result, exactly as DESIGN.md specifies.
type checkJSON struct {
	Profile    string `json:"profile"`
	Path       string `json:"path"`
	Device     string `json:"device"`
	Filesystem string `json:"filesystem"`
	Samples    int    `json:"samples"`
	// GapSeconds is the pause between WAL ops (etcd profiles only).
	GapSeconds       *float64    `json:"gap_seconds,omitempty"`
	LatencySeconds   latencyJSON `json:"latency_seconds"`
	ThresholdSeconds float64     `json:"threshold_seconds"`
	Pass             bool        `json:"pass"`
}

type latencyJSON struct {
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func (f *checkFlags) run(cmd *cobra.Command, dir string) error {
	var profiles []string
	switch f.profile {
	case probes.ProfileEtcd, probes.ProfileFioEtcd, probes.ProfileRandRead:
		profiles = []string{f.profile}
	case "all":
		profiles = []string{probes.ProfileEtcd, probes.ProfileFioEtcd, probes.ProfileRandRead}
	default:
		return &exitError{2, fmt.Errorf("--profile %q: want etcd, fio-etcd, randread or all", f.profile)}
	}
	if f.gap < 0 {
		return &exitError{2, fmt.Errorf("--gap %v: must not be negative", f.gap)}
	}
	if f.samples < 1 {
		return &exitError{2, fmt.Errorf("--samples must be positive")}
	}
	ws, err := config.ParseByteSize(f.workingSet)
	if err != nil {
		return &exitError{2, fmt.Errorf("--working-set: %w", err)}
	}
	minFree, err := config.ParseByteSize(f.minFree)
	if err != nil {
		return &exitError{2, fmt.Errorf("--min-free: %w", err)}
	}
	// The same confinement as the daemon: never inside an etcd member tree,
	// never loose at the root of a filesystem that holds other data.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return &exitError{2, err}
	}
	if err := config.CheckProbeDir(abs); err != nil {
		return &exitError{2, fmt.Errorf("%w (use an empty subdirectory on the same filesystem)", err)}
	}
	dir = abs
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	out := cmd.OutOrStdout()
	var results []checkJSON
	failed := false
	for _, profile := range profiles {
		bs := int64(config.DefaultWALBlockSize)
		if profile == probes.ProfileRandRead {
			bs = config.DefaultReadBlockSize
		}
		if f.blockSize != "" {
			b, err := config.ParseByteSize(f.blockSize)
			if err != nil || b <= 0 {
				return &exitError{2, fmt.Errorf("--block-size %q: want a positive size", f.blockSize)}
			}
			bs = int64(b)
		}
		res, err := probes.Check(ctx, probes.CheckOptions{
			Dir: dir, Profile: profile, Samples: f.samples, BlockSize: bs, Gap: &f.gap,
			WorkingSet: int64(ws), KeepWorkingSet: f.keep, MinFree: int64(minFree), Timeout: f.timeout,
		})
		if err != nil {
			if errors.Is(err, probes.ErrTimeout) {
				err = fmt.Errorf("gave up after --timeout %v: %w", f.timeout, err)
			}
			return &exitError{2, fmt.Errorf("could not measure %s on %s: %w", profile, dir, err)}
		}
		j := summarize(res, f.maxP99)
		if !j.Pass {
			failed = true
		}
		results = append(results, j)
		if !f.jsonOut {
			printTable(out, res, j, bs)
		}
	}
	if f.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		var v any = results
		if len(results) == 1 {
			v = results[0]
		}
		if err := enc.Encode(v); err != nil {
			return &exitError{2, err}
		}
	}
	if failed {
		return &exitError{1, errors.New("p99 latency over the threshold")}
	}
	return nil
}

func summarize(r *probes.CheckResult, threshold time.Duration) checkJSON {
	l := r.Latencies
	var sum time.Duration
	for _, d := range l {
		sum += d
	}
	j := checkJSON{Profile: r.Profile, Path: r.Path, Device: r.Device, Filesystem: r.Filesystem,
		Samples: len(l), ThresholdSeconds: threshold.Seconds()}
	if r.Gap != nil {
		g := r.Gap.Seconds()
		j.GapSeconds = &g
	}
	if len(l) > 0 {
		j.LatencySeconds = latencyJSON{
			Min: l[0].Seconds(), P50: percentile(l, 50).Seconds(), P90: percentile(l, 90).Seconds(),
			P99: percentile(l, 99).Seconds(), P999: percentile(l, 99.9).Seconds(),
			Max: l[len(l)-1].Seconds(), Mean: (sum / time.Duration(len(l))).Seconds(),
		}
		j.Pass = percentile(l, 99) <= threshold
	}
	return j
}

// percentile is the nearest-rank percentile of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

// printTable prints a fio-like report.
func printTable(w io.Writer, r *probes.CheckResult, j checkJSON, bs int64) {
	where := r.Filesystem
	if r.Device != "" {
		where += " on " + r.Device
	}
	fmt.Fprintf(w, "diskcanary check: %s profile, %s (%s)\n", r.Profile, r.Path, where)
	op := "fdatasync"
	if r.Gap != nil {
		pace := "back to back (fio's etcd recipe: faster than etcd sees)"
		if *r.Gap > 0 {
			pace = fmt.Sprintf("%v between ops (etcd's appends come with gaps)", *r.Gap)
		}
		fmt.Fprintf(w, "  %d sequential %d-byte appends into a preallocated segment, fdatasync after each, %s\n", j.Samples, bs, pace)
		if len(r.Writes) > 0 {
			fmt.Fprintf(w, "  write (not judged): p50=%s p99=%s max=%s\n",
				fmtDur(percentile(r.Writes, 50)), fmtDur(percentile(r.Writes, 99)), fmtDur(r.Writes[len(r.Writes)-1]))
		}
	} else {
		op = "read"
		fmt.Fprintf(w, "  %d random %d-byte O_DIRECT reads over a pre-written working set\n", j.Samples, bs)
	}
	fmt.Fprintf(w, "  %s percentiles (usec):\n", op)
	pcts := []float64{1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99}
	for i := 0; i < len(pcts); i += 4 {
		var cells []string
		for _, p := range pcts[i:min(i+4, len(pcts))] {
			cells = append(cells, fmt.Sprintf("%5.2fth=[%6d]", p, percentile(r.Latencies, p).Microseconds()))
		}
		fmt.Fprintf(w, "     | %s\n", strings.Join(cells, ", "))
	}
	l := j.LatencySeconds
	fmt.Fprintf(w, "  %s: min=%s p50=%s p90=%s p99=%s p99.9=%s max=%s mean=%s\n", op,
		fmtSec(l.Min), fmtSec(l.P50), fmtSec(l.P90), fmtSec(l.P99), fmtSec(l.P999), fmtSec(l.Max), fmtSec(l.Mean))
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "  WARNING: %s\n", warn)
	}
	if r.WorkingSetFile != "" {
		fmt.Fprintf(w, "  working set kept: %s\n", r.WorkingSetFile)
	}
	verdict := "PASS"
	cmp := "<="
	if !j.Pass {
		verdict, cmp = "FAIL", ">"
	}
	fmt.Fprintf(w, "  %s: %s p99 %s %s %s\n\n", verdict, op, fmtSec(l.P99), cmp, fmtSec(j.ThresholdSeconds))
}

func fmtSec(s float64) string { return fmtDur(time.Duration(s * 1e9)) }

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.3fs", d.Seconds())
	}
}
