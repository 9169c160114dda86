package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/diskcanary/diskcanary/bench/read"
	"github.com/diskcanary/diskcanary/bench/stats"
	"github.com/diskcanary/diskcanary/internal/capacityjson"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// capacityTarget is where a capacity comparison runs and how: wrap starts
// each tool (into the blkio cgroup on the throttled loop device), so both
// tools meet the same ceiling.
type capacityTarget struct {
	dir, title, pattern string
	bound               time.Duration
	wrap                func(name string, args ...string) *exec.Cmd
	extra               []string // check's flags for the target
}

// capacityTargetOf sets up the target of p: the FUSE test filesystem with
// -fuse-delay per fdatasync (the WAL pattern: the delay is the sync's), a
// loop device the blkio cgroup holds to -throttle read IOPS (random reads,
// a 50 ms bound as check's own test uses: the throttle dispatches in bursts
// of tens of ms), or -dir (random reads, 10 ms).
func (r *run) capacityTargetOf(p params) capacityTarget {
	switch {
	case p.FUSEDelay > 0:
		return capacityTarget{dir: r.onTestFS(p.FUSEDelay), title: fmt.Sprintf("the FUSE test filesystem with %v per fdatasync", p.FUSEDelay),
			pattern: "wal", bound: 10 * time.Millisecond, wrap: exec.Command, extra: []string{"--allow-unsafe-fs"}}
	case p.Throttle > 0:
		r.needRoot("a loop device and the blkio cgroup")
		mnt, dev := testkit.LoopFSIn(r, "", 512<<20, "ext4")
		t := testkit.NewReadThrottle(r, dev, p.Throttle)
		return capacityTarget{dir: filepath.Join(mnt, "canary"), title: fmt.Sprintf("ext4 on a loop device held to %d read IOPS by the blkio cgroup", p.Throttle),
			pattern: "randread", bound: 50 * time.Millisecond, wrap: t.Command}
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		r.Fatal(err)
	}
	return capacityTarget{dir: p.Dir, title: where(p.Dir), pattern: "randread", bound: 10 * time.Millisecond, wrap: exec.Command}
}

// capacityWorkingSet is the reads' file, laid out once by check and kept
// for fio to read too.
const capacityWorkingSet = "256MiB"

// capacityVsFIO interleaves rounds of check's capacity sweep with fio on
// the same target: fio --rate_iops at each step the sweep took (fio times
// from submission, the sweep from each op's scheduled start) and, for
// random reads, fio's latency_target search with the same percentile and
// bound, then fio at the depth it found for its IOPS. Verdict: fio's IOPS
// at the bound within ±10 % of check's (for the WAL, fio's own steps:
// the last that held); the per-step p99 ratios are printed.
func capacityVsFIO(r *run, p params) bool {
	r.need("fio")
	t := r.capacityTargetOf(p)
	rates := make([]string, len(p.Rates))
	for i, x := range p.Rates {
		rates[i] = strconv.Itoa(x)
	}
	var checkIOPS, fioIOPS []float64
	stepRatios := map[int][]float64{}
	for i := range p.Rounds {
		for _, who := range alternate(i, "check", "fio") {
			if who == "check" {
				j := r.capacityCheck(t, strings.Join(rates, ","))
				at := 0.0
				if j.IOPSAtBound != nil {
					at = *j.IOPSAtBound
				}
				checkIOPS = append(checkIOPS, at)
				for _, s := range j.Steps {
					f := r.fioStep(t, s.AskedIOPS, s.Ops)
					stepRatios[int(s.AskedIOPS)] = append(stepRatios[int(s.AskedIOPS)], s.LatencySeconds.P99/f.p99.Seconds())
					r.Logf("round %d step %.0f: check p99 %v achieved %.1f; fio p99 %v achieved %.1f", i+1, s.AskedIOPS,
						read.Seconds(s.LatencySeconds.P99), s.AchievedIOPS, f.p99, f.iops)
				}
				continue
			}
			fioIOPS = append(fioIOPS, r.fioAtBound(t, p.Rates))
		}
	}
	cm, fm := stats.Median(checkIOPS), stats.Median(fioIOPS)
	r.printf("capacity vs fio on %s: %s, p99 bound %v, %d interleaved rounds, medians\n", t.title, t.pattern, t.bound, p.Rounds)
	r.printf("%-22s %10s %10s %7s  verdict\n", "", "fio", "check", "ratio")
	bound := stats.Within(0.10)
	ok := fm > 0 && bound.Holds(cm/fm)
	verdict := bound.Verdict(cm / fm)
	switch {
	case fm == 0 && t.pattern == "wal":
		verdict = "NOT COMPARABLE: fio's first rate step broke the bound"
	case fm == 0:
		verdict = "NOT COMPARABLE: fio found no depth whose p99 holds the bound (a closed loop at depth 1 already runs at the device's rate)"
	}
	r.printf("%-22s %10.1f %10.1f %7.3f  %s\n", "IOPS at the bound", fm, cm, cm/fm, verdict)
	r.printf("per-step p99, check ÷ fio (median of the rounds):\n")
	for _, rate := range p.Rates {
		if rs := stepRatios[rate]; len(rs) > 0 {
			r.printf("  %7d IOPS asked  %7.3f  (%d rounds)\n", rate, stats.Median(rs), len(rs))
		}
	}
	return ok
}

// capacityCheck runs the sweep; exit 1 (even the first step broke the
// bound) is a result too.
func (r *run) capacityCheck(t capacityTarget, rates string) capacityjson.Result {
	args := []string{"check", t.dir, "--profile", "capacity", "--pattern", t.pattern, "--rates", rates,
		"--max-p99", t.bound.String(), "--min-free", "0", "--json", "--quiet"}
	if t.pattern != "wal" {
		args = append(args, "--working-set", capacityWorkingSet, "--keep-working-set")
	}
	cmd := t.wrap(diskcanary, append(args, t.extra...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		r.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.Bytes())
	}
	var j capacityjson.Result
	if err := json.Unmarshal(out, &j); err != nil {
		r.Fatalf("check's JSON: %v", err)
	}
	return j
}

// fioResult is one fio run's figures.
type fioResult struct {
	p99  time.Duration
	iops float64
}

// fioArgs is fio's job for the target's pattern: random reads with libaio
// at check's concurrency over check's working set, or the WAL's appends
// with an fdatasync after each.
func (t capacityTarget) fioArgs(depth int) []string {
	if t.pattern == "wal" {
		return []string{"--name=wal", "--directory=" + t.dir, "--filename=capacity-vs-fio", "--rw=write", "--ioengine=sync",
			"--fdatasync=1", "--bs=2300", "--size=64m", "--output-format=json+"}
	}
	return []string{"--name=rr", "--filename=" + filepath.Join(t.dir, ".diskcanary-check-readset"), "--rw=randread",
		"--ioengine=libaio", "--direct=1", "--bs=4k", "--iodepth=" + strconv.Itoa(depth), "--norandommap", "--randrepeat=0",
		"--lat_percentiles=1", "--output-format=json+"}
}

func (r *run) fioJob(t capacityTarget, args ...string) read.FIOJob {
	j, err := read.ParseFIO(bytes.NewReader(r.output(t.wrap("fio", args...))))
	if err != nil {
		r.Fatal(err)
	}
	if t.pattern == "wal" {
		os.Remove(filepath.Join(t.dir, "capacity-vs-fio"))
	}
	return j
}

// figures reads a job's p99 (the sync's for the WAL, submission to
// completion for reads) and achieved IOPS.
func (t capacityTarget) figures(r *run, j read.FIOJob) fioResult {
	d, lat := j.Read, j.Read.Lat
	if t.pattern == "wal" {
		d, lat = j.Write, j.Sync.Lat
	}
	p99, err := lat.P(99)
	if err != nil {
		r.Fatal(err)
	}
	return fioResult{p99: p99, iops: float64(d.TotalIOs) / (j.RuntimeMS / 1e3)}
}

// fioStep is fio --rate_iops at one step: as many ops as the sweep's step.
func (r *run) fioStep(t capacityTarget, rate float64, ops int) fioResult {
	args := append(t.fioArgs(32), "--rate_iops="+strconv.Itoa(int(rate)), "--number_ios="+strconv.Itoa(ops))
	return t.figures(r, r.fioJob(t, args...))
}

// fioAtBound is fio's IOPS at the bound: for reads, the depth its
// latency_target search settles on (same percentile, same bound), run
// closed-loop for 10 s; for the WAL (one writer: no depth to search), the
// achieved rate of the last of fio's own rate steps whose p99 held.
func (r *run) fioAtBound(t capacityTarget, rates []int) float64 {
	if t.pattern == "wal" {
		best := 0.0
		for _, rate := range rates {
			f := r.fioStep(t, float64(rate), max(1000, rate))
			if f.p99 > t.bound || f.iops < 0.9*float64(rate) {
				break
			}
			best = f.iops
		}
		return best
	}
	search := append(t.fioArgs(32), "--latency_target="+strconv.FormatInt(t.bound.Microseconds(), 10),
		"--latency_window=1000000", "--latency_percentile=99", "--runtime=30", "--time_based")
	var found struct {
		Jobs []struct {
			Depth int `json:"latency_depth"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(r.output(t.wrap("fio", search...)), &found); err != nil || len(found.Jobs) != 1 {
		r.Fatalf("fio latency_target JSON: %v", err)
	}
	depth := max(1, found.Jobs[0].Depth)
	f := t.figures(r, r.fioJob(t, append(t.fioArgs(depth), "--runtime=10", "--time_based")...))
	r.Logf("fio latency_target: depth %d, %.1f IOPS, p99 %v", depth, f.iops, f.p99)
	if f.p99 > t.bound {
		// A closed loop at depth 1 still runs at the device's rate: no
		// depth holds the bound, and fio has no IOPS under it.
		return 0
	}
	return f.iops
}
