package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// fleetSharded: the fleet sharded by cluster as docs/deploy.md ships it,
// measured beside fleet-scale's one Prometheus. fleetsim serves N nodes in
// clusters of -nodes-per-cluster; -shards Prometheus each scrape every
// -shards-th cluster (round robin over fleetsim's cluster numbers, so the
// shards differ by one cluster at most), load
// deploy/sharded/diskcanary-cluster-rules.yml and remote-write, with
// deploy/sharded/prometheus-remote-write.yml's relabelling, to one
// VictoriaMetrics single node, where vmalert evaluates
// deploy/sharded/diskcanary-global-rules.yml. VictoriaMetrics scrapes
// itself and vmalert; `fleetsim report` reads each Prometheus' self-metrics
// and, with -engine vmalert, the global layer's from VictoriaMetrics, and
// `fleetsim table` judges every engine as fleet-scale judges its one.
// Memory: fleet-scale's 3 MiB per node spread over the shards, 300 MiB per
// Prometheus and 500 MiB for the global layer; an N that does not fit in
// MemAvailable is refused.
func fleetSharded(r *run, p params) bool {
	r.need("prometheus", "promtool")
	if p.Steady >= p.Duration {
		r.Fatalf("-steady %v must be shorter than -duration %v", p.Steady, p.Duration)
	}
	if p.Shards < 2 || p.Shards > 4 {
		r.Fatalf("-shards %d: 2 to 4 Prometheus", p.Shards)
	}
	for _, n := range p.Nodes {
		if clusters := (n + p.PerCluster - 1) / p.PerCluster; clusters < p.Shards {
			r.Fatalf("N=%d is %d clusters of up to %d nodes, fewer than -shards %d: lower -nodes-per-cluster", n, clusters, p.PerCluster, p.Shards)
		}
	}
	fleetBounds(r, p, func(n int) int { return 300*p.Shards + 500 + 3*n },
		fmt.Sprintf("%d Prometheus and VictoriaMetrics", p.Shards))
	vmBin, vmalertBin := testkit.VictoriaMetrics(r)
	tmp := fleetDir(r, p, "diskcanary-fleet-sharded.")
	wall0 := time.Now()
	clusterRules := copyRules(r, "deploy/sharded/diskcanary-cluster-rules.yml", tmp)
	globalRules := copyRules(r, "deploy/sharded/diskcanary-global-rules.yml", tmp)
	rev := treeRev(r, "deploy/sharded/")
	drops := shippedDrops(r)
	writeRelabel := shippedWriteRelabel(r)
	fleetsim, simArgs := r.fleetSetup(tmp, clusterRules)
	promVersion := strings.SplitN(string(r.exec("prometheus", "--version")), "\n", 2)[0]
	fmt.Printf("fleet-sharded: N = %v, %d shards, %v each (medians over the last %v), clusters of %d, %g slow; %s, VictoriaMetrics %s\n",
		p.Nodes, p.Shards, p.Duration, p.Steady, p.PerCluster, p.Slow, promVersion, testkit.VictoriaMetricsVersion)

	var results, loads []string
	firstLog := ""
	for _, n := range p.Nodes {
		t0 := time.Now()
		run := filepath.Join(tmp, fmt.Sprintf("run-%d", n))
		sd := filepath.Join(run, "sd")
		if err := os.MkdirAll(sd, 0o755); err != nil {
			r.Fatal(err)
		}
		selfAddr, vmAddr, vmalertAddr := testkit.FreeAddr(r), testkit.FreeAddr(r), testkit.FreeAddr(r)
		_, simPort, _ := strings.Cut(testkit.FreeAddr(r), ":")
		fmt.Printf("=== N=%d (%s UTC)\n", n, time.Now().UTC().Format("15:04:05"))
		sim, simLog := startFleetsim(r, fleetsim, simArgs, n, p, simPort, selfAddr, sd)
		if firstLog == "" {
			firstLog = simLog
		}

		// The global layer, as docs/deploy.md runs it, with vmalert at the
		// evaluation interval the Prometheus shards use.
		vmScrape := filepath.Join(run, "vm-scrape.yml")
		writeFile(r, vmScrape, fmt.Sprintf(`scrape_configs:
  - job_name: victoria-metrics
    scrape_interval: 15s
    static_configs: [{targets: ['%s']}]
  - job_name: vmalert
    scrape_interval: 15s
    static_configs: [{targets: ['%s']}]
`, vmAddr, vmalertAddr))
		vm := testkit.StartProcess(r, vmBin, "-storageDataPath", filepath.Join(run, "data-vm"), "-httpListenAddr", vmAddr,
			"-retentionPeriod", "1d", "-promscrape.config", vmScrape, "-loggerLevel", "WARN")
		waitHTTP(r, vm, "http://"+vmAddr+"/health")
		vmalert := testkit.StartProcess(r, vmalertBin, "-rule", globalRules, "-datasource.url", "http://"+vmAddr,
			"-remoteWrite.url", "http://"+vmAddr, "-notifier.blackhole", "-evaluationInterval", "30s",
			"-httpListenAddr", vmalertAddr, "-loggerLevel", "WARN")
		waitHTTP(r, vmalert, "http://"+vmalertAddr+"/health")

		clusters := (n + p.PerCluster - 1) / p.PerCluster
		var shards []*testkit.Process
		var reports [][]string
		for i := range p.Shards {
			var mine []string
			for c := i; c < clusters; c += p.Shards {
				mine = append(mine, fmt.Sprintf("%03d", c))
			}
			promAddr := testkit.FreeAddr(r)
			// fleetsim's own CPU is read from the first shard only.
			simJob := ""
			if i == 0 {
				simJob = fmt.Sprintf("  - job_name: fleetsim\n    scrape_interval: 15s\n    static_configs: [{targets: ['%s']}]\n", selfAddr)
			}
			// Each job keeps this shard's clusters; the targets' cluster
			// label stays on every series (the rules aggregate by it), and
			// the external label names the shard.
			keep := fmt.Sprintf("    relabel_configs:\n      - {source_labels: [cluster], regex: 'cluster-(%s)', action: keep}\n", strings.Join(mine, "|"))
			promYAML := filepath.Join(run, fmt.Sprintf("prometheus-%d.yml", i+1))
			writeFile(r, promYAML, fmt.Sprintf(`global:
  scrape_interval: 30s
  scrape_timeout: 10s
  evaluation_interval: 30s
  external_labels: {shard: '%d/%d'}
rule_files: [%s]
scrape_configs:
  - job_name: diskcanary
    file_sd_configs: [{files: [%s/diskcanary.json]}]
%s%s  - job_name: etcd
    file_sd_configs: [{files: [%s/etcd.json]}]
%s  - job_name: prometheus
    scrape_interval: 15s
    static_configs: [{targets: ['%s']}]
%sremote_write:
  - url: http://%s/api/v1/write
%s`, i+1, p.Shards, clusterRules, sd, keep, drops, sd, keep, promAddr, simJob, vmAddr, writeRelabel))
			r.exec("promtool", "check", "config", promYAML)
			prom := testkit.StartProcess(r, "prometheus", "--config.file", promYAML,
				"--storage.tsdb.path", filepath.Join(run, fmt.Sprintf("data-%d", i+1)),
				"--storage.tsdb.retention.time", "1d", "--web.listen-address", promAddr)
			waitHTTP(r, prom, "http://"+promAddr+"/-/ready")
			shards = append(shards, prom)
			reports = append(reports, []string{"-engine", "prometheus", "-prometheus", "http://" + promAddr,
				"-name", fmt.Sprintf("shard %d/%d (%s)", i+1, p.Shards, plural(len(mine), "cluster"))})
		}
		reports = append(reports, []string{"-engine", "vmalert", "-prometheus", "http://" + vmAddr, "-ruler", "http://" + vmalertAddr,
			"-name", "VictoriaMetrics + vmalert", "-version", testkit.VictoriaMetricsVersion})

		start := time.Now()
		loadStart := loadAverage()
		common := []string{"-nodes", strconv.Itoa(n), "-start", strconv.FormatInt(start.Unix(), 10)}
		for left := time.Until(start.Add(p.Duration)); left > 0; left = time.Until(start.Add(p.Duration)) {
			time.Sleep(min(left, 5*time.Minute))
			for _, rep := range reports {
				brief := exec.Command(fleetsim, append(append([]string{"report", "-brief"}, rep...), common...)...)
				brief.Stdout, brief.Stderr = os.Stdout, os.Stderr
				_ = brief.Run()
			}
		}
		wall := strconv.Itoa(int(time.Since(t0).Seconds()))
		for i, rep := range reports {
			result := filepath.Join(run, fmt.Sprintf("result-%d.json", i+1))
			r.exec(fleetsim, append(append([]string{"report"}, rep...), append(common, "-steady", p.Steady.String(), "-wall", wall, "-out", result)...)...)
			results = append(results, result)
		}
		loads = append(loads, fmt.Sprintf("N=%d: %s at the start, %s at the end", n, loadStart, loadAverage()))
		for _, prom := range shards {
			stopProcess(prom)
		}
		stopProcess(vmalert)
		stopProcess(vm)
		stopProcess(sim)
		for _, proc := range append(shards, vmalert, vm) {
			printLogProblems(proc)
		}
		dirs, _ := filepath.Glob(filepath.Join(run, "data-*"))
		for _, dir := range dirs {
			os.RemoveAll(dir)
		}
	}
	r.printf("fleet sharded by cluster: %d Prometheus with the per-cluster rules, VictoriaMetrics and vmalert with the global rules; %s, %s, diskcanary %s, %v in all.\n",
		p.Shards, time.Now().UTC().Format("2006-01-02"), machine(), rev, time.Since(wall0).Round(time.Minute))
	r.printf("Shard k of K scrapes clusters k-1, k-1+K, ... One fleetsim process serves every node: %s (first run).\n\n", firstLog)
	table := string(r.exec(fleetsim, append([]string{"table"}, results...)...))
	r.printf("%s", table)
	r.printf("Load average (1, 5, 15 min) %s.\n", strings.Join(loads, "; "))
	// The table's verdict lines, per engine: its slowest group within a
	// quarter of its interval and no missed iteration.
	return !strings.Contains(table, "\nFAIL: ") && !strings.HasPrefix(table, "FAIL: ")
}

// shippedWriteRelabel is the write_relabel_configs of the shipped remote
// write (deploy/sharded/prometheus-remote-write.yml, generated by
// tools/rulegen).
func shippedWriteRelabel(r *run) string {
	const file = "deploy/sharded/prometheus-remote-write.yml"
	b, err := os.ReadFile(file)
	if err != nil {
		r.Fatal(err)
	}
	relabel, err := writeRelabel(string(b))
	if err != nil {
		r.Fatalf("%s: %v", file, err)
	}
	return relabel
}

// writeRelabel cuts the write_relabel_configs key and what follows it from
// a remote_write configuration, as rulegen indents it: under an entry of
// remote_write, the last key of the file.
func writeRelabel(config string) (string, error) {
	const key = "    write_relabel_configs:\n"
	_, relabel, ok := strings.Cut(config, "\n"+key)
	if !ok {
		return "", fmt.Errorf("no %q", strings.TrimSpace(key))
	}
	return key + relabel, nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func writeFile(r *run, file, content string) {
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		r.Fatal(err)
	}
}
