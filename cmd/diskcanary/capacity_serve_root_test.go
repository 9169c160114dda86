package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// The daemon's capacity probe on the ground truth check's own test uses:
// ext4 on a loop device whose reads the blkio throttle holds to 500 IOPS
// for the daemon's process. The exported IOPS at the bound must be within
// 10 % of the ceiling. The loop's image is on the VM's disk, not tmpfs: the
// daemon exports no figure for a filesystem that does not reach a disk.
// The throttle dispatches in bursts, and on 2 loaded CPUs a step at 400
// can see a p99 of 100 ms or more; so the bound is 150 ms, and the step
// past the ceiling is 700, which breaks on its rate alone (the throttle
// lets through about 540 a second of it, under the 90 % a step must
// carry) with a queue far over the bound. The probe sweeps every 3 s; one
// of four sweeps must reach 450, and none may pass 550.
func TestServeCapacityProbeFindsTheBlkioReadCeiling(t *testing.T) {
	testkit.SkipUnderRace(t)
	mnt, dev := testkit.LoopFSIn(t, "", 128<<20, "ext4")
	throttle := testkit.NewReadThrottle(t, dev, 500)
	dir := filepath.Join(mnt, "canary")
	cfg := filepath.Join(t.TempDir(), "diskcanary.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`probes:
  targets:
    - name: headroom
      kind: capacity
      dir: %s
      interval: 3s
      jitter: 0.01
      max_p99: 150ms
      rates: [400, 450, 500, 700]
      working_set: 32MiB
      min_free: 1B
diskstats:
  enabled: false
smart:
  enabled: false
`, dir)), 0o600))
	addr := testkit.FreeAddr(t)
	testkit.StartCmd(t, diskcanaryCmd(t, throttle.Command, "serve", "--config.file", cfg, "--web.listen-address", addr))

	lastRun := regexp.MustCompile(`(?m)^diskcanary_capacity_last_run_timestamp_seconds\{probe="headroom"\} (\S+)$`)
	iopsRe := regexp.MustCompile(`(?m)^diskcanary_capacity_iops\{bound="0.15",device="(\S+)",pattern="randread",percentile="0.99",probe="headroom"\} (\S+)$`)
	seen, best := "", 0.0
	for sweep := 1; sweep <= 4 && best < 450; sweep++ {
		var body string
		require.Eventually(t, func() bool {
			_, b, err := get("http://" + addr + "/metrics")
			m := lastRun.FindStringSubmatch(b)
			body = b
			return err == nil && m != nil && m[1] != seen
		}, 90*time.Second, 100*time.Millisecond, "sweep %d ended", sweep)
		seen = lastRun.FindStringSubmatch(body)[1]
		require.Contains(t, body, `diskcanary_capacity_success{probe="headroom"} 1`, "sweep %d", sweep)
		require.Contains(t, body, `diskcanary_capacity_partial{probe="headroom"} 0`, "sweep %d: a step past the ceiling broke the bound", sweep)
		m := iopsRe.FindStringSubmatch(body)
		require.NotNil(t, m, "sweep %d: no IOPS series with the probe's labels in\n%s", sweep, body)
		require.Equal(t, filepath.Base(dev), m[1], "the device label is the loop device")
		iops, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err)
		t.Logf("sweep %d: %.1f IOPS at a p99 of 150 ms", sweep, iops)
		require.LessOrEqual(t, iops, 550.0, "sweep %d", sweep)
		best = max(best, iops)
	}
	require.GreaterOrEqual(t, best, 450.0, "in four sweeps none reached 450 IOPS under a 500 IOPS ceiling")
}
