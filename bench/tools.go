package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/diskcanary/diskcanary/bench/read"
	"github.com/diskcanary/diskcanary/internal/blockdev"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// The tools every comparison runs, each the same way wherever it runs.

// walBlock is the size of one of etcd's WAL records, fio's etcd recipe's
// --bs.
const walBlock = 2300

// fioWAL is fio's etcd recipe: n writes of walBlock bytes on a fresh file
// in dir, an fdatasync after each, gap between one op's end and the next's
// start (0: back to back). Its sync latencies are the fdatasyncs'.
func (r *run) fioWAL(dir string, n int, gap time.Duration) read.FIOJob {
	file := filepath.Join(dir, "etcd.0.0")
	os.Remove(file)
	defer os.Remove(file)
	args := []string{"--name=etcd", "--directory=" + dir, "--rw=write", "--ioengine=sync", "--fdatasync=1",
		"--bs=" + strconv.Itoa(walBlock), "--size=" + strconv.Itoa(n*walBlock)}
	if gap > 0 {
		args = append(args, "--thinktime="+strconv.FormatInt(gap.Microseconds(), 10), "--thinktime_blocks=1")
	}
	return r.fio(args...)
}

// fioRandRead is n O_DIRECT 4k random reads of file, a pause of pause
// after every burst reads (burst 0: back to back).
func (r *run) fioRandRead(file string, n, burst int, pause time.Duration) read.FIOJob {
	st, err := os.Stat(file)
	if err != nil {
		r.Fatal(err)
	}
	args := []string{"--name=rr", "--filename=" + file, "--rw=randread", "--ioengine=psync", "--direct=1", "--bs=4k",
		"--size=" + strconv.FormatInt(st.Size(), 10), "--number_ios=" + strconv.Itoa(n), "--norandommap", "--randrepeat=0"}
	if burst > 0 {
		args = append(args, "--thinktime="+strconv.FormatInt(pause.Microseconds(), 10), "--thinktime_blocks="+strconv.Itoa(burst))
	}
	return r.fio(args...)
}

func (r *run) fio(args ...string) read.FIOJob {
	j, err := read.ParseFIO(bytes.NewReader(r.exec("fio", append(args, "--output-format=json+")...)))
	if err != nil {
		r.Fatal(err)
	}
	return j
}

// check runs `diskcanary check DIR ARGS --json`, never judged (--max-p99
// 1h, --min-free 0): the benches compare its numbers, not its verdict.
func (r *run) check(dir string, args ...string) read.Check {
	args = append([]string{"check", dir, "--min-free", "0", "--max-p99", "1h", "--json"}, args...)
	c, err := read.ParseCheck(bytes.NewReader(r.exec(diskcanary, args...)))
	if err != nil {
		r.Fatal(err)
	}
	return c
}

// latLog reads check's --lat-log file.
func (r *run) latLog(file string) read.Pool {
	f, err := os.Open(file)
	if err != nil {
		r.Fatal(err)
	}
	defer f.Close()
	p := read.Pool{}
	if err := p.AddLatLog(f); err != nil {
		r.Fatal(err)
	}
	return p
}

// percentiles of one run, in microseconds: what the tables print.
type percentiles struct{ p50, p90, p99 float64 }

func fioPercentiles(r *run, l read.FIOLatency) percentiles {
	var p [3]float64
	for i, q := range []float64{50, 90, 99} {
		d, err := l.P(q)
		if err != nil {
			r.Fatal(err)
		}
		p[i] = us(d)
	}
	return percentiles{p[0], p[1], p[2]}
}

func checkPercentiles(c read.Check) percentiles {
	return percentiles{us(read.Seconds(c.Latency.P50)), us(read.Seconds(c.Latency.P90)), us(read.Seconds(c.Latency.P99))}
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// daemon is a running `diskcanary serve`.
type daemon struct {
	p       *testkit.Process
	url     string
	startup time.Duration // exec to its port accepting connections
}

// serve starts diskcanary serve with config (YAML) and extra flags.
func (r *run) serve(config string, flags ...string) *daemon {
	addr := testkit.FreeAddr(r)
	args := []string{"serve", "--web.listen-address", addr, "--log.level", "warn"}
	if config != "" {
		f := filepath.Join(r.TempDir(), "diskcanary.yml")
		if err := os.WriteFile(f, []byte(config), 0o644); err != nil {
			r.Fatal(err)
		}
		args = append(args, "--config.file", f)
	}
	t0 := time.Now()
	p := testkit.StartProcess(r, diskcanary, append(args, flags...)...)
	p.WaitListening(r, addr, 30*time.Second)
	return &daemon{p: p, url: "http://" + addr + "/metrics", startup: time.Since(t0)}
}

func (d *daemon) stop() { stopProcess(d.p) }

// histogram reads one of the daemon's native histograms.
func (d *daemon) histogram(r *run, metric, probe string) *read.Histogram {
	h, err := read.ScrapeHistogram(d.url, metric, map[string]string{"probe": probe})
	if err != nil {
		r.Fatal(err)
	}
	return h
}

// started waits for the daemon's first observation of metric (a first
// start lays out a read probe's working set: up to 10 minutes) and returns
// the histogram then.
func (d *daemon) started(r *run, metric, probe string) *read.Histogram {
	var h0 *read.Histogram
	if !waitFor(10*time.Minute, 500*time.Millisecond, func() bool {
		h, err := read.ScrapeHistogram(d.url, metric, map[string]string{"probe": probe})
		h0 = h
		return err == nil && h.Count > 0
	}) {
		r.Fatalf("%s{probe=%q}: no observation in 10 minutes", metric, probe)
	}
	return h0
}

// windowSince waits until the daemon has observed samples more of metric
// since h0, or for phase when samples is 0, and returns what it observed in
// between: the daemon's own numbers, read as its alerts read them.
func (d *daemon) windowSince(r *run, h0 *read.Histogram, metric, probe string, samples int, phase time.Duration) *read.Histogram {
	var w *read.Histogram
	since := func() bool {
		var err error
		if w, err = d.histogram(r, metric, probe).Since(h0); err != nil {
			r.Fatal(err)
		}
		return samples > 0 && w.Count >= float64(samples)
	}
	if samples > 0 {
		// Every 10 s, not faster: a scrape is work the daemon does beside
		// its probe (at once a second it reached the daemon's p99).
		waitFor(24*time.Hour, 10*time.Second, since)
	} else {
		time.Sleep(phase)
		since()
	}
	return w
}

func histogramPercentiles(h *read.Histogram) percentiles {
	return percentiles{h.Quantile(0.5) * 1e6, h.Quantile(0.9) * 1e6, h.Quantile(0.99) * 1e6}
}

// samples is one source's latencies over its phases, pooled as one run
// that took them all: the daemon's histogram windows added and read as
// its alerts read them, the other tools' ops exact, by nearest rank.
type samples struct {
	hist *read.Histogram
	ops  read.Pool
}

// addWindow adds one of the daemon's histogram windows.
func (s *samples) addWindow(r *run, w *read.Histogram) {
	if s.hist == nil {
		s.hist = w
		return
	}
	h, err := s.hist.Add(w)
	if err != nil {
		r.Fatal(err)
	}
	s.hist = h
}

// addOps adds a tool's ops.
func (s *samples) addOps(p read.Pool) {
	if s.ops == nil {
		s.ops = read.Pool{}
	}
	s.ops.AddPool(p)
}

// addFIO adds one fio run's ops.
func (s *samples) addFIO(r *run, l read.FIOLatency) {
	p := read.Pool{}
	if err := p.AddFIO(l); err != nil {
		r.Fatal(err)
	}
	s.addOps(p)
}

// addSamples adds another phase's samples of the same source.
func (s *samples) addSamples(r *run, o *samples) {
	if o.hist != nil {
		s.addWindow(r, o.hist)
	}
	if o.ops != nil {
		s.addOps(o.ops)
	}
}

func (s *samples) count() int64 {
	if s.hist != nil {
		return int64(s.hist.Count)
	}
	return s.ops.Count()
}

func (s *samples) percentiles() percentiles {
	if s.hist != nil {
		return histogramPercentiles(s.hist)
	}
	return percentiles{us(s.ops.P(50)), us(s.ops.P(90)), us(s.ops.P(99))}
}

// spread is the range of the rounds' own ratios, printed beside a pooled
// one.
func spread(ratios []float64) string {
	return fmt.Sprintf("%.2f-%.2f", slices.Min(ratios), slices.Max(ratios))
}

// nodeBPF starts the daemon's block-latency eBPF program (a second
// diskcanary with only that collector on) around a reference's round (fio,
// check, etcd), so the reference's I/O passes the same program as the
// daemon's, as every process's block requests do on a node running the
// daemon. It returns the stop; nothing runs when off, or when the program
// cannot load here (then the daemon runs without it too).
//
// Why: where an fdatasync is CPU work (ext4 on a tmpfs-backed loop device)
// the program costs more than its own ~1 µs a request, so a reference
// without it is not compared like with like (go run ./bench
// blocklatency-cost).
func (r *run) nodeBPF(on bool) (stop func()) {
	if !on {
		return func() {}
	}
	d := r.serve("", "--no-collector.probes", "--no-collector.smart", "--no-collector.diskstats",
		"--no-collector.errors", "--no-collector.pressure")
	loaded := false
	waitFor(10*time.Second, 100*time.Millisecond, func() bool {
		b, err := scrapeText(d.url)
		loaded = strings.Contains(b, "diskcanary_blocklatency_available 1")
		return err == nil && (loaded || strings.Contains(b, "diskcanary_blocklatency_available 0"))
	})
	if !loaded {
		d.stop()
		return func() {}
	}
	return d.stop
}

func nodeBPFSaid(on bool) string {
	if on {
		return "references under the node's eBPF program: yes"
	}
	return "references under the node's eBPF program: no"
}

// where names a directory for a heading: path and filesystem type.
func where(dir string) string {
	b, err := blockdev.Resolve(dir, "/proc", "/sys")
	switch {
	case err != nil:
		return dir
	case b.Device != "":
		return fmt.Sprintf("%s (%s on %s)", dir, b.FSType, b.Device)
	}
	return fmt.Sprintf("%s (%s)", dir, b.FSType)
}

// fsType names the filesystem dir is on (mountinfo's name), "" when
// unknown.
func fsType(dir string) string {
	b, _ := blockdev.Resolve(dir, "/proc", "/sys")
	return b.FSType
}
