package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testenv"
	"github.com/diskcanary/diskcanary/internal/testfs"
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
// the checking process only 20 writes per second on that device. The loop
// device's backing file is on tmpfs, so "idle" is a fast device whatever
// the machine's own disk is doing (a shared VM's disk has had 20 ms p99s).
func TestCheckVerdictFlipsUnderBlkioThrottle(t *testing.T) {
	mnt, dev := testenv.LoopFSIn(t, "/dev/shm", 128<<20, "ext4")
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

// A hung disk makes check give up at --timeout with a one-line reason and
// exit 2, instead of waiting forever. (The kernel keeps a process whose
// thread is stuck in a FUSE or disk request from finishing its exit until
// the request returns, so the exit status arrives after the release; the
// reason is printed at the timeout.)
func TestCheckOnHungDiskExits2(t *testing.T) {
	m := testfs.Start(t, "")
	m.Do(t, "hang")
	cmd := diskcanaryCmd(t, nil, "check", m.Dir, "--samples", "100", "--min-free", "0", "--timeout", "1s")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, cmd.Start())
	reason := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "timed out") {
				reason <- sc.Text()
			}
		}
		close(reason)
	}()
	select {
	case line := <-reason:
		t.Logf("after %v: %s", time.Since(start).Round(time.Millisecond), line)
		require.Contains(t, line, "in flight")
		require.Less(t, time.Since(start), 5*time.Second)
	case <-time.After(10 * time.Second):
		t.Fatal("no reason printed 10s after a 1s timeout")
	}
	m.Do(t, "release")
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 2, ee.ExitCode(), "could not measure")
}
