package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testenv"
)

func runCheckProcess(t *testing.T, wrap func(string, ...string) *exec.Cmd, dir string) (checkJSON, int) {
	t.Helper()
	cmd := diskcanaryCmd(t, wrap, "check", dir, "--samples", "200", "--min-free", "0", "--json")
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	var res checkJSON
	require.NoError(t, json.Unmarshal(out, &res), "check output: %s", out)
	return res, code
}

// Ground truth for the verdict: the same loop-device filesystem passes the
// etcd bar, and fails it (exit 1) once the blkio cgroup throttle allows
// the checking process only 20 writes per second on that device.
func TestCheckVerdictFlipsUnderBlkioThrottle(t *testing.T) {
	mnt, dev := testenv.LoopFS(t, 128<<20, "ext4")
	free, code := runCheckProcess(t, nil, mnt)
	t.Logf("unthrottled: exit %d p50 %.3fms p99 %.3fms", code, free.LatencySeconds.P50*1e3, free.LatencySeconds.P99*1e3)
	require.Equal(t, 0, code, "an idle loop device passes the 10 ms p99 bar")
	require.True(t, free.Pass)

	throttle := testenv.NewThrottle(t, dev, 20)
	slow, code := runCheckProcess(t, throttle.Command, mnt)
	t.Logf("throttled to 20 write IOPS: exit %d p50 %.3fms p99 %.3fms", code, slow.LatencySeconds.P50*1e3, slow.LatencySeconds.P99*1e3)
	require.Equal(t, 1, code, "threshold exceeded")
	require.False(t, slow.Pass)
	require.Equal(t, 200, slow.Samples)
	require.Greater(t, slow.LatencySeconds.P99, 0.010)
}
