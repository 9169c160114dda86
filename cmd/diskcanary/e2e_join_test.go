package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The join expressions documented in README "diskstats and iostat". The
// rate windows are 30s here (1 s scrapes); the README uses 5m.
const (
	// A probe's p99, labelled with each physical disk under its device.
	joinP99ToDisk = `histogram_quantile(0.99, sum by (le, instance, device) (rate(diskcanary_fdatasync_duration_seconds_bucket[30s])))` +
		` * on(instance, device) group_left(disk) diskcanary_disk_parent_info`
	// The diskstats series of the disks under a probe's device: parent_info
	// restricted to the probe's device, its disk label copied into device,
	// then matched against the disk-level series.
	joinProbeToDiskstats = `rate(diskcanary_disk_writes_completed_total[30s])` +
		` * on(instance, device) group_left() max by (instance, device) (label_replace(` +
		`diskcanary_disk_parent_info * on(instance, device) group_left() max by (instance, device) (diskcanary_probe_target_info{probe="wal"}),` +
		` "device", "$1", "disk", "(.+)"))`
)

// TestJoinEndToEnd runs the daemon with a WAL probe on an ext4 loop-device
// filesystem and a real Prometheus scraping it every second, and checks
// through the Prometheus HTTP API that the documented joins go from the
// probe's p99 to that loop device's diskstats series.
func TestJoinEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end join test: skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("end-to-end join test needs root (losetup, mkfs.ext4, mount); run the tests as root")
	}
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("end-to-end join test needs the prometheus binary (apt-get install prometheus)")
	}
	for _, tool := range []string{"losetup", "mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("end-to-end join test needs %s", tool)
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			goBin = "/usr/local/go/bin/go"
		}
	}

	dir := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		require.NoError(t, err, "%s %v: %s", name, args, out)
		return strings.TrimSpace(string(out))
	}

	bin := filepath.Join(dir, "diskcanary")
	run(goBin, "build", "-o", bin, ".")

	// A 256 MiB ext4 filesystem on a loop device, fully initialised so
	// background ext4lazyinit writes do not blur the probe.
	img := filepath.Join(dir, "disk.img")
	require.NoError(t, os.WriteFile(img, nil, 0o600))
	require.NoError(t, os.Truncate(img, 256<<20))
	loop := run("losetup", "--find", "--show", img)
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", loop).Run() })
	dev := filepath.Base(loop)
	run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", loop)
	mnt := filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	run("mount", loop, mnt)
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })

	cfg := filepath.Join(dir, "diskcanary.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`probes:
  targets:
    - name: wal
      kind: wal
      dir: %s
      interval: 1s
      ops: 20
      min_free: 16MiB
      daily_write_budget: 100GB
`, filepath.Join(mnt, "canary"))), 0o644))

	dcAddr := freeAddr(t)
	args := []string{"serve", "--config.file", cfg, "--web.listen-address", dcAddr, "--log.level", "warn"}
	if help, _ := exec.Command(bin, "serve", "--help").CombinedOutput(); strings.Contains(string(help), "--no-collector.smart") {
		args = append(args, "--no-collector.smart")
	}
	startProcess(t, dir, "diskcanary", bin, args...)

	promAddr := freeAddr(t)
	promCfg := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(promCfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: diskcanary
    static_configs:
      - targets: [%q]
`, dcAddr)), 0o644))
	startProcess(t, dir, "prometheus", promBin, "--config.file="+promCfg,
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+promAddr)

	// p99 → disk: the probe's series, labelled with its own loop device as
	// the disk (a loop device is a whole disk).
	p99 := waitQuery(t, promAddr, joinP99ToDisk, 45*time.Second, func(r []promSample) bool {
		return len(r) > 0
	})
	require.Len(t, p99, 1, "one probe on one device: %v", p99)
	require.Equal(t, dev, p99[0].Metric["device"])
	require.Equal(t, dev, p99[0].Metric["disk"])
	t.Logf("p99 join: %v = %s s", p99[0].Metric, p99[0].Value[1])

	// probe → diskstats: the loop device's write rate, and only it.
	ds := waitQuery(t, promAddr, joinProbeToDiskstats, 20*time.Second, func(r []promSample) bool {
		return len(r) > 0 && r[0].Value[1] != "0"
	})
	require.Len(t, ds, 1, "%v", ds)
	require.Equal(t, dev, ds[0].Metric["device"])
	require.NotContains(t, ds[0].Metric, "__name__", "a rate, not the raw series")
	t.Logf("diskstats join: %v writes/s = %s", ds[0].Metric, ds[0].Value[1])
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// startProcess runs a long-lived process for the test, logging to a file
// that is printed if the test fails, and stops it at cleanup.
func startProcess(t *testing.T, dir, name, bin string, args ...string) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", name, b)
		}
	})
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// waitQuery polls an instant query until ok accepts the result.
func waitQuery(t *testing.T, addr, query string, timeout time.Duration, ok func([]promSample) bool) []promSample {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last []promSample
	var lastErr error
	for {
		last, lastErr = instantQuery(ctx, addr, query)
		if lastErr == nil && ok(last) {
			return last
		}
		select {
		case <-ctx.Done():
			t.Fatalf("query did not return the expected series within %v:\n%s\nlast result: %v, error: %v", timeout, query, last, lastErr)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func instantQuery(ctx context.Context, addr, query string) ([]promSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		"http://"+addr+"/api/v1/query?query="+url.QueryEscape(query), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("prometheus: %s", body.Error)
	}
	return body.Data.Result, nil
}
