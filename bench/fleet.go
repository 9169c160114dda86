package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/smart/smarttest"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// fleetScale: how many nodes one Prometheus holds with the shipped rules,
// measured. Once, a real `diskcanary serve` from this tree (and a 3-member
// etcd, when installed) is scraped for templates: families, label sets,
// bucket edges. Then per -nodes, each with a fresh Prometheus: fleetsim
// serves N nodes on loopback addresses (-slow of them slower, so the drift
// rules have outliers), Debian's prometheus scrapes them as the shipped
// PodMonitor does with alerts/diskcanary-rules.yml, and after -duration
// `fleetsim report` reads Prometheus' self-metrics over the last -steady.
// -duration 70m fills every 1h window; week-old data and head compaction
// are not simulated. An N whose 300 MiB + 3 MiB × N (Prometheus' memory,
// from this scenario's runs) exceeds MemAvailable is refused.
func fleetScale(r *run, p params) bool {
	r.need("prometheus", "promtool")
	if p.Steady >= p.Duration {
		r.Fatalf("-steady %v must be shorter than -duration %v", p.Steady, p.Duration)
	}
	fleetBounds(r, p, func(n int) int { return 300 + 3*n }, "Prometheus")
	tmp := fleetDir(r, p, "diskcanary-fleet-scale.")
	wall0 := time.Now()
	rules := copyRules(r, "alerts/diskcanary-rules.yml", tmp)
	rev := treeRev(r, "alerts/")
	// The diskcanary job drops what the shipped scrape configurations drop:
	// the series no alert, rule or dashboard reads.
	drops := shippedDrops(r)
	fleetsim, simArgs := r.fleetSetup(tmp, rules)
	promVersion := strings.SplitN(string(r.exec("prometheus", "--version")), "\n", 2)[0]
	fmt.Printf("fleet-scale: N = %v, %v each (medians over the last %v), clusters of %d, %g slow; %s\n",
		p.Nodes, p.Duration, p.Steady, p.PerCluster, p.Slow, promVersion)

	var results, loads []string
	firstLog := ""
	for _, n := range p.Nodes {
		t0 := time.Now()
		run := filepath.Join(tmp, fmt.Sprintf("run-%d", n))
		sd, data := filepath.Join(run, "sd"), filepath.Join(run, "data")
		for _, d := range []string{sd, data} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				r.Fatal(err)
			}
		}
		promAddr, selfAddr := testkit.FreeAddr(r), testkit.FreeAddr(r)
		_, simPort, _ := strings.Cut(testkit.FreeAddr(r), ":")
		promYAML := filepath.Join(run, "prometheus.yml")
		if err := os.WriteFile(promYAML, []byte(fmt.Sprintf(`global:
  scrape_interval: 30s
  scrape_timeout: 10s
  evaluation_interval: 30s
rule_files: [%s]
scrape_configs:
  - job_name: diskcanary
    file_sd_configs: [{files: [%s/diskcanary.json]}]
%s  - job_name: etcd
    file_sd_configs: [{files: [%s/etcd.json]}]
  - job_name: prometheus
    scrape_interval: 15s
    static_configs: [{targets: ['%s']}]
  - job_name: fleetsim
    scrape_interval: 15s
    static_configs: [{targets: ['%s']}]
`, rules, sd, drops, sd, promAddr, selfAddr)), 0o644); err != nil {
			r.Fatal(err)
		}
		r.exec("promtool", "check", "config", promYAML)
		fmt.Printf("=== N=%d (%s UTC)\n", n, time.Now().UTC().Format("15:04:05"))
		sim, simLog := startFleetsim(r, fleetsim, simArgs, n, p, simPort, selfAddr, sd)
		if firstLog == "" {
			firstLog = simLog
		}
		prom := testkit.StartProcess(r, "prometheus", "--config.file", promYAML, "--storage.tsdb.path", data,
			"--storage.tsdb.retention.time", "1d", "--web.listen-address", promAddr)
		waitHTTP(r, prom, "http://"+promAddr+"/-/ready")
		start := time.Now()
		loadStart := loadAverage()
		report := []string{"report", "-prometheus", "http://" + promAddr, "-nodes", strconv.Itoa(n), "-start", strconv.FormatInt(start.Unix(), 10)}
		for left := time.Until(start.Add(p.Duration)); left > 0; left = time.Until(start.Add(p.Duration)) {
			time.Sleep(min(left, 5*time.Minute))
			brief := exec.Command(fleetsim, append(report, "-brief")...)
			brief.Stdout, brief.Stderr = os.Stdout, os.Stderr
			_ = brief.Run()
		}
		result := filepath.Join(run, "result.json")
		r.exec(fleetsim, append(report, "-steady", p.Steady.String(), "-wall", strconv.Itoa(int(time.Since(t0).Seconds())), "-out", result)...)
		results = append(results, result)
		// Other jobs on the machine slow the groups down: the loads beside the figures.
		loads = append(loads, fmt.Sprintf("N=%d: %s at the start, %s at the end", n, loadStart, loadAverage()))
		stopProcess(prom)
		stopProcess(sim)
		os.RemoveAll(data)
		printLogProblems(prom)
	}
	r.printf("fleet at scale: one Prometheus, the shipped rules; %s, %s, diskcanary %s, %v in all.\n",
		time.Now().UTC().Format("2006-01-02"), machine(), rev, time.Since(wall0).Round(time.Minute))
	r.printf("One fleetsim process serves every node: %s (first run).\n\n", firstLog)
	table := string(r.exec(fleetsim, append([]string{"table"}, results...)...))
	r.printf("%s", table)
	r.printf("Load average (1, 5, 15 min) %s.\n", strings.Join(loads, "; "))
	// The table's verdict lines: the slowest group within a quarter of its
	// interval and no missed iteration, at every N.
	return !strings.Contains(table, "\nFAIL: ") && !strings.HasPrefix(table, "FAIL: ")
}

// copyRules copies a rule file into dir, so an edit during a run of hours
// does not reach the Prometheus under test, and checks it.
func copyRules(r *run, file, dir string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		r.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		r.Fatal(err)
	}
	r.exec("promtool", "check", "rules", dst)
	return dst
}

// treeRev is HEAD's short hash, saying so when the rules under dir differ
// from it.
func treeRev(r *run, dir string) string {
	rev := strings.TrimSpace(string(r.exec("git", "rev-parse", "--short", "HEAD")))
	if exec.Command("git", "diff", "--quiet", "HEAD", "--", dir).Run() != nil {
		rev += " (rules modified)"
	}
	return rev
}

// fleetSetup builds fleetsim and captures its templates; the etcd
// families kept are those rules reads. It returns fleetsim's path and its
// serve flags.
func (r *run) fleetSetup(tmp, rules string) (string, []string) {
	fleetsim := filepath.Join(tmp, "fleetsim")
	r.exec("go", "build", "-C", "bench", "-o", fleetsim, "./fleetsim")
	simArgs := []string{"-template", r.daemonTemplate(tmp)}
	if etcdTpl := r.etcdTemplate(tmp); etcdTpl != "" {
		simArgs = append(simArgs, "-etcd-template", etcdTpl, "-rules", rules)
	}
	return fleetsim, simArgs
}

// fleetBounds refuses a fleet size the machine cannot hold (need: MiB for
// N nodes, from the scenario's runs) and raises the open-file limit: one
// connection and one listener per target, on both sides, and the children
// inherit the limit.
func fleetBounds(r *run, p params, need func(n int) int, what string) {
	var avail float64
	_, _ = fmt.Sscan(strings.TrimSuffix(firstField("/proc/meminfo", "MemAvailable"), " kB"), &avail) // 0 fails the check below
	largest := 0
	for _, n := range p.Nodes {
		if n < 1 || n > 62500 {
			r.Fatalf("-nodes: %d is not in 1..62500", n)
		}
		if mb := need(n); float64(mb) >= avail/1024 {
			r.Fatalf("N=%d needs about %d MiB for %s, %.0f MiB available", n, mb, what, avail/1024)
		}
		largest = max(largest, n)
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
		lim.Cur = lim.Max
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
		if lim.Cur <= uint64(3*largest+1000) {
			fmt.Fprintf(os.Stderr, "warning: open-file limit %d is low for N=%d\n", lim.Cur, largest)
		}
	}
}

// fleetDir is the scenario's temporary directory; with -keep, everything
// but the TSDBs stays.
func fleetDir(r *run, p params, prefix string) string {
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() {
		if p.Keep {
			for _, pattern := range []string{"run-*/data", "run-*/data-*"} {
				runs, _ := filepath.Glob(filepath.Join(tmp, pattern))
				for _, d := range runs {
					os.RemoveAll(d)
				}
			}
			fmt.Fprintln(os.Stderr, "kept", tmp)
			return
		}
		os.RemoveAll(tmp)
	})
	return tmp
}

// startFleetsim serves n nodes and waits for its target files; it returns
// the process and the first line of its log (what it serves).
func startFleetsim(r *run, fleetsim string, simArgs []string, n int, p params, port, self, sd string) (*testkit.Process, string) {
	sim := testkit.StartProcess(r, fleetsim, append([]string{"serve"}, append(simArgs, "-nodes", strconv.Itoa(n),
		"-nodes-per-cluster", strconv.Itoa(p.PerCluster), "-slow", strconv.FormatFloat(p.Slow, 'g', -1, 64),
		"-port", port, "-self", self, "-sd", sd)...)...)
	if !waitFor(60*time.Second, 100*time.Millisecond, func() bool {
		st, err := os.Stat(filepath.Join(sd, "diskcanary.json"))
		return err == nil && st.Size() > 0 || exited(sim)
	}) || exited(sim) {
		r.Fatalf("fleetsim did not start")
	}
	simLog, _ := os.ReadFile(sim.Log)
	fmt.Print(string(simLog))
	return sim, strings.SplitN(string(simLog), "\n", 2)[0]
}

// waitHTTP waits up to a minute for url to answer 200, failing at once if
// p exits.
func waitHTTP(r *run, p *testkit.Process, url string) {
	if !waitFor(60*time.Second, 100*time.Millisecond, func() bool {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK || exited(p)
	}) || exited(p) {
		r.Fatalf("%s did not start (%s)", filepath.Base(p.Cmd.Path), url)
	}
}

// printLogProblems shows the first few errors and warnings of a stopped
// engine's log, each cut short: Prometheus quotes the whole rule.
func printLogProblems(p *testkit.Process) {
	b, _ := os.ReadFile(p.Log)
	shown := 0
	for _, l := range strings.Split(string(b), "\n") {
		if (strings.Contains(l, "level=error") || strings.Contains(l, "level=warn") || strings.Contains(l, "\terror\t") || strings.Contains(l, "\twarn\t")) &&
			!strings.Contains(l, "SIGTERM") && shown < 5 {
			if len(l) > 400 {
				l = l[:400] + " ..."
			}
			fmt.Println(l)
			shown++
		}
	}
}

// shippedDrops is the metric_relabel_configs of the shipped plain
// Prometheus scrape job (deploy/prometheus/diskcanary-scrape.yml, generated
// by tools/rulegen), as that file indents it: a job's keys at 4 spaces.
func shippedDrops(r *run) string {
	const file, key = "deploy/prometheus/diskcanary-scrape.yml", "    metric_relabel_configs:\n"
	b, err := os.ReadFile(file)
	if err != nil {
		r.Fatal(err)
	}
	_, drops, ok := strings.Cut(string(b), key)
	if !ok {
		r.Fatalf("%s has no metric_relabel_configs", file)
	}
	return key + drops
}

func exited(p *testkit.Process) bool {
	select {
	case <-p.Done:
		return true
	default:
		return false
	}
}

// stopProcess ends p now (testkit's cleanup would, later).
func stopProcess(p *testkit.Process) {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	<-p.Done
}

// daemonTemplate captures a real daemon's /metrics: the default probe
// kinds and names, with short cycles and a small working set only so the
// capture takes seconds (the simulation uses the defaults), and SMART
// answered by the fake smartctl with a real NVMe capture for the disk the
// probes run on.
func (r *run) daemonTemplate(tmp string) string {
	probeDir := filepath.Join(tmp, "probe")
	if err := os.MkdirAll(probeDir, 0o755); err != nil {
		r.Fatal(err)
	}
	disk := "sda"
	if dev, err := exec.Command("findmnt", "-no", "SOURCE", "-T", probeDir).Output(); err == nil {
		disk = filepath.Base(strings.TrimSpace(string(dev)))
		if parent, err := exec.Command("lsblk", "-no", "PKNAME", strings.TrimSpace(string(dev))).Output(); err == nil {
			if f := strings.Fields(string(parent)); len(f) > 0 {
				disk = f[0]
			}
		}
	}
	fixture, err := filepath.Abs("internal/smart/testdata/nvme-healthy-v7.5-beszel.json")
	if err != nil {
		r.Fatal(err)
	}
	fake, _ := json.Marshal(smarttest.FakeConfig{
		Scan:    []map[string]string{{"name": "/dev/" + disk, "type": "nvme", "protocol": "NVMe"}},
		Devices: map[string]smarttest.FakeDevice{"/dev/" + disk: {Fixture: fixture}},
	})
	fakeConfig := filepath.Join(tmp, "fake.json")
	config := filepath.Join(tmp, "dc.yml")
	for f, content := range map[string]string{fakeConfig: string(fake), config: fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %s, interval: 1s, ops: 10, min_free: 1MiB}
    - {name: randread, kind: randread, dir: %s, interval: 1s, ops: 10, working_set: 16MiB, min_free: 1MiB}
smart:
  smartctl: %s
`, probeDir, probeDir, smarttest.Build(r))} {
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			r.Fatal(err)
		}
	}
	addr := testkit.FreeAddr(r)
	cmd := exec.Command(diskcanary, "serve", "--config.file", config, "--web.listen-address", addr, "--log.level", "warn")
	cmd.Env = append(os.Environ(), "FAKESMARTCTL_CONFIG="+fakeConfig)
	d := testkit.StartCmd(r, cmd)
	want := []string{"diskcanary_fdatasync_duration_seconds_count", "diskcanary_read_duration_seconds_count", "diskcanary_smart_device_info",
		"diskcanary_disk_info", "diskcanary_disk_request_duration_seconds_count"}
	var page string
	var missing []string
	waitFor(60*time.Second, 500*time.Millisecond, func() bool {
		page, _ = scrapeText("http://" + addr + "/metrics")
		missing = nil
		for _, w := range want {
			if !strings.HasPrefix(page, w) && !strings.Contains(page, "\n"+w) {
				missing = append(missing, w)
			}
		}
		return len(missing) == 0
	})
	stopProcess(d)
	if page == "" {
		r.Fatal("diskcanary serve did not answer")
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "warning: the template lacks %v (blocklatency needs root and BTF)\n", missing)
	}
	tpl := filepath.Join(tmp, "daemon.prom")
	if err := os.WriteFile(tpl, []byte(page), 0o644); err != nil {
		r.Fatal(err)
	}
	return tpl
}

// etcdTemplate captures a real 3-member etcd cluster's /metrics, or says
// why not and returns "": then the etcd rules run on no etcd series.
func (r *run) etcdTemplate(tmp string) string {
	if _, err := exec.LookPath("etcd"); err != nil {
		fmt.Fprintln(os.Stderr, "note: etcd is not installed (apt-get install etcd-server): the etcd rules run on no etcd series")
		return ""
	}
	var client, peer [3]string
	var cluster []string
	for i := range 3 {
		client[i], peer[i] = testkit.FreeAddr(r), testkit.FreeAddr(r)
		cluster = append(cluster, fmt.Sprintf("e%d=http://%s", i, peer[i]))
	}
	var members []*testkit.Process
	for i := range 3 {
		members = append(members, testkit.StartProcess(r, "etcd", "--name", fmt.Sprintf("e%d", i), "--data-dir", filepath.Join(tmp, "etcd", strconv.Itoa(i)),
			"--listen-client-urls", "http://"+client[i], "--advertise-client-urls", "http://"+client[i],
			"--listen-peer-urls", "http://"+peer[i], "--initial-advertise-peer-urls", "http://"+peer[i],
			"--initial-cluster", strings.Join(cluster, ","), "--initial-cluster-state", "new", "--logger", "zap", "--log-level", "error"))
	}
	defer func() {
		for _, m := range members {
			stopProcess(m)
		}
	}()
	base := "http://" + client[0]
	waitFor(20*time.Second, 200*time.Millisecond, func() bool {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	for range 20 {
		if resp, err := http.Post(base+"/v3/kv/put", "application/json", strings.NewReader(`{"key": "Zm9v", "value": "YmFy"}`)); err == nil {
			resp.Body.Close()
		}
	}
	var page string
	waitFor(30*time.Second, 500*time.Millisecond, func() bool {
		page, _ = scrapeText(base + "/metrics")
		return strings.Contains(page, "\netcd_network_peer_round_trip_time_seconds_count")
	})
	if !strings.Contains(page, "\netcd_disk_wal_fsync_duration_seconds_count") {
		fmt.Fprintln(os.Stderr, "warning: no etcd metrics captured: the etcd rules run on no etcd series")
		return ""
	}
	tpl := filepath.Join(tmp, "etcd.prom")
	if err := os.WriteFile(tpl, []byte(page), 0o644); err != nil {
		r.Fatal(err)
	}
	return tpl
}
