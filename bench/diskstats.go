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

// diskstatsVsNodeExporter: a synthetic proc + sys tree of up to 1,000
// block devices (600 SCSI disks, 300 NVMe namespaces, 100 dm devices over
// them, 20-field /proc/diskstats lines), served by `diskcanary serve`
// (diskstats only) and by node_exporter (diskstats only). Samples scrapes
// of each, interleaved; it prints the median scrape time of each, the
// median of each exporter's own diskstats collector duration, their
// ratios, and the RSS of both. Verdict: diskcanary's scrape no slower than
// node_exporter's, and its peak RSS under 35 MB.
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
	if p.Devices < 1 || p.Devices > 1000 {
		r.Fatalf("-devices %d: want 1..1000", p.Devices)
	}
	work := r.TempDir()
	proc, sys := filepath.Join(work, "proc"), filepath.Join(work, "sys")
	sysfsFiles := writeDeviceTree(r, proc, sys, p.Devices)
	if err := os.Mkdir(filepath.Join(work, "udev"), 0o755); err != nil {
		r.Fatal(err)
	}

	dc := r.serve("probes:\n  enabled: false\ndiskstats:\n  enabled: true\n  device_include: '.*'\n",
		"--path.procfs", proc, "--path.sysfs", sys, "--no-collector.probes", "--no-collector.smart",
		// diskstats alone, as node_exporter runs below: the other parts (eBPF,
		// the kernel log, pressure) are not what is compared, and their work
		// and memory would count against the diskstats collector.
		"--no-collector.blocklatency", "--no-collector.errors", "--no-collector.pressure")
	neAddr := testkit.FreeAddr(r)
	ne := testkit.StartProcess(r, nodeExporter, "--path.procfs="+proc, "--path.sysfs="+sys, "--path.udev.data="+filepath.Join(work, "udev"),
		"--collector.disable-defaults", "--collector.diskstats", "--collector.diskstats.device-exclude=^$",
		"--web.listen-address="+neAddr, "--log.level=warn")
	ne.WaitListening(r, neAddr, 30*time.Second)
	neURL := "http://" + neAddr + "/metrics"

	type exporter struct {
		url, series, collector string
		pid                    int
		scrape, took           []float64 // seconds
	}
	exporters := []*exporter{
		{url: dc.url, series: "diskcanary_disk_reads_completed_total", collector: "diskcanary_collector_duration_seconds", pid: dc.p.Cmd.Process.Pid},
		{url: neURL, series: "node_disk_reads_completed_total", collector: "node_scrape_collector_duration_seconds", pid: ne.Cmd.Process.Pid},
	}
	// Uncompressed, as curl asked for it: gzip is work of its own, and
	// not the collectors'.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	scrape := func(e *exporter) (time.Duration, read.Metrics) {
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
		return took, m
	}
	var exported []int
	for _, e := range exporters {
		_, m := scrape(e)
		_, n := m.Sum(e.series, nil)
		exported = append(exported, n)
	}
	r.printf("tree: %d devices in /proc/diskstats, %d sysfs files; devices exported: diskcanary %d, node_exporter %d\n", p.Devices, sysfsFiles, exported[0], exported[1])
	// Warm up (diskcanary reads sysfs once per device on its first
	// scrape), then interleave.
	for range 5 {
		for _, e := range exporters {
			scrape(e)
		}
	}
	for range p.Samples {
		for _, e := range exporters {
			took, m := scrape(e)
			c, n := m.Sum(e.collector, map[string]string{"collector": "diskstats"})
			if n != 1 {
				r.Fatalf("%s: no %s{collector=\"diskstats\"}", e.url, e.collector)
			}
			e.scrape, e.took = append(e.scrape, took.Seconds()), append(e.took, c)
		}
	}
	ds, ns := stats.Median(exporters[0].scrape), stats.Median(exporters[1].scrape)
	dcol, ncol := stats.Median(exporters[0].took), stats.Median(exporters[1].took)
	rss, hwm := memory(r, exporters[0].pid)
	nrss, nhwm := memory(r, exporters[1].pid)
	r.printf("\n%d interleaved scrapes each, %d devices\n", p.Samples, p.Devices)
	r.printf("%-34s %12s %14s %8s\n", "median", "diskcanary", "node_exporter", "ratio")
	r.printf("%-34s %10.2f ms %12.2f ms %8.3f\n", "HTTP scrape (client's total time)", ds*1000, ns*1000, ds/ns)
	r.printf("%-34s %10.2f ms %12.2f ms %8.3f\n", "diskstats collector (self-reported)", dcol*1000, ncol*1000, dcol/ncol)
	r.printf("diskcanary RSS %.1f MB (peak %.1f MB), target < 35 MB; node_exporter RSS %.1f MB (peak %.1f MB)\n", rss, hwm, nrss, nhwm)
	ok := true
	if ds > ns {
		r.printf("FAIL: diskcanary scrape slower than node_exporter\n")
		ok = false
	}
	if hwm >= 35 {
		r.printf("FAIL: RSS over 35 MB\n")
		ok = false
	}
	if ok {
		r.printf("ok: no slower than node_exporter, RSS under 35 MB\n")
	}
	return ok
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

// writeDeviceTree writes /proc/diskstats, /proc/uptime and, per device,
// the sysfs files a real disk has that either exporter reads (queue/,
// device/, dm/, slaves/). Disk names are letters only (sdaa, sdab, ...)
// so no default partition pattern of either exporter matches them.
func writeDeviceTree(r *run, proc, sys string, devices int) (sysfsFiles int) {
	var names []string
	for i := range 600 {
		names = append(names, fmt.Sprintf("sd%c%c", 'a'+i/26, 'a'+i%26))
	}
	for i := range 300 {
		names = append(names, fmt.Sprintf("nvme%dn1", i))
	}
	for i := range 100 {
		names = append(names, fmt.Sprintf("dm-%d", i))
	}
	files := map[string]string{filepath.Join(proc, "uptime"): "12345.67 23456.78\n"}
	var diskstats strings.Builder
	for i, n := range names[:devices] {
		d := filepath.Join(sys, "block", n)
		set := func(rel, content string) { files[filepath.Join(d, rel)] = content + "\n" }
		set("queue/rotational", "0")
		set("queue/logical_block_size", "512")
		set("queue/physical_block_size", "4096")
		var major, minor int
		switch {
		case strings.HasPrefix(n, "sd"):
			major, minor = 8, i*16%256
			set("device/model", fmt.Sprintf("SYNTH DISK %d", i))
			set("device/rev", "0001")
			set("device/wwid", fmt.Sprintf("naa.5000c500%08x", i))
		case strings.HasPrefix(n, "nvme"):
			major, minor = 259, i
			set("device/model", "SYNTH NVME")
			set("device/serial", fmt.Sprintf("S%010d", i))
			set("wwid", fmt.Sprintf("eui.%016x", i))
		default:
			major = 253
			_, _ = fmt.Sscanf(n, "dm-%d", &minor) // built as dm-N above
			set("dm/name", fmt.Sprintf("vg-lv%d", i))
			set("dm/uuid", fmt.Sprintf("LVM-%d", i))
			files[filepath.Join(d, "slaves", names[minor*2])] = ""
			files[filepath.Join(d, "slaves", names[minor*2+1])] = ""
		}
		fmt.Fprintf(&diskstats, "%d %d %s %d %d %d %d %d %d %d %d %d %d %d %d 0 %d %d %d %d\n", major, minor, n,
			i*1000+1, i*10, i*8000, i*500, i*2000, i*20, i*16000, i*900, i%4, i*1200, i*1500, i*3, i*64, i*2, i*7, i*5)
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
	return len(files) - 2
}
