package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// The join expressions documented in docs/metrics.md, "From a probe to its disks". The
// rate windows are 30s here (1 s scrapes); the docs use 5m.
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
	testkit.RequireRoot(t)
	testkit.PrometheusBin(t) // skip before building anything
	bin := testkit.Binary(t)
	dir := t.TempDir()

	// A 256 MiB ext4 filesystem on a loop device, fully initialised so
	// background ext4lazyinit writes do not blur the probe.
	mnt, loop := testkit.LoopFS(t, 256<<20, "ext4")
	dev := filepath.Base(loop)

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

	dcAddr := testkit.FreeAddr(t)
	args := []string{"serve", "--config.file", cfg, "--web.listen-address", dcAddr, "--log.level", "warn"}
	if help, _ := exec.Command(bin, "serve", "--help").CombinedOutput(); strings.Contains(string(help), "--no-collector.smart") {
		args = append(args, "--no-collector.smart")
	}
	testkit.StartProcess(t, bin, args...)

	prom := testkit.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: diskcanary
    static_configs:
      - targets: [%q]
`, dcAddr))

	// p99 → disk: the probe's series, labelled with its own loop device as
	// the disk (a loop device is a whole disk).
	p99 := prom.WaitQuery(t, joinP99ToDisk, 45*time.Second, func(r []testkit.Sample) bool {
		return len(r) > 0
	})
	require.Len(t, p99, 1, "one probe on one device: %v", p99)
	require.Equal(t, dev, p99[0].Metric["device"])
	require.Equal(t, dev, p99[0].Metric["disk"])
	t.Logf("p99 join: %v = %s s", p99[0].Metric, p99[0].Value[1])

	// probe → diskstats: the loop device's write rate, and only it.
	ds := prom.WaitQuery(t, joinProbeToDiskstats, 20*time.Second, func(r []testkit.Sample) bool {
		return len(r) > 0 && r[0].Value[1] != "0"
	})
	require.Len(t, ds, 1, "%v", ds)
	require.Equal(t, dev, ds[0].Metric["device"])
	require.NotContains(t, ds[0].Metric, "__name__", "a rate, not the raw series")
	t.Logf("diskstats join: %v writes/s = %s", ds[0].Metric, ds[0].Value[1])
}
