package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/diskcanary/diskcanary/bench/read"
	"github.com/diskcanary/diskcanary/bench/stats"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// maxSynthDevices bounds -devices: the tree is written to a temporary
// directory, six files a device.
const maxSynthDevices = 50000

// The targets of issue 43, judged per round and quoted as paired ratios
// (stats.PairedRatio): a fresh process's first scrape no slower than
// node_exporter's, its steady scrape at most 0.7 of it, its peak RSS no
// more than node_exporter's, and at most 25 MiB with every default
// collector on at up to 1,000 devices.
const (
	firstBound        = 1.0
	steadyBound       = 0.7
	allCollectorsPeak = 25.0 // MiB, at up to allCollectorsUpTo devices
	allCollectorsUpTo = 1000
)

// diskstatsVsNodeExporter: a synthetic proc + sys tree of p.Devices block
// devices (60 % SCSI disks, 30 % NVMe namespaces, 10 % dm devices over
// two disks each, 20-field /proc/diskstats lines), served by `diskcanary
// serve` (diskstats only) and by node_exporter (diskstats only). Each of
// p.Rounds rounds starts both afresh and times, interleaved and in
// alternating order, each one's first /metrics (a fresh process's), then
// p.Samples steady scrapes each, then reads their VmRSS and VmHWM. A third
// process, diskcanary with every default collector on (probes on a
// temporary directory, SMART, eBPF block latency, the kernel log,
// pressure), then runs alone over the same tree, once its probes have run,
// for the same scrapes and its memory. Verdicts: the paired ratios against
// the targets above.
func diskstatsVsNodeExporter(r *run, p params) bool {
	nodeExporter := ""
	for _, name := range []string{"prometheus-node-exporter", "node_exporter"} {
		if path, err := exec.LookPath(name); err == nil {
			nodeExporter = path
			break
		}
	}
	if nodeExporter == "" {
		r.Skip("node_exporter is missing (apt-get install prometheus-node-exporter)")
	}
	if p.Devices < 1 || p.Devices > maxSynthDevices {
		r.Fatalf("-devices %d: want 1..%d", p.Devices, maxSynthDevices)
	}
	work, tree := r.TempDir(), memoryTree(r, p.Devices)
	proc, sys, udev, probeDir := filepath.Join(tree, "proc"), filepath.Join(tree, "sys"), filepath.Join(tree, "udev"), filepath.Join(work, "probe")
	sysfsFiles := writeDeviceTree(r, proc, sys, p.Devices)
	for _, d := range []string{udev, probeDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			r.Fatal(err)
		}
	}
	paths := []string{"--path.procfs", proc, "--path.sysfs", sys}
	diskstatsOnly := func() *scraped {
		d := r.serve("probes:\n  enabled: false\ndiskstats:\n  enabled: true\n  device_include: '.*'\n",
			append(paths, "--no-collector.probes", "--no-collector.smart",
				// diskstats alone, as node_exporter runs below.
				"--no-collector.blocklatency", "--no-collector.errors", "--no-collector.pressure")...)
		return &scraped{url: d.url, pid: d.p.Cmd.Process.Pid, stop: d.stop, startup: d.startup,
			series: "diskcanary_disk_reads_completed_total", collector: "diskcanary_collector_duration_seconds"}
	}
	nodeExporterOnly := func() *scraped {
		addr := testkit.FreeAddr(r)
		t0 := time.Now()
		ne := testkit.StartProcess(r, nodeExporter, "--path.procfs="+proc, "--path.sysfs="+sys, "--path.udev.data="+udev,
			"--collector.disable-defaults", "--collector.diskstats", "--collector.diskstats.device-exclude=^$",
			"--web.listen-address="+addr, "--log.level=warn")
		ne.WaitListening(r, addr, 30*time.Second)
		return &scraped{url: "http://" + addr + "/metrics", pid: ne.Cmd.Process.Pid, stop: func() { stopProcess(ne) }, startup: time.Since(t0),
			series: "node_disk_reads_completed_total", collector: "node_scrape_collector_duration_seconds"}
	}
	// Every default collector: the embedded default's probes (a small
	// read working set, so laying it out takes a moment), diskstats of
	// every device, SMART of what smartctl finds on this host.
	allConfig := fmt.Sprintf("probes:\n  enabled: true\n  targets:\n    - {name: wal, kind: wal, dir: %q}\n"+
		"    - {name: randread, kind: randread, dir: %q, working_set: 16MiB}\n"+
		"diskstats:\n  enabled: true\n  device_include: '.*'\nsmart:\n  enabled: true\n", probeDir, probeDir)
	allCollectors := func() *scraped {
		d := r.serve(allConfig, paths...)
		return &scraped{url: d.url, pid: d.p.Cmd.Process.Pid, stop: d.stop, startup: d.startup,
			series: "diskcanary_disk_reads_completed_total", collector: "diskcanary_collector_duration_seconds"}
	}
	// probesRan waits until both probes of e have run, so its memory is
	// a working daemon's.
	probesRan := func(e *scraped) {
		for _, probe := range []string{"wal", "randread"} {
			if !waitFor(2*time.Minute, 200*time.Millisecond, func() bool {
				m, err := scrapeMetrics(e.url)
				v, n := m.Sum("diskcanary_probe_runs_total", map[string]string{"probe": probe})
				return err == nil && n == 1 && v > 0
			}) {
				r.Fatalf("every default collector: probe %s has not run in 2 minutes", probe)
			}
		}
	}
	// Uncompressed, as curl asked for it: gzip is work of its own, and
	// not the collectors'.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	scrape := func(e *scraped) (time.Duration, read.Metrics) {
		t0 := time.Now()
		resp, err := client.Get(e.url)
		if err != nil {
			r.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(t0)
		if err != nil {
			r.Fatal(err)
		}
		m, err := read.ParseText(strings.NewReader(string(body)))
		if err != nil {
			r.Fatal(err)
		}
		_, n := m.Sum(e.series, nil)
		e.exported = n
		c, n := m.Sum(e.collector, map[string]string{"collector": "diskstats"})
		if n != 1 {
			r.Fatalf("%s: no %s{collector=\"diskstats\"}", e.url, e.collector)
		}
		e.took = append(e.took, c)
		return took, m
	}
	// measure times each of es's first scrape, runs then, then samples
	// steady scrapes of each, interleaved, es in the order given, then
	// reads their memory.
	measure := func(es []*scraped, rs []*series, then func()) {
		for i, e := range es {
			took, _ := scrape(e)
			rs[i].first = append(rs[i].first, took.Seconds())
			rs[i].startup = append(rs[i].startup, e.startup.Seconds())
		}
		then()
		steady := make([][]float64, len(es))
		for range p.Samples {
			for i, e := range es {
				took, _ := scrape(e)
				steady[i] = append(steady[i], took.Seconds())
			}
		}
		for i, e := range es {
			rss, hwm := memory(r, e.pid)
			rs[i].steady = append(rs[i].steady, stats.Median(steady[i]))
			rs[i].rss, rs[i].hwm = append(rs[i].rss, rss), append(rs[i].hwm, hwm)
			rs[i].exported, rs[i].took = e.exported, append(rs[i].took, stats.Median(e.took))
		}
	}
	dc, ne, all := &series{}, &series{}, &series{}
	r.printf("tree: %d devices in /proc/diskstats, %d sysfs files; %d rounds, %d steady scrapes each a round; load average before: %s\n",
		p.Devices, sysfsFiles, p.Rounds, p.Samples, loadAverage())
	for round := range p.Rounds {
		// Both start before either is scraped, in alternating order, so
		// neither's first scrape meets the other's start-up.
		es, rs := []*scraped{diskstatsOnly(), nodeExporterOnly()}, []*series{dc, ne}
		if round%2 == 1 {
			es[0], es[1], rs[0], rs[1] = es[1], es[0], rs[1], rs[0]
		}
		measure(es, rs, func() {})
		for _, e := range es {
			e.stop()
		}
		a := allCollectors()
		measure([]*scraped{a}, []*series{all}, func() { probesRan(a) })
		a.stop()
	}
	r.printf("devices exported: diskcanary %d, node_exporter %d, diskcanary with every default collector %d; load average after: %s\n",
		dc.exported, ne.exported, all.exported, loadAverage())
	r.printf("\nmedians over %d rounds, %d devices (ratio: the median of the rounds' diskcanary/node_exporter, range of the rounds' ratios)\n", p.Rounds, p.Devices)
	r.printf("%-40s %12s %14s %20s %12s\n", "", "diskcanary", "node_exporter", "ratio (range)", "all default")
	row := func(what, unit string, scale float64, x func(*series) []float64) float64 {
		ratio, ratios := stats.PairedRatio(x(dc), x(ne)), pairedRatios(x(dc), x(ne))
		r.printf("%-40s %9.2f %-2s %11.2f %-2s %7.3f (%s) %9.2f %-2s\n", what,
			stats.Median(x(dc))*scale, unit, stats.Median(x(ne))*scale, unit, ratio, spread(ratios), stats.Median(x(all))*scale, unit)
		return ratio
	}
	// diskcanary reads its devices' sysfs attributes before it listens
	// (collector.Warmer), so start-up is shown beside the first scrape.
	row("start-up (exec to listening)", "ms", 1000, func(s *series) []float64 { return s.startup })
	first := row("first scrape (a fresh process's)", "ms", 1000, func(s *series) []float64 { return s.first })
	steady := row("steady scrape (median of a round's)", "ms", 1000, func(s *series) []float64 { return s.steady })
	row("diskstats collector (self-reported)", "ms", 1000, func(s *series) []float64 { return s.took })
	row("VmRSS after the scrapes", "MB", 1, func(s *series) []float64 { return s.rss })
	peak := row("VmHWM (peak RSS)", "MB", 1, func(s *series) []float64 { return s.hwm })
	// A text scrape writes diskstats' series after the collector's
	// snapshot (collector.TextCollector): its own time is not node_exporter's
	// kind of figure, so no verdict reads it.
	r.printf("(diskcanary's self-reported diskstats time is its snapshot; the series are written into the scrape after it)\n")
	allPeak := stats.Median(all.hwm)

	ok := true
	verdict := func(what string, holds bool, target string) {
		if holds {
			r.printf("ok: %s %s\n", what, target)
			return
		}
		r.printf("FAIL: %s not %s\n", what, target)
		ok = false
	}
	verdict(fmt.Sprintf("first scrape ×%.3f of node_exporter's", first), first <= firstBound, fmt.Sprintf("≤ ×%.2f", firstBound))
	verdict(fmt.Sprintf("steady scrape ×%.3f of node_exporter's", steady), steady <= steadyBound, fmt.Sprintf("≤ ×%.2f", steadyBound))
	verdict(fmt.Sprintf("peak RSS ×%.3f of node_exporter's", peak), peak <= 1, "≤ ×1.00")
	if p.Devices <= allCollectorsUpTo {
		verdict(fmt.Sprintf("peak RSS with every default collector %.1f MB", allPeak), allPeak <= allCollectorsPeak,
			fmt.Sprintf("≤ %.0f MB at up to %d devices", allCollectorsPeak, allCollectorsUpTo))
	}
	return ok
}

// memoryTree mounts a tmpfs for a tree of n devices: /proc and /sys are
// in memory, and a tree on the disk's filesystem made each sysfs read a
// disk filesystem's (on ext4 on the VM disk, ten times a tmpfs read).
// Every file takes a page.
func memoryTree(r *run, n int) string {
	r.needRoot("mounts a tmpfs for the synthetic /proc and /sys")
	dir := r.TempDir()
	size := fmt.Sprintf("size=%dm", 64+n*16*4096>>20)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", size, "tmpfs", dir).CombinedOutput(); err != nil {
		r.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	r.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			r.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// scraped is one running exporter of a round.
type scraped struct {
	url, series, collector string
	pid                    int
	stop                   func()
	startup                time.Duration
	exported               int       // devices in the last scrape
	took                   []float64 // its own diskstats collector's durations, seconds
}

// series is one exporter's figures over the rounds, one value a round.
type series struct {
	startup, first, steady, took, rss, hwm []float64 // seconds, MiB
	exported                               int
}

// pairedRatios are the rounds' own ratios x[i]/ref[i].
func pairedRatios(x, ref []float64) []float64 {
	var out []float64
	for i := range x {
		if ref[i] > 0 {
			out = append(out, x[i]/ref[i])
		}
	}
	return out
}

// scrapeMetrics fetches and parses a /metrics page.
func scrapeMetrics(url string) (read.Metrics, error) {
	text, err := scrapeText(url)
	if err != nil {
		return nil, err
	}
	return read.ParseText(strings.NewReader(text))
}

// loadAverage is /proc/loadavg's three load averages: the machine is
// shared, and the report says how busy it was.
func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// memory is a process's resident set and its peak, in MiB (the kernel's
// VmRSS and VmHWM).
func memory(r *run, pid int) (rss, peak float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		r.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		var kib float64
		if _, err := fmt.Sscanf(l, "VmRSS: %f kB", &kib); err == nil {
			rss = kib / 1024
		}
		if _, err := fmt.Sscanf(l, "VmHWM: %f kB", &kib); err == nil {
			peak = kib / 1024
		}
	}
	return rss, peak
}

// synthNames are the kernel names of a tree of n devices: 60 % SCSI
// disks, 30 % NVMe namespaces, 10 % dm devices, in /proc/diskstats order.
// SCSI disk names are letters only and as long as the count needs (sdaa,
// sdab, ..., sdaaa past 676), so no default partition pattern of either
// exporter matches them.
func synthNames(n int) (scsi, nvme, dm []string) {
	nn, nd := n*3/10, n/10
	ns := n - nn - nd
	width := 2
	for w := 26 * 26; w < ns; w *= 26 {
		width++
	}
	for i := range ns {
		name := make([]byte, width)
		for j, v := width-1, i; j >= 0; j, v = j-1, v/26 {
			name[j] = byte('a' + v%26)
		}
		scsi = append(scsi, "sd"+string(name))
	}
	for i := range nn {
		nvme = append(nvme, fmt.Sprintf("nvme%dn1", i))
	}
	for i := range nd {
		dm = append(dm, fmt.Sprintf("dm-%d", i))
	}
	return scsi, nvme, dm
}

// writeDeviceTree writes /proc/diskstats, /proc/uptime and, per device,
// the sysfs files a real disk has that either exporter reads (queue/,
// device/, dm/, slaves/): dm-K's slaves are the SCSI disks 2K and 2K+1.
func writeDeviceTree(r *run, proc, sys string, devices int) (sysfsFiles int) {
	scsi, nvme, dm := synthNames(devices)
	// What the other default collectors read from proc: the mount table
	// (errors, the probes' device), and pressure as a kernel with PSI has.
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		r.Fatal(err)
	}
	const psi = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
	files := map[string]string{filepath.Join(proc, "uptime"): "12345.67 23456.78\n", filepath.Join(proc, "self/mountinfo"): string(mountinfo),
		filepath.Join(proc, "pressure/cpu"): psi, filepath.Join(proc, "pressure/io"): psi}
	var diskstats strings.Builder
	i := 0
	device := func(n string, major, minor int, attrs map[string]string) {
		d := filepath.Join(sys, "block", n)
		files[filepath.Join(d, "queue/rotational")] = "0\n"
		files[filepath.Join(d, "queue/logical_block_size")] = "512\n"
		files[filepath.Join(d, "queue/physical_block_size")] = "4096\n"
		for rel, content := range attrs {
			files[filepath.Join(d, rel)] = content + "\n"
		}
		fmt.Fprintf(&diskstats, "%d %d %s %d %d %d %d %d %d %d %d %d %d %d %d 0 %d %d %d %d\n", major, minor, n,
			i*1000+1, i*10, i*8000, i*500, i*2000, i*20, i*16000, i*900, i%4, i*1200, i*1500, i*3, i*64, i*2, i*7, i*5)
		i++
	}
	for k, n := range scsi {
		device(n, 8, k*16%256, map[string]string{"device/model": fmt.Sprintf("SYNTH DISK %d", i),
			"device/rev": "0001", "device/wwid": fmt.Sprintf("naa.5000c500%08x", i)})
	}
	for k, n := range nvme {
		device(n, 259, k, map[string]string{"device/model": "SYNTH NVME",
			"device/serial": fmt.Sprintf("S%010d", i), "wwid": fmt.Sprintf("eui.%016x", i)})
	}
	for k, n := range dm {
		files[filepath.Join(sys, "block", n, "slaves", scsi[2*k])] = ""
		files[filepath.Join(sys, "block", n, "slaves", scsi[2*k+1])] = ""
		device(n, 253, k, map[string]string{"dm/name": fmt.Sprintf("vg-lv%d", i), "dm/uuid": fmt.Sprintf("LVM-%d", i)})
	}
	files[filepath.Join(proc, "diskstats")] = diskstats.String()
	for f, content := range files {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			r.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			r.Fatal(err)
		}
	}
	return len(files) - 5
}
