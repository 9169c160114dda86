package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/internal/testkit/testfs"
)

// Run as nobody, the daemon cannot load eBPF nor read the kernel log
// (kernel.dmesg_restrict=1): the block-latency collector and the kernel
// log each say so once in the log and on /metrics, and the probes,
// diskstats and the errors collector's sysfs and mount-table part run.
func TestPrivilegedCollectorsOffWithoutPrivilege(t *testing.T) {
	testkit.RequireRoot(t)
	restrict, err := os.ReadFile("/proc/sys/kernel/dmesg_restrict")
	require.NoError(t, err)
	if strings.TrimSpace(string(restrict)) != "1" {
		t.Skip("skipping: kernel.dmesg_restrict is not 1, so nobody may read /dev/kmsg here")
	}
	_, base := nobodyCmd(t)
	probeDir := filepath.Join(base, "probe")
	require.NoError(t, os.Mkdir(probeDir, 0o700))
	require.NoError(t, os.Chown(probeDir, 65534, 65534))
	cfg := filepath.Join(base, "diskcanary.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %s, interval: 50ms, ops: 5, min_free: 1B}
smart:
  enabled: false
`, probeDir)), 0o644))

	addr := testkit.FreeAddr(t)
	cmd, _ := nobodyCmd(t, "serve", "--config.file", cfg, "--web.listen-address", addr)
	daemon := testkit.StartCmd(t, cmd)
	daemon.WaitListening(t, addr, 10*time.Second)
	body := waitMetrics(t, func() string { _, b, _ := get("http://" + addr + "/metrics"); return b }, "the collector off and the probe running",
		"diskcanary_blocklatency_available 0\n",
		`diskcanary_blocklatency_unavailable_info{reason="permission"} 1`,
		`diskcanary_collector_success{collector="blocklatency"} 1`,
		`diskcanary_collector_success{collector="diskstats"} 1`,
		"diskcanary_kernel_log_available 0\n",
		`diskcanary_kernel_log_unavailable_info{reason="permission"} 1`,
		`diskcanary_collector_success{collector="errors"} 1`,
		`diskcanary_filesystem_readonly{device=`,
		`diskcanary_probe_success{probe="wal"} 1`)
	require.NotContains(t, body, "diskcanary_disk_errors_total")
	require.NotContains(t, body, "diskcanary_disk_request_duration_seconds")
	require.NotContains(t, body, "diskcanary_blocklatency_dropped_requests_total")
	require.Contains(t, body, "diskcanary_disk_reads_completed_total{", "diskstats runs")

	log, err := os.ReadFile(daemon.Log)
	require.NoError(t, err)
	linesWith := func(sub string) []string {
		var out []string
		for _, l := range strings.Split(string(log), "\n") {
			if strings.Contains(l, sub) {
				out = append(out, l)
			}
		}
		return out
	}
	lines := linesWith("blocklatency")
	require.Len(t, lines, 1, "one log line about the collector:\n%s", log)
	require.Contains(t, lines[0], "blocklatency collector off: loading eBPF needs root or CAP_BPF and CAP_PERFMON")
	require.Contains(t, lines[0], "reason=permission")

	kmsgLines := linesWith("kernel log")
	require.Len(t, kmsgLines, 1, "one log line about the kernel log:\n%s", log)
	require.Contains(t, kmsgLines[0], "kernel log not read: /dev/kmsg needs CAP_SYSLOG where kernel.dmesg_restrict=1")
}

// As root, a probe on a loop-device filesystem finds its device's own
// request histograms on /metrics, flushes included (the probe's
// fdatasyncs); --no-collector.blocklatency turns the collector off without
// a trace.
func TestBlocklatencyDeviceHistogramBesideTheProbe(t *testing.T) {
	mnt, dev := testkit.LoopFSIn(t, "/dev/shm", 64<<20, "ext4")
	name := filepath.Base(dev)
	for _, on := range []bool{true, false} {
		cfg := filepath.Join(t.TempDir(), "diskcanary.yml")
		require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %s, interval: 50ms, ops: 5, segment_size: 4MiB, min_free: 1B}
smart:
  enabled: false
`, filepath.Join(mnt, fmt.Sprint("probe-", on)))), 0o600))
		addr := testkit.FreeAddr(t)
		args := []string{"serve", "--config.file", cfg, "--web.listen-address", addr}
		if !on {
			args = append(args, "--no-collector.blocklatency")
		}
		daemon := testkit.StartCmd(t, diskcanaryCmd(t, nil, args...))
		daemon.WaitListening(t, addr, 10*time.Second)
		metrics := func() string { _, b, _ := get("http://" + addr + "/metrics"); return b }
		if !on {
			body := waitMetrics(t, metrics, "the probe", `diskcanary_probe_success{probe="wal"} 1`)
			require.NotContains(t, body, "blocklatency")
			require.NotContains(t, body, "diskcanary_disk_request_duration_seconds")
			continue
		}
		waitMetrics(t, metrics, "the device's write and flush histograms",
			"diskcanary_blocklatency_available 1\n",
			`diskcanary_probe_success{probe="wal"} 1`,
			`diskcanary_disk_request_duration_seconds_bucket{device="`+name+`",op="write",le="0.01"}`,
			`diskcanary_disk_request_duration_seconds_bucket{device="`+name+`",op="flush",le="0.01"}`,
			`diskcanary_blocklatency_dropped_requests_total{reason="in_flight_full"} 0`+"\n",
			`diskcanary_blocklatency_dropped_requests_total{reason="devices_full"} 0`+"\n")
	}
}

// A real Prometheus (native histograms on) scrapes the daemon while a
// loop device on the FUSE test filesystem answers each read after 20 ms:
// the native histogram it stores puts the median at or above the native
// bucket boundary below 20 ms, 2^(-46/8) s = 18.58 ms.
func TestBlocklatencyNativeHistogramInPrometheus(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.PrometheusBin(t)
	m := testfs.Start(t, "", "--read-delay", "20ms")
	dev := m.LoopDevice(t)
	name := filepath.Base(dev)

	addr := testkit.FreeAddr(t)
	daemon := testkit.StartCmd(t, diskcanaryCmd(t, nil, "serve", "--web.listen-address", addr,
		"--no-collector.probes", "--no-collector.smart"))
	daemon.WaitListening(t, addr, 10*time.Second)
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	defer unix.Munmap(buf)
	const n = 10
	for i := range n {
		_, err := unix.Pread(fd, buf, int64(i)<<20)
		require.NoError(t, err)
	}

	prom := testkit.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: diskcanary
    static_configs: [{targets: [%q]}]
`, addr), "--enable-feature=native-histograms")
	sel := fmt.Sprintf(`diskcanary_disk_request_duration_seconds{device=%q,op="read"}`, name)
	prom.WaitQuery(t, "histogram_count("+sel+") >= "+strconv.Itoa(n), 30*time.Second, func(s []testkit.Sample) bool { return len(s) == 1 })
	p50 := prom.Query(t, "histogram_quantile(0.5, "+sel+")")
	require.Len(t, p50, 1)
	v, err := strconv.ParseFloat(p50[0].Value[1].(string), 64)
	require.NoError(t, err)
	t.Logf("%s read p50 from Prometheus' native histogram: %.2f ms", name, 1e3*v)
	require.GreaterOrEqual(t, v, 0.01858, "p50 at or above the injected 20 ms, to native-bucket precision")
	require.Less(t, v, 0.1, "a 20 ms device")
}
