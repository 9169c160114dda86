package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/probes"
)

type checkFlags struct {
	profile     string
	samples     int
	maxP99      time.Duration
	gap         time.Duration
	jsonOut     bool
	blockSize   string
	workingSet  string
	keep        bool
	timeout     time.Duration
	minFree     string
	allowUnsafe bool
	jobs        int
	latLog      string
	quiet       bool
	rates       string
	pattern     string
	writeBudget string
	plot        string
	plotter     string // diskcanary-plot's path, found for --plot
}

// maxCheckJobs bounds --jobs: each job holds an OS thread and a P in raw
// syscalls for the whole run.
const maxCheckJobs = 16

// maxCheckSamples bounds --samples summed over --jobs, checked before any
// buffer is sized: every sample costs about 64 bytes held for the whole run
// (the recorder's slices, the status line's copy, the sorted and in-order
// results), so the bound is ~64 MB, and a million fdatasyncs at 1 ms take
// 17 minutes, past the default --timeout. A p99.99 needs 10,000.
const maxCheckSamples = 1_000_000

// check's exit statuses besides 0 (pass) and exitUsage.
const (
	checkExitExceeded = 1
	checkExitNotKnown = 2 // could not measure
)

// Verdicts, as --json spells them.
const (
	verdictPass     = "pass"
	verdictFail     = "fail"
	verdictNotKnown = "could not measure"
)

// minP99Samples is docs/contract.md, measurement rule 1: a p99 needs 1,000 samples behind it;
// with fewer than 100 it is the maximum.
const minP99Samples = 1000

func newCheckCmd() *cobra.Command {
	f := &checkFlags{}
	cmd := &cobra.Command{
		Use:   "check [DIR]",
		Short: "One-shot fio-style check: is this directory's disk good enough for etcd?",
		Long: `Run a one-shot probe in DIR (default: the current directory) and judge it.
A DIR that does not exist is created for the run (mode 0700, never its
parents) and removed after it, unless a kept working set is in it or the
run was stopped (Ctrl-C, --timeout).

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

The capacity profile finds how many IOPS the disk gives while the p99
stays within --max-p99 (10ms by default, for every pattern), for one
--pattern: randread (the default; 4 KiB O_DIRECT random reads over the
randread working set, up to 32 outstanding), randwrite (4 KiB O_DIRECT
random writes into that working set, written beforehand, up to 32
outstanding) or wal (etcd's WAL: 2300-byte appends, an fdatasync after
each, one writer). Each rate of --rates is offered open loop in turn
(each op due at its time whatever became of the ones before it, and
timed from then, so a queue shows in the latency), each step at least
1,000 ops and 1 s. It stops at the first step whose p99 is over
--max-p99 or whose achieved rate is under 90 % of the asked one, or
before a step that could write past --write-budget, and reports the
IOPS at the bound (the last step that held), the step that broke it and
the curve. --plot FILE.svg (or .png) draws the curve there, through
diskcanary-plot (beside diskcanary or in PATH), as it draws a saved
--json output; a picture that could not be drawn makes a pass exit 2.
Exit 0 when a step held, 1 when even the first broke the bound. Given a block
device in place of DIR (as root), the randread pattern reads the whole
device in place, read-only; the other patterns refuse one.

A FAIL is reported as soon as it is certain: once more samples are over
--max-p99 than the p99 allows of --samples (101 of 10,000), the run stops
and prints the percentiles of the samples taken, marked partial. Ctrl-C,
SIGTERM and --timeout stop the run the same way (exit 2), and the probe
files are removed.

--jobs N runs N etcd-pattern writers at once in DIR, each on its own
file and each taking --samples samples, and judges the worst job's p99
(OpenShift's assisted installer runs fio's etcd recipe twice at once to
simulate overload). A status line on stderr shows the working-set write
(bytes, rate) and then the ops done, the p50 and p99 so far and the time
left: rewritten in place on a terminal, one plain line every 10 s
elsewhere (a CI log), as fio --eta=always does, --json or not (stdout
stays the JSON alone). --json on a terminal and --quiet turn it off.

A filesystem that does not tell the truth about the disk (tmpfs, overlayfs,
FUSE, ZFS, NFS, a loop device whose file is on one of those, a flush that
reaches no device, O_DIRECT refused) is never a pass: its FAIL stands
(etcd there would see that latency), its pass is "could not measure"
unless --allow-unsafe-fs accepts it, and the output then says the verdict
does not describe a disk.

Sizes take fio's spellings: 4k, 22m, 1G (k, m, g: powers of 1024), 4KiB,
1GiB, or 1GB (10^9).

Exit status:
  0   pass: the p99 is within --max-p99
  1   threshold exceeded (for --profile all: any profile)
  2   could not measure, with a one-line reason on stderr: the directory
      cannot be used, an I/O error, interrupted, --timeout, or a
      filesystem that does not tell the truth
  64  usage error (unknown flag, bad value, more than one directory)`,
		Example: `  diskcanary check /var/lib/etcd
  diskcanary check --profile all --json /mnt/newvolume
  diskcanary check --profile randread --block-size 4k --working-set 1G /mnt/newvolume
  diskcanary check --profile capacity --plot curve.svg /mnt/newvolume
  diskcanary check --profile capacity --pattern wal /var/lib/etcd-canary
  diskcanary check --profile capacity /dev/disk/by-id/nvme-Example_SN123`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return fmt.Errorf("check takes one directory, got %d: %q", len(args), args)
			}
			return nil
		},
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
	fl.StringVar(&f.profile, "profile", probes.ProfileEtcd, "etcd (paced like etcd), fio-etcd (back to back, fio's recipe), randread, all three, or capacity (the IOPS of a --pattern at the p99 bound)")
	fl.IntVar(&f.samples, "samples", 10000, "timed operations per profile (p99 needs >= 1,000)")
	fl.DurationVar(&f.maxP99, "max-p99", 10*time.Millisecond, "pass threshold for the p99 latency")
	fl.DurationVar(&f.gap, "gap", config.DefaultWALGap, "etcd profile: pause between one op's end and the next one's start (fio's thinktime)")
	fl.BoolVar(&f.jsonOut, "json", false, "print a machine-readable result")
	fl.StringVar(&f.blockSize, "block-size", "", fmt.Sprintf("bytes per op, e.g. 2300 or 4k (default %d for etcd, %s for randread)",
		config.DefaultWALBlockSize, config.ByteSize(config.DefaultReadBlockSize).Show()))
	fl.StringVar(&f.workingSet, "working-set", config.ByteSize(config.DefaultWorkingSet).Show(), "randread and capacity: working-set size, e.g. 1G (pre-written with random data)")
	fl.BoolVar(&f.keep, "keep-working-set", false, "keep the randread and capacity working set in DIR for the next run")
	fl.StringVar(&f.minFree, "min-free", config.ByteSize(config.DefaultMinFree).Show(), "refuse to run if free space would drop below this")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "per profile: stop after this long and report the samples taken (exit 2)")
	fl.IntVar(&f.jobs, "jobs", 1, "etcd profiles: concurrent writers in DIR, each on its own file, judged on the worst p99")
	fl.StringVar(&f.latLog, "lat-log", "", "write every timed op's latency to this file, one line per op in the order taken (profile,job,op,latency_ns), as fio's --write_lat_log does; created once samples are in, an existing file replaced (stderr says so), a symlink refused")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no status on stderr (by default a line rewritten in place on a terminal, one line every 10s elsewhere)")
	fl.StringVar(&f.pattern, "pattern", probes.CapacityRandRead, "capacity profile: randread (4 KiB O_DIRECT random reads), randwrite (4 KiB O_DIRECT random writes into the working set) or wal (2300-byte appends + fdatasync, one writer)")
	fl.StringVar(&f.rates, "rates", "", "capacity profile: the IOPS asked of each step, rising, e.g. 100,200,400 (default the R10 series 100,125,160,...,1000000)")
	fl.StringVar(&f.plot, "plot", "", "capacity profile: draw the curve to FILE.svg or FILE.png (with diskcanary-plot)")
	fl.StringVar(&f.writeBudget, "write-budget", config.ByteSize(defaultCapacityWriteBudget).Show(), "capacity profile, randwrite and wal: the most the steps may write; the sweep ends before a step that could pass it")
	fl.BoolVar(&f.allowUnsafe, "allow-unsafe-fs", false, "judge a filesystem that does not tell the truth about the disk (tmpfs, overlayfs, FUSE, ZFS, NFS, no O_DIRECT) instead of exiting 2; the output says the verdict does not describe a disk")
	return cmd
}

// checkJSON is the --json result: docs/contract.md's keys, then what a script
// needs to trust it. Every profile has every key (null where it does not
// apply), so one parser reads them all.
type checkJSON struct {
	Version        string `json:"version"`
	StartTime      string `json:"start_time"`
	Profile        string `json:"profile"`
	Path           string `json:"path"`
	Device         string `json:"device"`
	Filesystem     string `json:"filesystem"`
	Samples        int    `json:"samples"`
	PlannedSamples int    `json:"planned_samples"`
	Partial        bool   `json:"partial"`
	// GapSeconds is the pause between WAL ops (etcd profiles only).
	GapSeconds *float64 `json:"gap_seconds"`
	// Jobs ran at once; the latencies are the worst job's, JobP99Seconds
	// every job's p99.
	Jobs           int         `json:"jobs"`
	JobP99Seconds  []float64   `json:"job_p99_seconds"`
	LatencySeconds latencyJSON `json:"latency_seconds"`
	// WriteLatencySeconds is the WAL profiles' pwrite, not judged.
	WriteLatencySeconds *latencyJSON `json:"write_latency_seconds"`
	ThresholdSeconds    float64      `json:"threshold_seconds"`
	Pass                bool         `json:"pass"`
	Verdict             string       `json:"verdict"`
	Reason              string       `json:"reason,omitempty"`
	// Trusted is false on a filesystem that does not tell the truth about
	// the disk (then Warnings says why).
	Trusted  bool     `json:"trusted"`
	Warnings []string `json:"warnings"`
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

// usage checks the flags and returns the profiles to run and the sizes.
func (f *checkFlags) usage() (profiles []string, ws, minFree config.ByteSize, bs int64, err error) {
	switch f.profile {
	case probes.ProfileEtcd, probes.ProfileFioEtcd, probes.ProfileRandRead:
		profiles = []string{f.profile}
	case "all":
		profiles = []string{probes.ProfileEtcd, probes.ProfileFioEtcd, probes.ProfileRandRead}
	case probes.ProfileCapacity:
		profiles = []string{f.profile}
		if f.jobs != 1 {
			return nil, 0, 0, 0, fmt.Errorf("--jobs applies to the etcd profiles (concurrent writers), not capacity (--pattern sets the ops outstanding)")
		}
		if f.latLog != "" {
			return nil, 0, 0, 0, fmt.Errorf("--lat-log applies to the etcd and randread profiles, not capacity")
		}
	default:
		return nil, 0, 0, 0, fmt.Errorf("--profile %q: want etcd, fio-etcd, randread, all or capacity", f.profile)
	}
	if f.profile != probes.ProfileCapacity && (f.rates != "" || f.pattern != probes.CapacityRandRead || f.writeBudget != config.ByteSize(defaultCapacityWriteBudget).Show() || f.plot != "") {
		return nil, 0, 0, 0, fmt.Errorf("--rates, --pattern, --write-budget and --plot apply to --profile capacity")
	}
	if f.gap < 0 {
		return nil, 0, 0, 0, fmt.Errorf("--gap %v: must not be negative", f.gap)
	}
	if f.jobs < 1 || f.jobs > maxCheckJobs {
		return nil, 0, 0, 0, fmt.Errorf("--jobs %d: want 1 to %d", f.jobs, maxCheckJobs)
	}
	if f.samples < 1 || f.samples > maxCheckSamples/f.jobs {
		if f.jobs > 1 {
			return nil, 0, 0, 0, fmt.Errorf("--samples %d with --jobs %d: want 1 to %d per job (%d samples in all at most)", f.samples, f.jobs, maxCheckSamples/f.jobs, maxCheckSamples)
		}
		return nil, 0, 0, 0, fmt.Errorf("--samples %d: want 1 to %d", f.samples, maxCheckSamples)
	}
	if f.jobs > 1 && f.profile == probes.ProfileRandRead {
		return nil, 0, 0, 0, fmt.Errorf("--jobs applies to the etcd profiles (concurrent writers), not randread")
	}
	if f.maxP99 <= 0 {
		return nil, 0, 0, 0, fmt.Errorf("--max-p99 %v: must be positive", f.maxP99)
	}
	if ws, err = config.ParseByteSize(f.workingSet); err != nil {
		return nil, 0, 0, 0, fmt.Errorf("--working-set: %w", err)
	}
	if minFree, err = config.ParseByteSize(f.minFree); err != nil {
		return nil, 0, 0, 0, fmt.Errorf("--min-free: %w", err)
	}
	if f.blockSize != "" {
		b, err := config.ParseByteSize(f.blockSize)
		if err != nil || b <= 0 || b > config.MaxBlockSize {
			return nil, 0, 0, 0, fmt.Errorf("--block-size %q: want a positive size up to %s, e.g. 2300 or 4k", f.blockSize, config.MaxBlockSize.Show())
		}
		bs = int64(b)
	}
	return profiles, ws, minFree, bs, nil
}

func (f *checkFlags) run(cmd *cobra.Command, dir string) error {
	profiles, ws, minFree, blockSize, err := f.usage()
	if err != nil {
		return &exitError{exitUsage, err}
	}
	var rates []float64
	var budget int64
	if f.profile == probes.ProfileCapacity {
		if rates, budget, err = f.capacityUsage(cmd.Flags().Changed, blockSize); err != nil {
			return &exitError{exitUsage, err}
		}
		if f.plot != "" {
			if f.plotter, err = findPlotter(); err != nil {
				return &exitError{checkExitNotKnown, err}
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if f.profile == probes.ProfileCapacity && isBlockDevice(dir) {
		// Read in place, read-only, as the daemon's device read probe:
		// nothing is laid out, nothing written.
		if f.pattern != probes.CapacityRandRead {
			return &exitError{exitUsage, fmt.Errorf("--pattern %s on %s: a block device is only read (--pattern randread), never written", f.pattern, dir)}
		}
		for _, flag := range []string{"working-set", "keep-working-set"} {
			if cmd.Flags().Changed(flag) {
				return &exitError{exitUsage, fmt.Errorf("--%s does not apply to a block device: the reads span the whole device", flag)}
			}
		}
		_, err = f.runCapacity(ctx, cmd, dir, dir, rates, budget, ws, minFree, blockSize)
		return err
	}
	// The same confinement as the daemon: never inside an etcd member tree,
	// never loose at the root of a filesystem that holds other data.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return &exitError{checkExitNotKnown, err}
	}
	if err := probes.CheckProbeDir(abs); err != nil {
		return &exitError{checkExitNotKnown, fmt.Errorf("%w (use an empty subdirectory on the same filesystem)", err)}
	}
	dir = abs
	created, err := missingDir(dir)
	if err != nil {
		return &exitError{checkExitNotKnown, err}
	}
	stopped := false // by a signal or --timeout: an I/O may be hung there
	if created {
		// check leaves no directory behind that the user did not have:
		// rmdir removes it only when empty (a kept working set stays).
		// Not after a stop: on a hung FUSE or disk the rmdir could hang
		// the exit too, like the unlink leftBehind avoids.
		defer func() {
			if !stopped {
				_ = os.Remove(dir)
			}
		}()
	}
	if f.latLog != "" {
		if err := latLogUsable(f.latLog); err != nil {
			return &exitError{checkExitNotKnown, err}
		}
	}
	var latLog *os.File
	var latErr error
	defer func() {
		if latLog != nil {
			latLog.Close()
		}
	}()
	if f.profile == probes.ProfileCapacity {
		stopped, err = f.runCapacity(ctx, cmd, dir, "", rates, budget, ws, minFree, blockSize)
		return err
	}

	out := cmd.OutOrStdout()
	status := newStatusLine(cmd.ErrOrStderr(), f.quiet, f.jsonOut)
	var results []checkJSON
	var failed, notKnown []string
	for _, profile := range profiles {
		bs := blockSize
		if bs == 0 {
			bs = int64(config.DefaultWALBlockSize)
			if profile == probes.ProfileRandRead {
				bs = config.DefaultReadBlockSize
			}
		}
		start := time.Now()
		res, err := probes.Check(ctx, probes.CheckOptions{
			Dir: dir, Profile: profile, Samples: f.samples, BlockSize: bs, Gap: &f.gap,
			WorkingSet: int64(ws), KeepWorkingSet: f.keep, MinFree: int64(minFree), Timeout: f.timeout,
			MaxP99: f.maxP99, AllowUnsafeFS: f.allowUnsafe, Jobs: f.jobs,
			Progress: status.progress(profile),
		})
		status.clear()
		if errors.Is(err, probes.ErrTimeout) {
			err = fmt.Errorf("--timeout %v: %w", f.timeout, err)
		}
		j := f.summarize(res, err, start)
		// The log failing loses the log, never the result: it is printed,
		// and the exit status is 2.
		if f.latLog != "" && latLog == nil && latErr == nil && j.Samples > 0 {
			latLog, latErr = openLatLog(f.latLog, cmd.ErrOrStderr())
		}
		if latLog != nil && latErr == nil {
			if err := writeLatLog(latLog, profile, res.Ops); err != nil {
				latErr = fmt.Errorf("--lat-log %s: %w", f.latLog, err)
			}
		}
		results = append(results, j)
		if !f.jsonOut && j.Samples > 0 {
			printTable(out, res, j, bs)
		}
		switch j.Verdict {
		case verdictFail:
			failed = append(failed, profile)
		case verdictNotKnown:
			notKnown = append(notKnown, fmt.Sprintf("could not measure %s on %s: %s", profile, dir, j.Reason))
		}
		// A signal or the timeout ends the whole run, not just this profile.
		if errors.Is(err, probes.ErrInterrupted) || errors.Is(err, probes.ErrTimeout) {
			stopped = true
			break
		}
	}
	if latLog != nil {
		if err := latLog.Close(); err != nil && latErr == nil {
			latErr = fmt.Errorf("--lat-log %s: %w", f.latLog, err)
		}
		latLog = nil
	}
	if f.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		var v any = results
		if len(results) == 1 {
			v = results[0]
		}
		if err := enc.Encode(v); err != nil {
			return &exitError{checkExitNotKnown, err}
		}
	}
	// A FAIL is certain, so it outranks a profile that could not be measured.
	if len(failed) > 0 {
		if latErr != nil {
			return &exitError{checkExitExceeded, fmt.Errorf("%s: p99 latency over the threshold; %w", strings.Join(failed, ", "), latErr)}
		}
		return &exitError{checkExitExceeded, fmt.Errorf("%s: p99 latency over the threshold", strings.Join(failed, ", "))}
	}
	if len(notKnown) > 0 {
		return &exitError{checkExitNotKnown, errors.New(strings.Join(notKnown, "; "))}
	}
	if latErr != nil {
		return &exitError{checkExitNotKnown, latErr}
	}
	return nil
}

// missingDir reports whether DIR does not exist yet, so check will create
// it (the last element only, mode 0700, as the daemon does). A missing
// parent is refused: it is usually a disk that is not mounted, and
// measuring the disk underneath would judge the wrong one.
func missingDir(dir string) (bool, error) {
	_, err := os.Lstat(dir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return false, nil // what is there is probes.Check's to judge
	}
	parent := filepath.Dir(dir)
	fi, err := os.Stat(parent)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("%s: parent directory %s does not exist (check creates the directory, never its parents)", dir, parent)
	case err != nil:
		return false, fmt.Errorf("%s: %w", dir, err)
	case !fi.IsDir():
		return false, fmt.Errorf("%s: parent %s is not a directory", dir, parent)
	}
	return true, nil
}

// latLogUsable refuses, before anything is measured, a --lat-log path that
// could not be written: a symlink (never followed: it could point at any
// file root can write), something other than a regular file, or a missing
// directory. The file itself is created only once there is something to
// write (openLatLog).
func latLogUsable(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("--lat-log %s: is a symlink; not followed: name the file itself", path)
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("--lat-log %s: is not a regular file (%v)", path, fi.Mode().Type())
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--lat-log %s: %w", path, err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return fmt.Errorf("--lat-log %s: directory %s does not exist", path, filepath.Dir(path))
	}
	return nil
}

// openLatLog creates the latency log when the first samples are in: a run
// that is refused leaves an existing file as it was. O_NOFOLLOW refuses a
// symlink planted since latLogUsable; an existing regular file is replaced,
// and stderr says so.
func openLatLog(path string, warn io.Writer) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	existed := errors.Is(err, unix.EEXIST)
	if existed {
		fd, err = unix.Open(path, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("--lat-log %s: is a symlink; not followed: name the file itself", path)
	}
	if err != nil {
		return nil, fmt.Errorf("--lat-log %s: %w", path, err)
	}
	lf := os.NewFile(uintptr(fd), path)
	if existed {
		fi, err := lf.Stat()
		if err == nil && !fi.Mode().IsRegular() {
			err = fmt.Errorf("is not a regular file (%v)", fi.Mode().Type())
		}
		if err == nil {
			err = lf.Truncate(0)
		}
		if err != nil {
			lf.Close()
			return nil, fmt.Errorf("--lat-log %s: %w", path, err)
		}
		fmt.Fprintf(warn, "diskcanary: --lat-log %s existed: replaced\n", path)
	}
	if _, err := io.WriteString(lf, "profile,job,op,latency_ns\n"); err != nil {
		lf.Close()
		return nil, fmt.Errorf("--lat-log %s: %w", path, err)
	}
	return lf, nil
}

// writeLatLog appends one profile's ops to the latency log: jobs and ops
// numbered from 1, latencies in nanoseconds.
func writeLatLog(w io.Writer, profile string, jobs [][]time.Duration) error {
	b := bufio.NewWriter(w)
	for j, ops := range jobs {
		for i, d := range ops {
			fmt.Fprintf(b, "%s,%d,%d,%d\n", profile, j+1, i+1, d.Nanoseconds())
		}
	}
	return b.Flush()
}

// summarize judges a run: res is what it measured, err why it ended early.
func (f *checkFlags) summarize(r *probes.CheckResult, err error, start time.Time) checkJSON {
	l := r.Latencies
	j := checkJSON{
		Version: version.Version, StartTime: start.UTC().Format(time.RFC3339),
		Profile: r.Profile, Path: r.Path, Device: r.Device, Filesystem: r.Filesystem,
		Samples: len(l), PlannedSamples: r.Planned, Partial: r.Partial || len(l) < r.Planned,
		LatencySeconds: latencyOf(l), ThresholdSeconds: f.maxP99.Seconds(),
		Trusted: r.Untrusted == "", Warnings: append([]string{}, r.Warnings...),
	}
	if r.Gap != nil {
		g := r.Gap.Seconds()
		j.GapSeconds = &g
	}
	j.Jobs = max(1, len(r.JobP99s))
	j.JobP99Seconds = []float64{latencyOf(l).P99}
	if len(r.JobP99s) > 0 {
		j.JobP99Seconds = j.JobP99Seconds[:0]
		for _, p := range r.JobP99s {
			j.JobP99Seconds = append(j.JobP99Seconds, p.Seconds())
		}
	}
	if r.Profile != probes.ProfileRandRead {
		w := latencyOf(r.Writes)
		j.WriteLatencySeconds = &w
	}
	if r.Planned < minP99Samples {
		j.Warnings = append(j.Warnings, fmt.Sprintf("%d samples are too few for a p99 (it needs %d; below 100 the p99 is the maximum): use --samples %d or more", r.Planned, minP99Samples, minP99Samples))
	}
	p99 := probes.Percentile(l, 99)
	switch {
	case r.Exceeded:
		j.Verdict = verdictFail
		if j.Partial {
			j.Reason = fmt.Sprintf("stopped after %d of %d samples: %d were over %s, more than the p99 allows (%d), so it cannot pass",
				len(l), r.Planned, countOver(l, f.maxP99), fmtDur(f.maxP99), r.Planned-(99*r.Planned+99)/100)
		}
	case err != nil:
		j.Verdict, j.Reason = verdictNotKnown, err.Error()
	case len(l) == 0:
		j.Verdict, j.Reason = verdictNotKnown, "no samples"
	case p99 > f.maxP99:
		j.Verdict = verdictFail
	case r.Untrusted != "" && !f.allowUnsafe:
		j.Verdict, j.Reason = verdictNotKnown, r.Untrusted+" (--allow-unsafe-fs to judge it anyway)"
	default:
		j.Verdict = verdictPass
		if r.Untrusted != "" {
			j.Warnings = append(j.Warnings, "accepted with --allow-unsafe-fs: this pass does not describe a disk")
		}
	}
	j.Pass = j.Verdict == verdictPass
	return j
}

func countOver(l []time.Duration, threshold time.Duration) int {
	n := 0
	for _, d := range l {
		if d > threshold {
			n++
		}
	}
	return n
}

// latencyOf summarises sorted samples (zeros when there are none).
func latencyOf(l []time.Duration) latencyJSON {
	if len(l) == 0 {
		return latencyJSON{}
	}
	var sum time.Duration
	for _, d := range l {
		sum += d
	}
	return latencyJSON{
		Min: l[0].Seconds(), P50: probes.Percentile(l, 50).Seconds(), P90: probes.Percentile(l, 90).Seconds(),
		P99: probes.Percentile(l, 99).Seconds(), P999: probes.Percentile(l, 99.9).Seconds(),
		Max: l[len(l)-1].Seconds(), Mean: (sum / time.Duration(len(l))).Seconds(),
	}
}

// printTable prints a fio-like report.
func printTable(w io.Writer, r *probes.CheckResult, j checkJSON, bs int64) {
	where := r.Filesystem
	if r.Device != "" {
		where += " on " + r.Device
	}
	fmt.Fprintf(w, "diskcanary check: %s profile, %s (%s)\n", r.Profile, r.Path, where)
	count := strconv.Itoa(j.Samples)
	if j.Partial {
		count = fmt.Sprintf("%d of %d planned (partial)", j.Samples, j.PlannedSamples)
	}
	op := "fdatasync"
	if r.Gap != nil {
		pace := "back to back (fio's etcd recipe: faster than etcd sees)"
		if *r.Gap > 0 {
			pace = fmt.Sprintf("%v between ops (etcd's appends come with gaps)", *r.Gap)
		}
		// With several jobs every count is per job (the worst job's
		// samples are the ones shown), and both lines say so.
		perJob := ""
		if j.Jobs > 1 {
			perJob = " per job"
		}
		fmt.Fprintf(w, "  %s sequential %d-byte appends%s into a preallocated segment, fdatasync after each, %s\n", count, bs, perJob, pace)
		if j.Jobs > 1 {
			p99s := make([]string, len(j.JobP99Seconds))
			for i, p := range j.JobP99Seconds {
				p99s[i] = fmtSec(p)
			}
			fmt.Fprintf(w, "  %d jobs at once, %d appends each, each job on its own file; judged on the worst job (job p99s: %s)\n", j.Jobs, j.PlannedSamples, strings.Join(p99s, " "))
		}
		if len(r.Writes) > 0 {
			fmt.Fprintf(w, "  write (not judged): p50=%s p99=%s max=%s\n",
				fmtDur(probes.Percentile(r.Writes, 50)), fmtDur(probes.Percentile(r.Writes, 99)), fmtDur(r.Writes[len(r.Writes)-1]))
		}
	} else {
		op = "read"
		fmt.Fprintf(w, "  %s random %d-byte O_DIRECT reads over a pre-written working set\n", count, bs)
	}
	fmt.Fprintf(w, "  %s percentiles (usec):\n", op)
	pcts := []float64{1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99}
	for i := 0; i < len(pcts); i += 4 {
		var cells []string
		for _, p := range pcts[i:min(i+4, len(pcts))] {
			cells = append(cells, fmt.Sprintf("%5.2fth=[%6d]", p, probes.Percentile(r.Latencies, p).Microseconds()))
		}
		fmt.Fprintf(w, "     | %s\n", strings.Join(cells, ", "))
	}
	l := j.LatencySeconds
	fmt.Fprintf(w, "  %s: min=%s p50=%s p90=%s p99=%s p99.9=%s max=%s mean=%s\n", op,
		fmtSec(l.Min), fmtSec(l.P50), fmtSec(l.P90), fmtSec(l.P99), fmtSec(l.P999), fmtSec(l.Max), fmtSec(l.Mean))
	for _, warn := range j.Warnings {
		fmt.Fprintf(w, "  WARNING: %s\n", warn)
	}
	if r.WorkingSetFile != "" {
		fmt.Fprintf(w, "  working set kept: %s\n", r.WorkingSetFile)
	}
	switch j.Verdict {
	case verdictPass:
		fmt.Fprintf(w, "  PASS: %s p99 %s <= %s\n\n", op, fmtSec(l.P99), fmtSec(j.ThresholdSeconds))
	case verdictFail:
		fmt.Fprintf(w, "  FAIL: %s p99 %s > %s", op, fmtSec(l.P99), fmtSec(j.ThresholdSeconds))
		if j.Reason != "" {
			fmt.Fprintf(w, " (partial: %s)", j.Reason)
		}
		fmt.Fprint(w, "\n\n")
	default:
		fmt.Fprintf(w, "  COULD NOT MEASURE: %s\n\n", j.Reason)
	}
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

// isBlockDevice: path (followed through symlinks, as /dev/disk/by-id/...)
// is a block device.
func isBlockDevice(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0
}
