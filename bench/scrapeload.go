package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/diskcanary/diskcanary/bench/read"
	"github.com/diskcanary/diskcanary/bench/stats"
)

// scrapeLoad: do -scrapers concurrent scrapers of /metrics disturb the
// probes' measurements? (1) Continuous load for -duration: errors and
// /metrics latency (hey). (2) Interleaved cycles of the probes' windows
// {idle, scrape, busy}, busy being one SCHED_IDLE loop per CPU: the
// control, since on a VM a busy vCPU alone changes I/O latency for any
// tool. (3) The reference: fio paced as the probes are (writes -gap apart,
// reads in bursts), idle and scrape windows, the scrapers on a daemon
// whose probes run on tmpfs. Verdict: no scrape errors, and the probes'
// scrape/idle ratio at most fio's ×1.10 at p50 and ×1.25 at p99 (windows
// of a kind pooled). One-sided: the probes run at normal priority, as
// etcd does, so saturated CPUs slow them as they slow etcd; only a
// slowdown of their own fails.
func scrapeLoad(r *run, p params) bool {
	r.need("hey", "fio", "chrt")
	step := p.Interval
	cycles := int(p.Duration / step)
	if cycles < 1 {
		r.Fatalf("-duration %v holds no -interval %v window", p.Duration, step)
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		r.Fatal(err)
	}
	const readBurst = 200 // the read probe's ops a second
	shm, err := os.MkdirTemp("/dev/shm", "dc-load-")
	if err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() { os.RemoveAll(shm) })
	// Probes faster than the defaults (44 s, 30 s) for thousands of
	// samples per window. The WAL probe overwrites one file rather than
	// deleting a fresh one per burst: on a filesystem mounted -o discard,
	// every deletion becomes a discard the host executes, and at four per
	// second they would land in the read probe's tail, in every window
	// alike.
	start := func(dir string) *daemon {
		d := r.serve(fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %s, interval: 250ms, ops: 50, gap: %s, layout: overwrite, daily_write_budget: 1TB}
    - {name: rr, kind: randread, dir: %s, interval: 1s, ops: %d, working_set: 1GiB}
smart:
  enabled: false
`, dir, p.Gap, dir, readBurst))
		d.started(r, "diskcanary_read_duration_seconds", "rr") // the working set laid out, the first reads in
		return d
	}
	hey := func(d time.Duration, url string) read.Hey {
		out := r.exec("hey", "-z", d.String(), "-c", strconv.Itoa(p.Scrapers), url)
		h, err := read.ParseHey(bytes.NewReader(out))
		if err != nil {
			r.Fatalf("%v\n%s", err, out)
		}
		return h
	}
	busy := func() {
		var loops []*exec.Cmd
		for range runtime.NumCPU() {
			c := exec.Command("chrt", "-i", "0", "sh", "-c", "while :; do :; done")
			if err := c.Start(); err != nil {
				r.Fatal(err)
			}
			loops = append(loops, c)
		}
		time.Sleep(step)
		for _, c := range loops {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	probes := []struct{ what, metric, probe string }{
		{"fdatasync", "diskcanary_fdatasync_duration_seconds", "wal"},
		{"read", "diskcanary_read_duration_seconds", "rr"},
	}

	// 1: the continuous load, the probes on -dir.
	d := start(p.Dir)
	runs := []struct {
		label string
		h     read.Hey
	}{{"continuous", hey(p.Duration, d.url)}}
	d.stop()

	// 2 and 3 alternate cycle by cycle, the order flipped every other
	// cycle, so that a disk whose speed drifts weighs on both alike. Each
	// cycle starts its daemon afresh, so its windows are the differences
	// between its own histograms.
	var windows [][]*read.Histogram // the probes': i S B per cycle, per probe
	probesCycle := func(c int) {
		d := start(p.Dir)
		defer d.stop()
		snap := func() []*read.Histogram {
			var s []*read.Histogram
			for _, x := range probes {
				s = append(s, d.histogram(r, x.metric, x.probe))
			}
			return s
		}
		prev := snap()
		window := func() {
			cur := snap()
			w := make([]*read.Histogram, len(cur))
			for k := range cur {
				var err error
				if w[k], err = cur[k].Since(prev[k]); err != nil {
					r.Fatal(err)
				}
			}
			windows, prev = append(windows, w), cur
		}
		time.Sleep(step)
		window()
		runs = append(runs, struct {
			label string
			h     read.Hey
		}{fmt.Sprintf("interleaved %d", c+1), hey(step, d.url)})
		window()
		busy()
		window()
	}
	// fio on -dir, the daemon's probes on tmpfs. fio reads the read
	// probe's working set, so both read the same blocks with the same
	// cache state.
	readSet := filepath.Join(p.Dir, ".diskcanary-rr-readset")
	var fioRuns [][]percentiles // i S per cycle, per probe
	walOps := max(int(step/max(p.Gap, time.Millisecond)), 100)
	reads := readBurst * max(int(step/time.Second), 1)
	fioRun := func() {
		fioRuns = append(fioRuns, []percentiles{
			fioPercentiles(r, r.fioWAL(p.Dir, walOps, p.Gap).Sync.Lat),
			fioPercentiles(r, r.fioRandRead(readSet, reads, readBurst, time.Second).Read.Clat),
		})
	}
	fioCycle := func() {
		d := start(shm)
		defer d.stop()
		fioRun()
		scrapers := exec.Command("hey", "-z", "600s", "-c", strconv.Itoa(p.Scrapers), d.url)
		if err := scrapers.Start(); err != nil {
			r.Fatal(err)
		}
		r.Cleanup(func() { _ = scrapers.Process.Kill() }) // when a fio run fails under it
		time.Sleep(time.Second)
		fioRun()
		_ = scrapers.Process.Signal(syscall.SIGINT)
		_ = scrapers.Wait()
	}
	for c := range cycles {
		if c%2 == 0 {
			probesCycle(c)
			fioCycle()
		} else {
			fioCycle()
			probesCycle(c)
		}
	}

	ok := true
	r.printf("scrape load: %d concurrent scrapers, %v continuous, then %d cycles of the probes' %v windows (idle, scrapers, busy CPUs) alternating with fio's (idle, scrapers)\n", p.Scrapers, p.Duration, cycles, step)
	for _, x := range runs {
		var other []string
		for code, n := range x.h.Statuses {
			if code != 200 {
				other = append(other, fmt.Sprintf("%d×%d", n, code))
			}
		}
		errs := 0
		for _, n := range x.h.Errors {
			errs += n
		}
		ok = ok && len(other) == 0 && errs == 0
		r.printf("  %-14s responses 200: %6d; other statuses: %s; transport errors: %d; /metrics p50 %.1f ms, p99 %.1f ms\n", x.label,
			x.h.Statuses[200], orNone(other), errs, float64(x.h.Latency[50])/1e6, float64(x.h.Latency[99])/1e6)
	}
	const idle, scrape, busyCPU = 0, 1, 2
	r.printf("latency (µs) per %v window: i idle, S scrapers, B busy CPUs (control)\n", step)
	for k, x := range probes {
		pooled := func(kind int) *read.Histogram {
			pool := windows[kind][k]
			for i := kind + 3; i < len(windows); i += 3 {
				if pool, err = pool.Add(windows[i][k]); err != nil {
					r.Fatal(err)
				}
			}
			return pool
		}
		for _, q := range []struct {
			label string
			q     float64
			get   func(percentiles) float64
		}{{"p50", 0.5, p50}, {"p99", 0.99, p99}} {
			var dc, ref []string
			for i, w := range windows {
				dc = append(dc, fmt.Sprintf("%c%.0f", "iSB"[i%3], w[k].Quantile(q.q)*1e6))
			}
			for i, f := range fioRuns {
				ref = append(ref, fmt.Sprintf("%c%.0f", "iS"[i%2], q.get(f[k])))
			}
			r.printf("  %-9s diskcanary %s: %s\n", x.what, q.label, strings.Join(dc, " "))
			r.printf("  %-9s fio        %s: %s\n", x.what, q.label, strings.Join(ref, " "))
		}
		pi, ps, pb := pooled(idle), pooled(scrape), pooled(busyCPU)
		r.printf("  %-9s all windows of a kind pooled: samples idle %.0f, scrapers %.0f, busy %.0f\n", x.what, pi.Count, ps.Count, pb.Count)
		for _, q := range []struct {
			label string
			q     float64
			get   func(percentiles) float64
			bound stats.Bound
		}{{"p50", 0.5, p50, stats.AtMost(1.10)}, {"p99", 0.99, p99, stats.AtMost(1.25)}} {
			i, s, b := pi.Quantile(q.q)*1e6, ps.Quantile(q.q)*1e6, pb.Quantile(q.q)*1e6
			var fi, fs []float64
			for j, f := range fioRuns {
				if j%2 == 0 {
					fi = append(fi, q.get(f[k]))
				} else {
					fs = append(fs, q.get(f[k]))
				}
			}
			fioRatio := stats.Median(fs) / stats.Median(fi)
			said := "not slowed more than fio"
			if !q.bound.Holds(s / i / fioRatio) {
				said, ok = "SLOWED MORE THAN FIO", false
			}
			r.printf("  %-9s %s: idle %.0f, scrapers %.0f (×%.3f), busy CPUs %.0f (×%.3f); fio under the same scrapers ×%.3f; diskcanary/fio ×%.3f: %s, %s\n",
				x.what, q.label, i, s, s/i, b, b/i, fioRatio, s/i/fioRatio, said, q.bound)
		}
	}
	return ok
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}
