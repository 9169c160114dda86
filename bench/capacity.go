package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/diskcanary/diskcanary/bench/read"
	"github.com/diskcanary/diskcanary/bench/stats"
	"github.com/diskcanary/diskcanary/internal/capacityjson"
	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/probes"
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
// the same target. The reference is fio --rate_iops over the same rate
// list (one fio run a step, as many ops as check's step), its IOPS at the
// bound taken by check's own rule (kneeAt; fio's appends timed from their
// due times as check's are, its reads with the lateness their p99 leaves
// out), run twice a round so its A/A spread is known. fio's latency_target
// search (reads only: the WAL has one writer, no depth to search) is
// printed beside it as a second, closed-loop reference. Verdict: check's
// IOPS at the bound within ±10 % of fio's rate steps'; the per-step p99
// ratios are printed.
func capacityVsFIO(r *run, p params) bool {
	r.need("fio")
	t := r.capacityTargetOf(p)
	if t.pattern == "wal" {
		r.need("bpftrace")
		r.needRoot("bpftrace")
	}
	rates := make([]string, len(p.Rates))
	for i, x := range p.Rates {
		rates[i] = strconv.Itoa(x)
	}
	sources := []string{"check", "fio", "fio again"}
	if t.pattern != "wal" {
		sources = append(sources, "fio latency_target")
	}
	atBound := map[string][]float64{}
	var depths []float64 // latency_target's
	// "check service" is check's syscalls alone, without the wait from
	// an op's due time (what fio's p99 of its reads times too); "fio
	// service" is the same of fio's appends, "fio fdatasync" the p99 fio
	// reports for them (the fdatasync alone, from its submission); "fio
	// late" is the lateness fio's reads imply (lateBy).
	p99s := map[string]map[int][]float64{"check": {}, "check service": {}, "fio": {}, "fio again": {},
		"fio late": {}, "fio service": {}, "fio fdatasync": {}}
	for i := range p.Rounds {
		for _, who := range alternate(i, sources...) {
			switch who {
			case "check":
				j := r.capacityCheck(t, strings.Join(rates, ","))
				at := 0.0
				if j.IOPSAtBound != nil {
					at = *j.IOPSAtBound
				}
				atBound[who] = append(atBound[who], at)
				for _, s := range j.Steps {
					p99s[who][int(s.AskedIOPS)] = append(p99s[who][int(s.AskedIOPS)], s.LatencySeconds.P99)
					p99s["check service"][int(s.AskedIOPS)] = append(p99s["check service"][int(s.AskedIOPS)], s.ServiceP99Seconds)
					r.Logf("round %d check %.0f asked: achieved %.1f p99 %v", i+1, s.AskedIOPS, s.AchievedIOPS, read.Seconds(s.LatencySeconds.P99))
				}
			case "fio", "fio again":
				steps := r.fioSweep(t, p.Rates)
				atBound[who] = append(atBound[who], kneeAt(steps, t.bound))
				for _, s := range steps {
					p99s[who][int(s.asked)] = append(p99s[who][int(s.asked)], s.p99.Seconds())
					if who == "fio" {
						add := func(col string, d time.Duration) {
							p99s[col][int(s.asked)] = append(p99s[col][int(s.asked)], d.Seconds())
						}
						if t.pattern == "wal" {
							add("fio service", s.service)
							add("fio fdatasync", s.own)
						} else {
							add("fio late", s.late)
						}
					}
					r.Logf("round %d %s %.0f asked: achieved %.1f p99 %v", i+1, who, s.asked, s.iops, s.p99)
				}
			case "fio latency_target":
				iops, depth := r.fioLatencyTarget(t)
				atBound[who] = append(atBound[who], iops)
				depths = append(depths, float64(depth))
			}
		}
	}
	med := func(who string) float64 { return stats.Median(atBound[who]) }
	cm, fm, am := med("check"), med("fio"), med("fio again")
	ratio, aa := cm/fm, am/fm
	rule := "its p99, or how late its rate left its 99th-percentile op, within the bound"
	if t.pattern == "wal" {
		rule = "the p99 of its appends from their due times by its schedule, timed by the kernel, within the bound"
	}
	r.printf("capacity vs fio on %s: %s, p99 bound %v, %d interleaved rounds, medians; fio = fio --rate_iops at each rate, its IOPS at the bound by check's rule (%s)\n",
		t.title, t.pattern, t.bound, p.Rounds, rule)
	r.printf("%-22s %10s %10s %7s %10s %7s  verdict\n", "", "fio", "check", "ratio", "fio again", "fio A/A")
	bound := stats.Within(0.10)
	ok := fm > 0 && cm > 0 && bound.Holds(ratio)
	verdict := bound.VerdictBesideAA(ratio, aa)
	switch {
	case fm == 0 && cm == 0:
		verdict = "NOT COMPARABLE: the first rate step broke the bound for both"
	case fm == 0:
		verdict = "NOT COMPARABLE: fio's first rate step broke the bound"
	case cm == 0:
		verdict = "OUT OF RANGE: check's first rate step broke the bound"
	}
	r.printf("%-22s %10.1f %10.1f %7.3f %10.1f %7.3f  %s\n", "IOPS at the bound", fm, cm, ratio, am, aa, verdict)
	if fm > 0 && !bound.Holds(ratio) && t.pattern != "wal" {
		// fio --rate_iops issues a late read at once, back on schedule,
		// but times it from then: the wait from its due time (for a free
		// slot of the 32 when a stall fills them), which check counts, is
		// not in fio's p99. The first step check broke shows it: its
		// syscalls' p99 beside the whole.
		for _, rate := range p.Rates {
			c := p99s["check"][rate]
			if len(c) == 0 || stats.Median(c) <= t.bound.Seconds() {
				continue
			}
			f := "-"
			if x := p99s["fio"][rate]; len(x) > 0 {
				f = fmt.Sprintf("%.3f ms", stats.Median(x)*1e3)
			}
			r.printf("fio --rate_iops times each read from its submission, check from its due time: at %d asked, check's p99 %.3f ms, its syscalls' alone %.3f ms; fio's %s\n",
				rate, stats.Median(c)*1e3, stats.Median(p99s["check service"][rate])*1e3, f)
			break
		}
	}
	if t.pattern == "wal" {
		r.printf("fio latency_target: not run (one writer: no depth to search)\n")
	} else {
		lt := med("fio latency_target")
		switch {
		case lt == 0:
			r.printf("fio latency_target (closed loop): no depth holds the bound: a closed loop at depth 1 already runs at the device's rate, so its tail is the device's, not a queue's\n")
		case fm == 0:
			r.printf("fio latency_target (closed loop): %.1f IOPS, where no rate step of fio's held\n", lt)
		case !bound.Holds(lt / fm):
			// The two references disagree: said once, with the numbers.
			r.printf("fio latency_target (closed loop): %.1f IOPS at depth %.0f, ×%.3f of fio's rate steps: the two references disagree; a closed loop's rate is its depth over the reads' latency, the rate steps offer each rate with up to %d in flight\n",
				lt, stats.Median(depths), lt/fm, probes.DefaultCapacityConcurrency)
		default:
			r.printf("fio latency_target (closed loop): %.1f IOPS, ×%.3f of fio's rate steps\n", lt, lt/fm)
		}
	}
	what, last := "p99", "fio late"
	if t.pattern == "wal" {
		what, last = "p99 (each append from its due time; service: its write and fdatasync alone, check's timed by check, fio's by the kernel; fio fdatasync: the p99 fio reports)", "fio fdatasync"
	}
	r.printf("per-step %s, ms, medians of the rounds:\n", what)
	cols := []string{"check service", "fio service", last}
	if t.pattern != "wal" {
		cols = []string{"check service", last}
	}
	r.printf("  %8s %9s %9s %8s %8s", "asked", "fio", "check", "ratio", "fio A/A")
	for _, c := range cols {
		r.printf(" %13s", c)
	}
	r.printf(" %7s\n", "rounds")
	ms := func(xs []float64) string {
		if len(xs) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f", stats.Median(xs)*1e3)
	}
	of := func(xs, ref []float64) string {
		if len(xs) == 0 || len(ref) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f", stats.Median(xs)/stats.Median(ref))
	}
	for _, rate := range p.Rates {
		c, f, a := p99s["check"][rate], p99s["fio"][rate], p99s["fio again"][rate]
		if len(c) == 0 && len(f) == 0 {
			continue
		}
		r.printf("  %8d %9s %9s %8s %8s", rate, ms(f), ms(c), of(c, f), of(a, f))
		for _, col := range cols {
			r.printf(" %13s", ms(p99s[col][rate]))
		}
		r.printf(" %7d\n", len(c))
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
			"--fdatasync=1", "--bs=" + strconv.Itoa(config.DefaultWALBlockSize), "--size=64m", "--output-format=json+"}
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

// fioStep is one fio --rate_iops step: its rate asked and achieved, its
// p99; for reads the lateness their rate implies (late), for the WAL its
// appends' own p99 (service) and fio's fdatasync p99 as fio reports it
// (own).
type fioStep struct {
	asked, iops             float64
	p99, late, service, own time.Duration
}

// lateBy is how late, by fio's own schedule (op k due at k/rate, as
// check's), the step's 99th-percentile op ended at the rate achieved:
// 0.99·ops·(1/achieved − 1/asked). fio times a read from its submission,
// so its p99 never shows this wait; check's p99, from each op's due time,
// does. An estimate from the rate alone: a step that falls behind and
// catches up leaves none.
func lateBy(ops int, asked, achieved float64) time.Duration {
	d := 0.99 * float64(ops) * (1/achieved - 1/asked)
	return time.Duration(max(0, d) * 1e9)
}

// fromSchedule times fio's traced appends as check times its own: from
// each one's due time by fio's schedule (--rate_iops: append k due at
// epoch + k/rate, a late one begun at once) to its fdatasync's end; the
// service times are the spans alone. The trace does not hold fio's epoch,
// but no append begins before its due time, so the earliest start_k −
// k/rate stands for it (an append on time begins within fio's sleep slack
// of its due time). achieved is check's measure: appends over the time
// from the epoch to the last end, or the planned time if longer. lat and
// svc come sorted.
func fromSchedule(spans []read.Span, rate float64) (lat, svc []time.Duration, achieved float64) {
	if len(spans) == 0 {
		return nil, nil, 0
	}
	period := 1e9 / rate
	due := func(k int) int64 { return int64(float64(k) * period) }
	epoch := spans[0].Start
	for k, s := range spans {
		epoch = min(epoch, s.Start-due(k))
	}
	for k, s := range spans {
		lat = append(lat, time.Duration(s.End-epoch-due(k)))
		svc = append(svc, time.Duration(s.End-s.Start))
	}
	slices.Sort(lat)
	slices.Sort(svc)
	span := max(float64(spans[len(spans)-1].End-epoch), float64(len(spans))*period)
	return lat, svc, float64(len(spans)) / (span / 1e9)
}

// fioSweep runs fio --rate_iops at every rate, each with as many ops as
// check's step at that rate (probes.StepOps), past the bound too, so a
// step check reached after fio broke still has fio's figure; it stops
// after the first step fio could not carry (under 90 % of the asked
// rate), since a faster one only takes longer at the same ceiling. The
// WAL's appends are timed by the kernel from fio's schedule
// (traceAppends, fromSchedule), as check times its own; fio's reads, many
// to a syscall through libaio, by fio from their submission, with the
// lateness their achieved rate implies beside them (lateBy).
func (r *run) fioSweep(t capacityTarget, rates []int) []fioStep {
	var steps []fioStep
	for _, rate := range rates {
		ops := probes.StepOps(float64(rate))
		if t.pattern != "wal" {
			args := append(t.fioArgs(probes.DefaultCapacityConcurrency), "--rate_iops="+strconv.Itoa(rate), "--number_ios="+strconv.Itoa(ops))
			f := t.figures(r, r.fioJob(t, args...))
			steps = append(steps, fioStep{asked: float64(rate), iops: f.iops, p99: f.p99, late: lateBy(ops, float64(rate), f.iops)})
		} else {
			// One write more than the appends: fio's last write has no
			// fdatasync after it.
			args := append(t.fioArgs(1), "--rate_iops="+strconv.Itoa(rate), "--number_ios="+strconv.Itoa(ops+1))
			stop := r.traceAppends(config.DefaultWALBlockSize)
			f := t.figures(r, r.fioJob(t, args...))
			spans := stop()
			if len(spans) != ops {
				r.Fatalf("traced %d of fio's %d appends at %d asked", len(spans), ops, rate)
			}
			lat, svc, achieved := fromSchedule(spans, float64(rate))
			steps = append(steps, fioStep{asked: float64(rate), iops: achieved, p99: probes.Percentile(lat, 99),
				service: probes.Percentile(svc, 99), own: f.p99})
		}
		if s := steps[len(steps)-1]; s.iops < capacityHeld*float64(rate) {
			break
		}
	}
	return steps
}

// capacityHeld is check's rule for a step that carried its rate.
const capacityHeld = 0.9

// kneeAt is the IOPS at the bound by check's rule: the achieved rate of
// the last step that held (p99, or the lateness its achieved rate implies,
// within bound; at least 90 % of the rate asked) before the first that did
// not; 0 when the first did not.
func kneeAt(steps []fioStep, bound time.Duration) float64 {
	at := 0.0
	for _, s := range steps {
		if max(s.p99, s.late) > bound || s.iops < capacityHeld*s.asked {
			break
		}
		at = s.iops
	}
	return at
}

// fioLatencyTarget is fio's closed-loop IOPS at the bound and the depth
// its latency_target search settles on (same percentile, same bound), run
// at that depth for 10 s; 0 IOPS when even depth 1 breaks the bound.
func (r *run) fioLatencyTarget(t capacityTarget) (float64, int) {
	search := append(t.fioArgs(probes.DefaultCapacityConcurrency), "--latency_target="+strconv.FormatInt(t.bound.Microseconds(), 10),
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
		return 0, depth
	}
	return f.iops, depth
}
