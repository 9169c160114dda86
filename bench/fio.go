package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/diskcanary/diskcanary/bench/read"
	"github.com/diskcanary/diskcanary/bench/stats"
	"github.com/diskcanary/diskcanary/internal/testkit/testfs"
)

// The comparisons with fio: does diskcanary measure what fio measures, run
// the same way on the same directory?

// onTestFS mounts diskcanary's FUSE test filesystem (tmpfs backing,
// flushes answered after delay): ground truth both tools see. It is served
// from this process: the tools measured are other processes.
func (r *run) onTestFS(delay time.Duration) string {
	r.needRoot("the FUSE test filesystem")
	if _, err := os.Stat("/dev/fuse"); err != nil {
		r.Skip("no /dev/fuse on this machine")
	}
	backing, err := os.MkdirTemp("/dev/shm", "dc-bench-backing-")
	if err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() { os.RemoveAll(backing) })
	mnt := r.TempDir()
	if err := os.Chmod(mnt, 0o700); err != nil {
		r.Fatal(err)
	}
	server, faults, err := testfs.Mount(backing, mnt, testfs.Options{FakeSync: true})
	if err != nil {
		r.Fatalf("mount the test filesystem: %v", err)
	}
	faults.SetSyncDelay(delay)
	r.Cleanup(func() { faults.Release(); _ = server.Unmount() })
	return mnt
}

// target is where a fio comparison runs: the -fuse-delay test filesystem
// (no reads there, and check needs --allow-unsafe-fs, never a pass
// without it) or the -dir directory; title names it in the table.
func (r *run) target(p params) (dir, title string, reads bool, unsafe []string) {
	if p.FUSEDelay > 0 {
		return r.onTestFS(p.FUSEDelay), fmt.Sprintf("the FUSE test filesystem with %v per fdatasync", p.FUSEDelay),
			false, []string{"--allow-unsafe-fs"}
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		r.Fatal(err)
	}
	return p.Dir, where(p.Dir), p.Reads, nil
}

// probesVsFIO interleaves rounds of fio's etcd recipe (back to back) and
// its 4k O_DIRECT random read against check's fio-etcd and randread
// profiles, on the same directory and the same pre-written working set.
// Verdict on the paired ratio: p50 within ±5 %, p99 within ±10 % or 25 µs.
func probesVsFIO(r *run, p params) bool {
	r.need("fio")
	dir, title, reads, unsafe := r.target(p)
	const ws = "1GiB"
	rs := filepath.Join(dir, ".diskcanary-check-readset")
	if reads {
		// Lay out the working set once; check writes and keeps it.
		r.check(dir, "--profile", "randread", "--samples", "10", "--working-set", ws, "--keep-working-set")
	}
	var fw, cw, fr, cr []percentiles
	for i := range p.Rounds {
		// Alternate who goes first, so drift in the machine's state hits both.
		for _, who := range alternate(i, "fio", "check") {
			if who == "fio" {
				fw = append(fw, fioPercentiles(r, r.fioWAL(dir, p.Samples, 0).Sync.Lat))
				if reads {
					fr = append(fr, fioPercentiles(r, r.fioRandRead(rs, p.Samples, 0, 0).Read.Clat))
				}
				continue
			}
			cw = append(cw, checkPercentiles(r.check(dir, append([]string{"--profile", "fio-etcd", "--samples", fmt.Sprint(p.Samples)}, unsafe...)...)))
			if reads {
				cr = append(cr, checkPercentiles(r.check(dir, "--profile", "randread", "--samples", fmt.Sprint(p.Samples), "--working-set", ws, "--keep-working-set")))
			}
		}
	}
	r.printf("probes vs fio on %s: %d interleaved rounds of %d samples, medians (µs)\n", title, p.Rounds, p.Samples)
	r.printf("%-16s %-4s %10s %11s %7s %7s  verdict (on the paired ratio)\n", "workload", "pct", "fio", "diskcanary", "ratio", "paired")
	ok := true
	row := func(workload string, f, c []percentiles) {
		for _, x := range []struct {
			name  string
			get   func(percentiles) float64
			bound stats.Bound
		}{{"p50", p50, stats.Within(0.05)}, {"p99", p99, stats.Within(0.10)}} {
			fm, cm := stats.Median(col(f, x.get)), stats.Median(col(c, x.get))
			paired := stats.PairedRatio(col(c, x.get), col(f, x.get))
			verdict := x.bound.Verdict(paired)
			// A p99 a few µs apart is the same p99 on a fast device.
			good := x.bound.Holds(paired) || x.name == "p99" && math.Abs(cm-fm) <= 25
			if good && !x.bound.Holds(paired) {
				verdict = "ok (within 25 µs)"
			}
			ok = ok && good
			r.printf("%-16s %-4s %10.1f %11.1f %7.3f %7.3f  %s\n", workload, x.name, fm, cm, cm/fm, paired, verdict)
		}
	}
	row("etcd fdatasync", fw, cw)
	if reads {
		row("4k randread", fr, cr)
	}
	return ok
}

// daemonVsFIO judges the daemon's own histograms, the numbers every alert
// reads, against fio run the same way on the same directory: the paced WAL
// probe against fio's etcd recipe with --thinktime, the 4k read probe
// against fio's paced O_DIRECT random reads, one daemon per probe kind (as
// fio runs each alone), and check against the daemon. Each source's ops
// are taken in slices, the sources taking turns, and pooled over all
// rounds, since a machine's tail moves by the minute; the rounds' own
// ratios print as a spread. fio also runs against itself: a bound two fio
// runs miss cannot be judged here (the verdict says so and stays a FAIL).
// Verdict: p50 within ±5 %, p99 within ±10 %.
func daemonVsFIO(r *run, p params) bool {
	r.need("fio")
	dir, title, reads, unsafe := r.target(p)
	walYAML, rrYAML := pacedWALConfig(dir, p.Gap, p.Ops), pacedReadConfig(dir)
	readSet := filepath.Join(dir, ".diskcanary-rr-readset")
	// A slice of the daemon is a phase sized to take about its share of
	// ops (the WAL probe: one gap per op plus the op; the read probe:
	// ~930 reads a second), at least a second; fio's the number of ops the
	// daemon took (never 0: fio reads that as "the whole file").
	walSlice := max(time.Second, time.Duration(p.Samples/roundSlices)*p.Gap)
	readSlice := max(time.Second, time.Duration(p.Samples/roundSlices)*time.Second/930)
	daemonSlice := func(yaml, metric, probe string, phase time.Duration) *read.Histogram {
		d := r.serve(yaml)
		defer d.stop()
		return d.windowSince(r, d.started(r, metric, probe), metric, probe, 0, phase)
	}
	checkSlice := func(n int) read.Pool {
		log := filepath.Join(r.TempDir(), "lat.csv")
		r.check(dir, append([]string{"--profile", "etcd", "--gap", p.Gap.String(), "--samples", fmt.Sprint(n), "--lat-log", log}, unsafe...)...)
		return r.latLog(log)
	}
	// "fio again" is fio against itself (an A/A run): how far two runs of
	// one tool land apart here is the floor under every other ratio.
	sources := []string{"daemon", "fio", "fio again"}
	if p.Check {
		sources = append(sources, "check")
	}
	var rounds []dvfRound
	r.printf("daemon vs fio on %s: %d rounds of %d ops in slices of ~%d, %s taking turns, gap %v, %d fdatasyncs per burst, %s\n",
		title, p.Rounds, p.Samples, p.Samples/roundSlices, strings.Join(sources, ", "), p.Gap, p.Ops, nodeBPFSaid(p.NodeBPF))
	all := newDVFRound()
	for i := range p.Rounds {
		x := newDVFRound()
		lastW, lastR := p.Samples/roundSlices, p.Samples/roundSlices
		// short: a source has fewer than its samples (check runs no reads).
		short := func(reads bool) bool {
			return slices.ContainsFunc(sources, func(s string) bool {
				return !(reads && s == "check") && x.of(s, reads).count() < int64(p.Samples)
			})
		}
		for k := 0; short(false) || reads && short(true); k++ {
			for _, who := range alternate(i+k, sources...) {
				if who == "daemon" {
					w := daemonSlice(walYAML, "diskcanary_fdatasync_duration_seconds", "wal", walSlice)
					x.of(who, false).addWindow(r, w)
					lastW = max(1, int(w.Count))
					if reads {
						w := daemonSlice(rrYAML, "diskcanary_read_duration_seconds", "rr", readSlice)
						x.of(who, true).addWindow(r, w)
						lastR = max(1, int(w.Count))
					}
					continue
				}
				// The references run under the node's eBPF program, as the
				// daemon's I/O does.
				stop := r.nodeBPF(p.NodeBPF)
				switch who {
				case "check":
					x.of(who, false).addOps(checkSlice(lastW))
				case "fio", "fio again":
					x.of(who, false).addFIO(r, r.fioWAL(dir, lastW, p.Gap).Sync.Lat)
					if reads {
						x.of(who, true).addFIO(r, r.fioRandRead(readSet, lastR, 100, 100*time.Millisecond).Read.Clat)
					}
				}
				stop()
			}
		}
		rounds = append(rounds, x)
		all.addRound(r, x)
		d, f, a := x.of("daemon", false), x.of("fio", false), x.of("fio again", false)
		line := fmt.Sprintf("  round %d: fdatasync p50/p99 µs: daemon %.1f/%.1f (%d ops), fio %.1f/%.1f (%d ops), fio again %.1f/%.1f",
			i+1, d.percentiles().p50, d.percentiles().p99, d.count(), f.percentiles().p50, f.percentiles().p99, f.count(), a.percentiles().p50, a.percentiles().p99)
		if p.Check {
			c := x.of("check", false)
			line += fmt.Sprintf(", check %.1f/%.1f (%d ops)", c.percentiles().p50, c.percentiles().p99, c.count())
		}
		fmt.Println(line)
	}
	ok := true
	// perRound is the spread of the rounds' own ratios of q, source
	// against ref.
	perRound := func(source, ref string, reads bool, q func(percentiles) float64) string {
		var rs []float64
		for _, x := range rounds {
			rs = append(rs, q(x.of(source, reads).percentiles())/q(x.of(ref, reads).percentiles()))
		}
		return spread(rs)
	}
	table := func(ref string) {
		r.printf("%-14s %9s %9s %7s %11s %7s %11s  verdict\n", "", ref, "daemon", "ratio", "per round", "fio A/A", "per round")
		for _, x := range []struct {
			name  string
			reads bool
			q     func(percentiles) float64
			bound stats.Bound
		}{
			{"fdatasync p50", false, p50, stats.Within(0.05)},
			{"fdatasync p99", false, p99, stats.Within(0.10)},
			{"4k read p50", true, p50, stats.Within(0.05)},
			{"4k read p99", true, p99, stats.Within(0.10)},
		} {
			if x.reads && (!reads || ref == "check") {
				continue
			}
			q := func(source string) float64 { return x.q(all.of(source, x.reads).percentiles()) }
			d, f := q("daemon"), q(ref)
			ratio, aa := d/f, q("fio again")/q("fio")
			verdict := x.bound.VerdictBesideAA(ratio, aa)
			ok = ok && x.bound.Holds(ratio)
			r.printf("%-14s %9.1f %9.1f %7.3f %11s %7.3f %11s  %s\n", x.name, f, d, ratio,
				perRound("daemon", ref, x.reads, x.q), aa, perRound("fio again", "fio", x.reads, x.q), verdict)
		}
	}
	r.printf("daemon histograms vs fio: each source pooled over the %d rounds (µs); ratio = daemon/reference, per round = the rounds' own ratios; fio A/A = fio again / fio, the noise floor\n", p.Rounds)
	table("fio")
	if p.Check {
		table("check")
	}
	return ok
}

// dvfRound is one daemon-vs-fio round's samples by source, the WAL
// probe's fdatasyncs and the read probe's reads.
type dvfRound struct{ wal, reads map[string]*samples }

func newDVFRound() dvfRound {
	return dvfRound{wal: map[string]*samples{}, reads: map[string]*samples{}}
}

// of is a source's WAL or read samples in the round.
func (x dvfRound) of(source string, reads bool) *samples {
	m := x.wal
	if reads {
		m = x.reads
	}
	if m[source] == nil {
		m[source] = &samples{}
	}
	return m[source]
}

// addRound pools another round's samples into x.
func (x dvfRound) addRound(r *run, o dvfRound) {
	for s, v := range o.wal {
		x.of(s, false).addSamples(r, v)
	}
	for s, v := range o.reads {
		x.of(s, true).addSamples(r, v)
	}
}

// pacedWALConfig is a daemon with one WAL probe on dir paced as fio's
// etcd recipe with --thinktime=gap: the interval (the idle time between
// one burst's end and the next's start) is one gap too, so every op
// follows one gap as in fio, and the daemon never idles longer than fio.
func pacedWALConfig(dir string, gap time.Duration, ops int) string {
	return fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %s, interval: %s, jitter: 0.01, ops: %d, gap: %s, daily_write_budget: 1TB, min_free: 1MB}
smart: {enabled: false}
diskstats: {enabled: false}
`, dir, gap, ops, gap)
}

// pacedReadConfig is a daemon with one 4k read probe on dir: 100 reads
// every 100 ms, which fioRandRead(..., 100, 100ms) paces the same way
// (back to back, fio's reads spanned 0.4 s against the probe's 6 s and
// missed the VM disk's every-few-seconds tail).
func pacedReadConfig(dir string) string {
	return fmt.Sprintf(`probes:
  targets:
    - {name: rr, kind: randread, dir: %s, interval: 100ms, jitter: 0.01, ops: 100, working_set: 1GiB, min_free: 1MB}
smart: {enabled: false}
diskstats: {enabled: false}
`, dir)
}

// roundSlices is how many slices of each source a daemon-vs-fio round
// alternates: 1,000 WAL ops (~10 s at the default gap) each.
const roundSlices = 10

func p50(p percentiles) float64 { return p.p50 }
func p99(p percentiles) float64 { return p.p99 }

func col(ps []percentiles, get func(percentiles) float64) []float64 {
	out := make([]float64, len(ps))
	for i, p := range ps {
		out[i] = get(p)
	}
	return out
}

// alternate is round i's order: names rotated by i, so each goes first
// in turn (a, b then b, a; a, b, c then b, c, a then c, a, b).
func alternate(i int, names ...string) []string {
	k := i % len(names)
	return append(append([]string{}, names[k:]...), names[:k]...)
}
