// Command bench runs diskcanary's benchmarks: each comparison interleaves
// diskcanary and its reference (fio, etcd, sysstat, node_exporter, the
// kernel's own view) in the same run, quotes medians and judges the paired
// ratios (bench/stats). Needs root (loop devices, FUSE, eBPF) and the tools
// .ci/run installs; a scenario whose tool is missing is skipped, saying so.
//
//	go run ./bench [flags] [scenario...]
//	go run ./bench -report docs/benchmarks.md     # the whole suite, recorded
//	go run ./bench -rounds 1 -samples 300 daemon-vs-fio
//
// Without scenarios it runs the suite (-list prints it). Flags given
// override every selected scenario's own settings. With -report it
// rewrites the generated section of that file (between its bench markers),
// keeping the runs recorded by hand around it.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// params are a scenario's settings; the suite sets each scenario's, flags
// override them.
type params struct {
	Dir        string        // where the disk comparisons run
	Rounds     int           // interleaved rounds
	Samples    int           // ops per tool per round
	Gap        time.Duration // the paced WAL probe's gap (fio --thinktime)
	Ops        int           // fdatasyncs per WAL burst
	FUSEDelay  time.Duration // run on the FUSE test filesystem, this much per fdatasync
	Reads      bool          // also the 4k read probe against fio's random reads
	Check      bool          // also `diskcanary check`, judged against the daemon
	NodeBPF    bool          // references under the daemon's eBPF program
	Rates      []int         // etcd-vs-daemon: puts per second; capacity-vs-fio: the sweep's IOPS steps
	MaxPhase   time.Duration // etcd-vs-daemon: each source's phase beside the etcd
	Interval   time.Duration // iostat-vs-sysstat: report interval; scrape-load: window; soak: sampling step; etcd-vs-daemon: the default probe's interval
	Duration   time.Duration // scrape-load: continuous load; soak: the whole run
	Scrapers   int           // scrape-load: concurrent scrapers
	Devices    int           // diskstats-N: synthetic devices (up to maxSynthDevices)
	Tolerance  float64       // iostat-vs-sysstat: each column within this share of sysstat's
	Nodes      []int         // fleet-scale: simulated fleet sizes, one run each
	Steady     time.Duration // fleet-scale: the window at the end of each run for medians and maxima
	PerCluster int           // fleet-scale: nodes per cluster
	Slow       float64       // fleet-scale: share of slow nodes
	Keep       bool          // fleet-scale: keep the results, logs and templates
	Shards     int           // fleet-sharded: Prometheus, each with its share of the clusters
	Throttle   int           // capacity-vs-fio: a loop device the blkio cgroup holds to this many read IOPS
}

var defaults = params{
	Dir: "/var/tmp/diskcanary-bench", Rounds: 5, Samples: 10000, Gap: config.DefaultWALGap, Ops: config.DefaultWALOps,
	Reads: true, Check: true, NodeBPF: true, Rates: []int{10, 80, 1000}, MaxPhase: 25 * time.Second,
	Interval: 10 * time.Second, Duration: 60 * time.Second, Scrapers: 50, Devices: 1000, Tolerance: 0.02,
	Nodes: []int{100, 1000, 5000}, Steady: 10 * time.Minute, PerCluster: 100, Slow: 0.02, Shards: 2,
}

// scenario is one entry of the suite.
type scenario struct {
	name, title string
	run         func(*run, params) bool
	set         func(*params) // the suite's settings for it, over defaults
	// argv is a command scenario's command line: the report shows it
	// rather than the go run ./bench line.
	argv string
}

var suite = []scenario{
	{"probes-vs-fio", "probes vs fio (disk)", probesVsFIO, func(p *params) { p.Rounds = 15 }, ""},
	{"probes-vs-fio-fuse-2ms", "probes vs fio (FUSE 2 ms)", probesVsFIO,
		func(p *params) { p.FUSEDelay, p.Samples = 2*time.Millisecond, 1000 }, ""},
	{"probes-vs-fio-fuse-12ms", "probes vs fio (FUSE 12 ms)", probesVsFIO,
		func(p *params) { p.FUSEDelay, p.Samples = 12*time.Millisecond, 500 }, ""},
	{"etcd-vs-daemon", "etcd WAL vs the default probe beside it (80 puts/s)", etcdVsDaemon,
		func(p *params) { p.Rounds, p.Rates, p.MaxPhase, p.Interval = 2, []int{80}, 60*time.Second, time.Second }, ""},
	{"daemon-vs-fio", "daemon's own histograms vs fio, paced (disk)", daemonVsFIO, func(p *params) {}, ""},
	{"capacity-vs-fio", "capacity sweep vs fio latency_target and rate_iops (disk)", capacityVsFIO,
		func(p *params) {
			p.Rounds, p.Rates = 3, []int{1000, 1600, 2500, 4000, 6300, 10000, 16000, 25000, 40000, 63000, 100000}
		}, ""},
	{"capacity-vs-fio-blkio-500", "capacity sweep vs fio (loop device, blkio 500 read IOPS)", capacityVsFIO,
		func(p *params) { p.Rounds, p.Throttle, p.Rates = 3, 500, []int{250, 400, 450, 500, 550, 600, 700} }, ""},
	// One writer (the WAL's concurrency), each append 5 ms of fdatasync plus
	// the FUSE round trips of its write and sync (p50 ~5.7 ms in all): at
	// most 1/5.7 ms ≈ 175 appends/s, so 200 is never carried and the IOPS
	// at a 10 ms bound is at most the 160 step; below that an append waits
	// only behind a slow one before it, and the bound leaves 10 - 5.7 =
	// 4.3 ms for that wait, so a tail of slow round trips ends it a step
	// or two lower. Every step's p99 is ≥ 5 ms. The rates start at 50, a
	// quarter of the ceiling, so steps below the knee show.
	{"capacity-vs-fio-fuse-5ms", "capacity sweep vs fio, WAL (FUSE 5 ms)", capacityVsFIO,
		func(p *params) {
			p.Rounds, p.FUSEDelay, p.Rates = 3, 5*time.Millisecond, []int{50, 100, 125, 160, 200, 250}
		}, ""},
	{"probe-overhead", "per-op overhead (tmpfs)", probeOverhead, func(p *params) { p.Rounds, p.Samples = 9, 500000 }, ""},
	{"iostat-vs-sysstat", "iostat vs sysstat", iostatVsSysstat, func(p *params) { p.Interval, p.Rounds = 2*time.Second, 3 }, ""},
	{"diskstats-100", "diskstats scrape and memory, 100 devices", diskstatsVsNodeExporter, func(p *params) { p.Devices, p.Samples = 100, 40 }, ""},
	{"diskstats-1000", "diskstats scrape and memory, 1000 devices", diskstatsVsNodeExporter, func(p *params) { p.Devices, p.Samples = 1000, 40 }, ""},
	{"diskstats-10000", "diskstats scrape and memory, 10000 devices", diskstatsVsNodeExporter, func(p *params) { p.Devices, p.Samples = 10000, 10 }, ""},
	command("smart-parse", "SMART parse + metrics per device",
		"go", "test", "-run", "^$", "-bench", "SmartParseAndMetrics|Parse(ATA|NVMe|SCSI)", "-benchmem", "./collector/", "./internal/smart/"),
	{"scrape-load", "scrape load (50 scrapers, 60 s)", scrapeLoad, func(p *params) {}, ""},
	{"soak", "soak (30 min, probes every 100 ms)", soak, func(p *params) { p.Duration = 30 * time.Minute }, ""},
	{"syscall-vs-tools", "each tool's fdatasync and 4k read vs the kernel's syscall time (bpftrace)", syscallVsTools, func(p *params) { p.Rounds, p.Samples = 2, 5000 }, ""},
	command("blocklatency-vs-bpftrace", "block request latency vs bpftrace (same requests)",
		"go", "test", "-run", "^$", "-bench", "BlocklatencyVsBpftrace", "-benchtime", "5x", "./collector/blocklatency/"),
	command("blocklatency-cost", "block request latency cost (per request, per scrape)",
		"go", "test", "-run", "^$", "-bench", "BlocklatencyPerRequest|BlocklatencyScrape", "-count", "5", "./collector/blocklatency/", "./collector/"),
	command("kmsg-flood", "kernel log flood (10,000 records/min): scrape time, heap",
		"go", "test", "-run", "^$", "-bench", "ErrorsScrapeUnderKmsgFlood", "-benchtime", "1x", "./collector/"),
	command("kmsg-classify", "kernel log record classification",
		"go", "test", "-run", "^$", "-bench", "Classify", "-benchmem", "-count", "5", "./internal/kmsg/"),
	// About 3.6 h and 10 GiB of RAM at 100, 1,000 and 5,000 nodes for 70
	// minutes each: run it alone (go run ./bench fleet-scale), or
	// go run ./bench -duration 20m -nodes 100,1000 fleet-scale for a
	// shorter look.
	{"fleet-scale", "fleet at scale: one Prometheus, the shipped rules (100 1000 5000 nodes, 70 min each)", fleetScale,
		func(p *params) { p.Duration = 70 * time.Minute }, ""},
	// About 30 minutes and 12 GiB of RAM: run it alone, or
	// go run ./bench -nodes 200 -duration 5m -steady 2m fleet-sharded for a
	// look. 25 minutes fill the 15-minute windows the global layer reads
	// and give a 10-minute steady window.
	{"fleet-sharded", "fleet sharded by cluster: 2 Prometheus, VictoriaMetrics and vmalert (5000 nodes, 25 min)", fleetSharded,
		func(p *params) { p.Nodes, p.Duration = []int{5000}, 25*time.Minute }, ""},
}

// command is a scenario that runs a program and passes when it exits 0:
// the Go benchmarks of the packages.
func command(name, title string, argv ...string) scenario {
	return scenario{name, title, func(r *run, _ params) bool {
		cmd := exec.Command(argv[0], argv[1:]...)
		var out bytes.Buffer
		cmd.Stdout = io.MultiWriter(&out, os.Stdout)
		cmd.Stderr = cmd.Stdout
		err := cmd.Run()
		r.out.WriteString(out.String())
		if err != nil {
			r.printf("%s: %v\n", strings.Join(argv, " "), err)
			return false
		}
		return true
	}, func(*params) {}, strings.Join(argv, " ")}
}

// diskcanary is the binary the scenarios run, built from this tree.
var diskcanary string

func main() {
	p := defaults
	fl := flag.CommandLine
	report := fl.String("report", "", "rewrite the generated section of this markdown file (docs/benchmarks.md)")
	list := fl.Bool("list", false, "print the suite's scenarios and exit")
	fl.StringVar(&p.Dir, "dir", p.Dir, "directory the disk comparisons run in")
	fl.IntVar(&p.Rounds, "rounds", p.Rounds, "interleaved rounds")
	fl.IntVar(&p.Samples, "samples", p.Samples, "ops per tool per round")
	fl.DurationVar(&p.Gap, "gap", p.Gap, "the paced WAL probe's gap (fio --thinktime)")
	fl.IntVar(&p.Ops, "ops", p.Ops, "fdatasyncs per WAL burst")
	fl.DurationVar(&p.FUSEDelay, "fuse-delay", 0, "run on the FUSE test filesystem with this much per fdatasync")
	fl.BoolVar(&p.Reads, "reads", p.Reads, "also compare the 4k read probe with fio's random reads")
	fl.BoolVar(&p.Check, "check", p.Check, "also judge diskcanary check against the daemon")
	fl.BoolVar(&p.NodeBPF, "node-bpf", p.NodeBPF, "run the references under the daemon's block-latency eBPF program")
	rates := fl.String("rates", "10,80,1000", "etcd-vs-daemon: puts per second; capacity-vs-fio: the sweep's IOPS steps")
	fl.DurationVar(&p.MaxPhase, "max-phase", p.MaxPhase, "etcd-vs-daemon: each source's phase beside the etcd")
	fl.DurationVar(&p.Interval, "interval", p.Interval, "iostat-vs-sysstat: report interval; scrape-load: window; soak: sampling step; etcd-vs-daemon: the default probe's interval")
	fl.DurationVar(&p.Duration, "duration", p.Duration, "scrape-load: continuous load (and interleaved windows over as long); soak: the whole run")
	fl.IntVar(&p.Scrapers, "scrapers", p.Scrapers, "scrape-load: concurrent scrapers")
	fl.IntVar(&p.Devices, "devices", p.Devices, "diskstats-N: synthetic block devices (1..50000)")
	fl.IntVar(&p.Throttle, "throttle", 0, "capacity-vs-fio: run on a loop device the blkio cgroup holds to this many read IOPS")
	fl.Float64Var(&p.Tolerance, "tolerance", p.Tolerance, "iostat-vs-sysstat: each column within this share of sysstat's")
	nodes := fl.String("nodes", "100,1000,5000", "fleet-scale, fleet-sharded: simulated fleet sizes, one run each")
	fl.DurationVar(&p.Steady, "steady", p.Steady, "fleet-scale, fleet-sharded: the window at the end of each run for medians and maxima")
	fl.IntVar(&p.PerCluster, "nodes-per-cluster", p.PerCluster, "fleet-scale, fleet-sharded: nodes per cluster")
	fl.Float64Var(&p.Slow, "slow", p.Slow, "fleet-scale, fleet-sharded: share of nodes whose probes are slow (8x)")
	fl.BoolVar(&p.Keep, "keep", false, "fleet-scale, fleet-sharded: keep the temporary directory (results, logs, templates)")
	fl.IntVar(&p.Shards, "shards", p.Shards, "fleet-sharded: per-cluster Prometheus (2..4), each scraping every -shards-th cluster")
	flag.Parse()
	if *list {
		for _, s := range suite {
			fmt.Printf("%-26s %s\n", s.name, s.title)
		}
		return
	}
	var err error
	if p.Rates, err = positives("rates", *rates); err != nil {
		fatal(err)
	}
	if p.Nodes, err = positives("nodes", *nodes); err != nil {
		fatal(err)
	}
	chosen, err := choose(flag.Args())
	if err != nil {
		fatal(err)
	}
	// The scenarios make loop devices and mounts through internal/testkit,
	// whose helpers run only in end-to-end runs: a bench is one.
	os.Setenv(testkit.E2EEnv, "1")
	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })

	tmp, err := os.MkdirTemp("", "diskcanary-bench-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(tmp)
	diskcanary = filepath.Join(tmp, "diskcanary")
	// Built as it ships (static, stripped): its text pages count in the
	// RSS the scenarios measure.
	if out, err := exec.Command("deploy/build.sh", diskcanary).CombinedOutput(); err != nil {
		fatal(fmt.Errorf("deploy/build.sh (run from the repository's root): %v\n%s", err, out))
	}
	// The versions as built, before a scenario runs: the tree may move on
	// during a run of hours.
	built := versions()

	start := time.Now()
	var sections bytes.Buffer
	type result struct{ name, verdict, took string }
	var results []result
	failed := false
	// An interrupt (^C, kill) takes down what the running scenario set up
	// before exiting: killed without its cleanups, a FUSE scenario leaves
	// its mount with requests waiting and umount hangs.
	var current atomic.Pointer[run]
	var interrupted atomic.Bool
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt, unix.SIGTERM)
	go func() {
		sig := <-interrupt
		interrupted.Store(true)
		fmt.Fprintf(os.Stderr, "bench: %v: cleaning up\n", sig)
		if r := current.Load(); r != nil {
			r.cleanup()
		}
		os.RemoveAll(tmp)
		os.Exit(130)
	}()
	for _, s := range chosen {
		sp := defaults
		s.set(&sp)
		sp = override(sp, p, given)
		cmd := commandFor(s)
		fmt.Printf("=== %s: %s\n", s.title, cmd)
		t0 := time.Now()
		r := &run{name: s.name}
		current.Store(r)
		verdict := r.do(func(r *run) bool { return s.run(r, sp) })
		if interrupted.Load() {
			select {} // the handler exits once the cleanups are done
		}
		failed = failed || verdict == "FAIL"
		results = append(results, result{s.title, verdict, time.Since(t0).Round(time.Second).String()})
		fmt.Fprintf(&sections, "### %s\n\n```\n$ %s\n%s```\n\n", s.title, cmd, r.out.String())
	}
	fmt.Printf("\n==== bench summary (%v) ====\n", time.Since(start).Round(time.Second))
	for _, x := range results {
		fmt.Printf("%-50s %-14s %s\n", x.name, x.verdict, x.took)
	}
	if *report != "" {
		var rows []reportRow
		for _, x := range results {
			rows = append(rows, reportRow(x))
		}
		date := time.Now().UTC().Format("2006-01-02")
		var err error
		if len(chosen) == len(suite) {
			var b bytes.Buffer
			fmt.Fprintf(&b, "Generated by `go run ./bench -report %s` on %s (%v).\n\n", *report, date, time.Since(start).Round(time.Second))
			fmt.Fprintf(&b, "- machine: %s\n- %s\n", machine(), built)
			b.WriteString("- every comparison interleaves diskcanary and its reference in the same run and quotes medians;\n  these are shared 2-vCPU VMs, so single runs are noisy.\n\n| bench | verdict | time |\n|---|---|---|\n")
			for _, x := range rows {
				fmt.Fprintf(&b, "| %s | %s | %s |\n", x.name, x.verdict, x.took)
			}
			b.WriteString("\n")
			b.Write(sections.Bytes())
			err = writeGenerated(*report, b.Bytes())
		} else {
			// Some scenarios: their rows and sections replace those of the
			// last run, each section saying when and on what it ran.
			err = mergeGenerated(*report, rows, sections.String(), fmt.Sprintf("Run on %s: %s; %s.", date, machine(), built))
		}
		if err != nil {
			fatal(err)
		}
		fmt.Println("report written to", *report)
	}
	if failed {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(2)
}

func choose(names []string) ([]scenario, error) {
	if len(names) == 0 {
		return suite, nil
	}
	var out []scenario
next:
	for _, n := range names {
		for _, s := range suite {
			if s.name == n {
				out = append(out, s)
				continue next
			}
		}
		return nil, fmt.Errorf("no scenario %q (go run ./bench -list)", n)
	}
	return out, nil
}

// override puts the flags given on the command line over a scenario's
// settings.
func override(sp, flags params, given map[string]bool) params {
	for name, apply := range map[string]func(){
		"dir": func() { sp.Dir = flags.Dir }, "rounds": func() { sp.Rounds = flags.Rounds },
		"samples": func() { sp.Samples = flags.Samples }, "gap": func() { sp.Gap = flags.Gap },
		"ops": func() { sp.Ops = flags.Ops }, "fuse-delay": func() { sp.FUSEDelay = flags.FUSEDelay },
		"reads": func() { sp.Reads = flags.Reads }, "check": func() { sp.Check = flags.Check },
		"node-bpf": func() { sp.NodeBPF = flags.NodeBPF }, "rates": func() { sp.Rates = flags.Rates },
		"max-phase": func() { sp.MaxPhase = flags.MaxPhase },
		"interval":  func() { sp.Interval = flags.Interval }, "duration": func() { sp.Duration = flags.Duration },
		"scrapers": func() { sp.Scrapers = flags.Scrapers }, "devices": func() { sp.Devices = flags.Devices },
		"tolerance": func() { sp.Tolerance = flags.Tolerance },
		"nodes":     func() { sp.Nodes = flags.Nodes }, "steady": func() { sp.Steady = flags.Steady },
		"nodes-per-cluster": func() { sp.PerCluster = flags.PerCluster }, "slow": func() { sp.Slow = flags.Slow },
		"keep": func() { sp.Keep = flags.Keep }, "throttle": func() { sp.Throttle = flags.Throttle },
	} {
		if given[name] {
			apply()
		}
	}
	return sp
}

// commandFor is the command that reruns scenario s alone with the same
// settings, for the report.
func commandFor(s scenario) string {
	if s.argv != "" {
		return s.argv
	}
	args := []string{"go", "run", "./bench"}
	flag.Visit(func(f *flag.Flag) {
		if f.Name != "report" {
			args = append(args, "-"+f.Name, f.Value.String())
		}
	})
	return strings.Join(append(args, s.name), " ")
}

// positives reads flag name's comma-separated positive integers.
func positives(name, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n <= 0 {
			return nil, fmt.Errorf("-%s %q: want positive integers, comma-separated", name, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// The markers around the generated section of the report.
const (
	beginMark = "<!-- go run ./bench -report: generated from here -->\n"
	endMark   = "<!-- go run ./bench -report: generated to here -->\n"
)

// generated reads file and finds its generated section: what lies
// between old[:from] and old[to:].
func generated(file string) (old []byte, from, to int, err error) {
	old, err = os.ReadFile(file)
	if err != nil {
		return nil, 0, 0, err
	}
	i, j := bytes.Index(old, []byte(beginMark)), bytes.Index(old, []byte(endMark))
	if i < 0 || j < i {
		return nil, 0, 0, fmt.Errorf("%s: no %q ... %q markers to write between", file, strings.TrimSpace(beginMark), strings.TrimSpace(endMark))
	}
	return old, i + len(beginMark), j, nil
}

// writeGenerated replaces what lies between the markers in file.
func writeGenerated(file string, section []byte) error {
	old, from, to, err := generated(file)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.Write(old[:from])
	b.Write(section)
	b.Write(old[to:])
	return os.WriteFile(file, b.Bytes(), 0o644)
}

// reportRow is a scenario's row of the report's table.
type reportRow struct{ name, verdict, took string }

// mergeGenerated puts the rows and "### " sections of a run of some
// scenarios into the generated section of file: a scenario already there
// is replaced in place, a new one is added at the end. Each new section
// gets runLine under its heading.
func mergeGenerated(file string, rows []reportRow, sections, runLine string) error {
	old, from, to, err := generated(file)
	if err != nil {
		return err
	}
	gen := string(old[from:to])
	head, body, _ := strings.Cut(gen, "\n### ")
	for _, r := range rows {
		row := fmt.Sprintf("| %s | %s | %s |\n", r.name, r.verdict, r.took)
		if k := strings.Index(head, "| "+r.name+" |"); k >= 0 {
			end := k + strings.IndexByte(head[k:], '\n') + 1
			head = head[:k] + row + head[end:]
		} else if k := strings.LastIndex(head, "|\n"); k >= 0 {
			head = head[:k+2] + row + head[k+2:]
		} else {
			head += row
		}
	}
	oldSections := []string{}
	if body != "" {
		oldSections = strings.Split("### "+body, "\n### ")
		for k := 1; k < len(oldSections); k++ {
			oldSections[k] = "### " + oldSections[k]
		}
	}
	title := func(sec string) string { t, _, _ := strings.Cut(strings.TrimPrefix(sec, "### "), "\n"); return t }
	for _, sec := range strings.Split(sections, "\n### ") {
		if sec = strings.TrimSpace(sec); sec == "" {
			continue
		}
		sec = "### " + strings.TrimPrefix(sec, "### ")
		t, rest, _ := strings.Cut(sec, "\n")
		sec = t + "\n\n" + runLine + "\n" + rest + "\n\n"
		replaced := false
		for k := range oldSections {
			if title(oldSections[k]) == title(sec) {
				oldSections[k], replaced = sec, true
			}
		}
		if !replaced {
			oldSections = append(oldSections, sec)
		}
	}
	for k := range oldSections {
		oldSections[k] = strings.TrimRight(oldSections[k], "\n") + "\n\n"
	}
	return writeGenerated(file, []byte(strings.TrimRight(head, "\n")+"\n\n"+strings.Join(oldSections, "")))
}

func machine() string {
	cpu := firstField("/proc/cpuinfo", "model name")
	mem := firstField("/proc/meminfo", "MemTotal")
	var kib float64
	_, _ = fmt.Sscan(strings.TrimSuffix(mem, " kB"), &kib)
	var u unix.Utsname
	_ = unix.Uname(&u)
	return fmt.Sprintf("%d CPUs (%s), %.0f GiB RAM, kernel %s", runtime.NumCPU(), cpu, kib/(1<<20), unix.ByteSliceToString(u.Release[:]))
}

func versions() string {
	first := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return name + " missing"
		}
		return strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	rev, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	return fmt.Sprintf("%s, %s, %s, %s, diskcanary %s", first("fio", "--version"), first("iostat", "-V"),
		first("etcd", "--version"), runtime.Version(), strings.TrimSpace(string(rev)))
}

func firstField(file, key string) string {
	b, _ := os.ReadFile(file)
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// scrapeText fetches a /metrics page in the text format.
func scrapeText(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
