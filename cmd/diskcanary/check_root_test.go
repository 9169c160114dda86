package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/internal/testkit/testfs"
	"github.com/diskcanary/diskcanary/probes"
)

func runCheckProcess(t *testing.T, wrap func(string, ...string) *exec.Cmd, dir string) (checkJSON, int) {
	t.Helper()
	// --allow-unsafe-fs: the loop device's file is in tmpfs, which check
	// otherwise refuses to judge (TestCheckOnLoopBackedByTmpfsIsNeverAPass).
	cmd := diskcanaryCmd(t, wrap, "check", dir, "--samples", "200", "--min-free", "0", "--json", "--allow-unsafe-fs")
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
	mnt, dev := testkit.LoopFSIn(t, "/dev/shm", 128<<20, "ext4")
	// The fast side is a latency: on a loaded machine (CI runs packages
	// side by side on 2 CPUs) three of 200 fdatasyncs can wait over 10 ms
	// for a CPU. Up to three runs; one must pass. The throttled side below
	// is not a matter of luck and gets one run.
	var free checkJSON
	code := -1
	for attempt := 1; attempt <= 3 && code != 0; attempt++ {
		free, code = runCheckProcess(t, nil, mnt)
		t.Logf("unthrottled, run %d: exit %d p50 %.3fms p99 %.3fms", attempt, code, free.LatencySeconds.P50*1e3, free.LatencySeconds.P99*1e3)
	}
	require.Equal(t, 0, code, "an idle loop device passes the 10 ms p99 bar")
	require.True(t, free.Pass)

	throttle := testkit.NewThrottle(t, dev, 20)
	slow, code := runCheckProcess(t, throttle.Command, mnt)
	t.Logf("throttled to 20 write IOPS: exit %d p50 %.3fms p99 %.3fms", code, slow.LatencySeconds.P50*1e3, slow.LatencySeconds.P99*1e3)
	require.Equal(t, 1, code, "threshold exceeded")
	require.False(t, slow.Pass)
	// 200 planned allow 2 over 10 ms: the third ends the run.
	require.True(t, slow.Partial)
	require.Less(t, slow.Samples, 200)
	require.Regexp(t, `^stopped after \d+ of 200 samples: 3 were over 10\.00ms, more than the p99 allows \(2\), so it cannot pass$`, slow.Reason)
	require.Greater(t, slow.LatencySeconds.P99, 0.010)
}

// ext4 on a loop device whose file is in tmpfs is memory: check follows
// the loop to its backing file's filesystem, and through a stack of loops,
// and refuses as it refuses tmpfs (exit 2, the chain in the reason); a loop
// whose file is on a disk's filesystem is measured.
func TestCheckOnLoopBackedByTmpfsIsNeverAPass(t *testing.T) {
	inner, innerDev := testkit.LoopFSIn(t, "/dev/shm", 64<<20, "ext4")
	outer, outerDev := testkit.LoopFSIn(t, inner, 32<<20, "ext4")
	backing := func(dev string) string {
		b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop/backing_file"))
		require.NoError(t, err)
		return strings.TrimSpace(string(b))
	}
	innerVia := fmt.Sprintf("ext4 on %s, whose backing file %s is on tmpfs", filepath.Base(innerDev), backing(innerDev))
	outerVia := fmt.Sprintf("ext4 on %s, whose backing file %s is %s", filepath.Base(outerDev), backing(outerDev), innerVia)
	for _, tc := range []struct{ mnt, via string }{{inner, innerVia}, {outer, outerVia}} {
		dir := filepath.Join(tc.mnt, "canary")
		out, code, err := runCLI(t, "check", dir, "--samples", "200", "--min-free", "0", "--json")
		require.Equal(t, 2, code, out)
		require.EqualError(t, err, fmt.Sprintf("could not measure etcd on %s: %s is %s (memory): no disk to measure (--allow-unsafe-fs to run it anyway)", dir, dir, tc.via))
		j := decodeCheck(t, out)
		require.Equal(t, "could not measure", j.Verdict)
		require.False(t, j.Trusted)
		require.Equal(t, tc.via+": this filesystem does not tell the truth about a disk", j.Warnings[0])
		require.Equal(t, 0, j.Samples)
		require.NoDirExists(t, dir, "check removes the directory it created")
	}

	// The daemon's startup check says the same.
	warnings, err := probes.Preflight(config.Probe{Name: "wal", Kind: config.KindWAL, Dir: filepath.Join(outer, "canary")})
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(outer, "canary") + " is on " + outerVia +
		`: its latencies are not a disk's, and the daemon will export diskcanary_probe_target_warning{warning="tmpfs"} 1`}, warnings)

	// A loop device whose file is on the test's disk is a disk.
	disk, _ := testkit.LoopFS(t, 128<<20, "ext4")
	out, code, err := runCLI(t, "check", filepath.Join(disk, "canary"), "--profile", "fio-etcd", "--samples", "200", "--min-free", "0", "--max-p99", "10s", "--json")
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	j := decodeCheck(t, out)
	require.True(t, j.Trusted, "%v", j.Warnings)
	require.Equal(t, "pass", j.Verdict)
}

// A hung disk makes check give up with a one-line reason and exit 2,
// instead of waiting forever: at --timeout or at a signal, once the op in
// flight is past the stall threshold (5 s, the daemon's) and so is hung,
// not merely slow. The WAL file is not unlinked while the fdatasync holds
// it (leftBehind): the reason says so and names it. (The kernel
// keeps a process whose thread is stuck in a FUSE or disk request from
// finishing its exit until the request returns, so the exit status
// arrives after the release; the reason is printed before.)
func TestCheckOnHungDiskExits2(t *testing.T) {
	m := testfs.Start(t, "")
	for _, tc := range []struct {
		args   []string
		signal bool
		reason string
	}{
		{[]string{"--timeout", "1s"}, false, "--timeout 1s: timed out after 0 of 100 samples"},
		{nil, true, "interrupted after 0 of 100 samples"},
	} {
		m.Do(t, "hang")
		cmd := diskcanaryCmd(t, nil, append([]string{"check", m.Dir, "--samples", "100", "--min-free", "0"}, tc.args...)...)
		stderr, err := cmd.StderrPipe()
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, cmd.Start())
		reason := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				reason <- sc.Text()
			}
			close(reason)
		}()
		if tc.signal {
			require.Eventually(t, func() bool {
				_, blocked, err := m.Control.Stats()
				return err == nil && blocked == 1
			}, 5*time.Second, 10*time.Millisecond, "a held fdatasync")
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		}
		wal := m.Dir + "/.diskcanary-check-wal"
		select {
		case line := <-reason:
			t.Logf("after %v: %s", time.Since(start).Round(time.Millisecond), line)
			require.Regexp(t, `^diskcanary: could not measure etcd on `+m.Dir+`: `+regexp.QuoteMeta(tc.reason)+
				`: an I/O on `+m.Dir+` has been in flight for 5(\.\d+)?s \(hung disk\?\); `+
				regexp.QuoteMeta(wal)+` is left behind while that I/O is stuck: remove it once the disk answers$`, line)
			require.Less(t, time.Since(start), 8*time.Second, "the stall threshold is 5 s")
		case <-time.After(15 * time.Second):
			t.Fatal("no reason printed 15 s after the hang")
		}
		require.Equal(t, []string{".diskcanary-check-wal"}, probeFiles(t, m.Dir))
		m.Do(t, "release")
		err = cmd.Wait()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, 2, ee.ExitCode(), "could not measure")
		require.Equal(t, []string{".diskcanary-check-wal"}, probeFiles(t, m.Dir), "as the reason said")
		require.NoError(t, os.Remove(wal))
	}
}

// checkRun is one finished check process.
type checkRun struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// runCheckBinary runs check in a new process, sends sig after signalAfter
// (none when 0), and waits at most limit for it to exit.
func runCheckBinary(t *testing.T, limit time.Duration, sig syscall.Signal, signalAfter time.Duration, args ...string) checkRun {
	t.Helper()
	cmd := diskcanaryCmd(t, nil, append([]string{"check"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if signalAfter > 0 {
		select {
		case err := <-done:
			t.Fatalf("check exited before the signal (%v): %s%s", err, stdout.String(), stderr.String())
		case <-time.After(signalAfter):
		}
		require.NoError(t, cmd.Process.Signal(sig))
		start = time.Now()
	}
	select {
	case <-done:
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("check still running after %v: %s%s", limit, stdout.String(), stderr.String())
	}
	return checkRun{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode(), time.Since(start)}
}

func decodeCheck(t *testing.T, out string) checkJSON {
	t.Helper()
	var j checkJSON
	require.NoError(t, json.Unmarshal([]byte(out), &j), "check output: %s", out)
	return j
}

func probeFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// tmpfs is memory: no disk behind it to judge. Without the opt-in, check
// says so at once (exit 2, one line, the JSON with the reason); with
// --allow-unsafe-fs it runs, and the output says the pass describes no disk.
func TestCheckOnTmpfsIsNeverAPass(t *testing.T) {
	dir := testkit.Tmpfs(t)
	for _, profile := range []string{"etcd", "fio-etcd", "randread"} {
		r := runCheckBinary(t, 30*time.Second, 0, 0, dir, "--profile", profile, "--samples", "200", "--working-set", "4m", "--min-free", "0", "--json")
		require.Equal(t, 2, r.code, "%s: %s", profile, r.stderr)
		require.Equal(t, fmt.Sprintf("diskcanary: could not measure %s on %s: %s is tmpfs (memory): no disk to measure (--allow-unsafe-fs to run it anyway)\n", profile, dir, dir), r.stderr)
		j := decodeCheck(t, r.stdout)
		require.Equal(t, "could not measure", j.Verdict)
		require.False(t, j.Pass)
		require.False(t, j.Trusted)
		require.Equal(t, "tmpfs", j.Filesystem)
		require.Equal(t, 0, j.Samples)
		require.Contains(t, j.Warnings, "tmpfs: this filesystem does not tell the truth about a disk")
		require.Empty(t, probeFiles(t, dir))
	}

	r := runCheckBinary(t, 30*time.Second, 0, 0, dir, "--profile", "all", "--samples", "200", "--working-set", "4m", "--min-free", "0", "--json")
	require.Equal(t, 2, r.code)
	var all []checkJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &all), r.stdout)
	require.Len(t, all, 3)
	for _, j := range all {
		require.Equal(t, "could not measure", j.Verdict, j.Profile)
	}

	r = runCheckBinary(t, 60*time.Second, 0, 0, dir, "--profile", "fio-etcd", "--samples", "200", "--min-free", "0", "--allow-unsafe-fs")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	for _, want := range []string{
		"  WARNING: tmpfs: this filesystem does not tell the truth about a disk\n",
		"  WARNING: accepted with --allow-unsafe-fs: this pass does not describe a disk\n",
		"  PASS: fdatasync p99 ",
	} {
		require.Contains(t, r.stdout, want)
	}
	r = runCheckBinary(t, 60*time.Second, 0, 0, dir, "--profile", "randread", "--samples", "200", "--working-set", "4m", "--min-free", "0", "--allow-unsafe-fs", "--json")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	j := decodeCheck(t, r.stdout)
	require.Equal(t, "pass", j.Verdict)
	require.False(t, j.Trusted)
	require.Contains(t, j.Warnings, "accepted with --allow-unsafe-fs: this pass does not describe a disk")
	require.Empty(t, probeFiles(t, dir), "the working set is removed")
}

// FUSE: a userspace daemon decides what fdatasync means. A fast one is
// "could not measure" (exit 2), never a pass; O_DIRECT refused is the same
// for randread.
func TestCheckOnFUSEIsNeverAPass(t *testing.T) {
	m := testfs.Start(t, "")
	r := runCheckBinary(t, 60*time.Second, 0, 0, m.Dir, "--profile", "fio-etcd", "--samples", "200", "--min-free", "0", "--json")
	require.Equal(t, 2, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("diskcanary: could not measure fio-etcd on %s: fuse: this filesystem does not tell the truth about a disk (--allow-unsafe-fs to judge it anyway)\n", m.Dir), r.stderr)
	j := decodeCheck(t, r.stdout)
	require.Equal(t, "could not measure", j.Verdict)
	require.Equal(t, 200, j.Samples, "what was measured is still reported")
	require.False(t, j.Partial)

	m.Do(t, "refuse-odirect")
	r = runCheckBinary(t, 60*time.Second, 0, 0, m.Dir, "--profile", "randread", "--samples", "200", "--working-set", "4m", "--min-free", "0")
	require.Equal(t, 2, r.code)
	require.Equal(t, fmt.Sprintf("diskcanary: could not measure randread on %s: %s: filesystem refuses O_DIRECT (--allow-unsafe-fs to time page-cache reads anyway)\n", m.Dir, m.Dir), r.stderr)
	require.Empty(t, probeFiles(t, m.Dir))

	r = runCheckBinary(t, 60*time.Second, 0, 0, m.Dir, "--profile", "randread", "--samples", "200", "--working-set", "4m", "--min-free", "0", "--allow-unsafe-fs", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	j = decodeCheck(t, r.stdout)
	require.Equal(t, "pass", j.Verdict)
	require.False(t, j.Trusted)
	require.Contains(t, j.Warnings, "O_DIRECT refused: the reads come from the page cache, not the disk")
	require.Empty(t, probeFiles(t, m.Dir))
}

// The bar: 60 ms per fdatasync, default flags (10,000 samples,
// --max-p99 10ms). The 101st sample over 10 ms makes the p99 certain to
// fail, so check stops there (~101 × 70 ms with the 10 ms gap) and prints
// the percentiles of what it took, marked partial, instead of running
// 12 minutes into --timeout.
func TestCheckFailsASlowDiskInSeconds(t *testing.T) {
	testkit.SkipUnderRace(t)
	m := testfs.Start(t, "")
	m.Do(t, "sync-delay 60ms")
	r := runCheckBinary(t, 60*time.Second, 0, 0, m.Dir, "--json")
	t.Logf("exit %d after %v; stderr: %s", r.code, r.took.Round(time.Millisecond), r.stderr)
	require.Equal(t, 1, r.code, r.stdout+r.stderr)
	require.Less(t, r.took, 20*time.Second)
	j := decodeCheck(t, r.stdout)
	require.Equal(t, "fail", j.Verdict)
	require.True(t, j.Partial)
	require.Equal(t, 101, j.Samples)
	require.Equal(t, 10000, j.PlannedSamples)
	require.Equal(t, "stopped after 101 of 10000 samples: 101 were over 10.00ms, more than the p99 allows (100), so it cannot pass", j.Reason)
	require.GreaterOrEqual(t, j.LatencySeconds.Min, 0.060)
	require.Less(t, j.LatencySeconds.P99, 0.070)
	require.False(t, j.Trusted, "FUSE: the FAIL stands, the warning is kept")
	require.Equal(t, "diskcanary: etcd: p99 latency over the threshold\n", r.stderr)
	require.Empty(t, probeFiles(t, m.Dir))

	// The table says the same.
	r = runCheckBinary(t, 60*time.Second, 0, 0, m.Dir, "--samples", "1000")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stdout, "  11 of 1000 planned (partial) sequential 2300-byte appends")
	require.Contains(t, r.stdout, "(partial: stopped after 11 of 1000 samples: 11 were over 10.00ms, more than the p99 allows (10), so it cannot pass)\n")
	require.Contains(t, r.stdout, "  WARNING: fuse: this filesystem does not tell the truth about a disk\n")
}

// Ctrl-C and SIGTERM, and --timeout, stop the run between two ops: the
// samples taken are reported (partial, exit 2, an honest reason: no "hung"
// of a 50 ms op) and the probe files are removed.
func TestCheckInterruptedGivesPartialResults(t *testing.T) {
	testkit.SkipUnderRace(t)
	m := testfs.Start(t, "")
	m.Do(t, "sync-delay 50ms")
	m.Do(t, "read-delay 50ms")
	for _, tc := range []struct {
		profile string
		sig     syscall.Signal
	}{{"etcd", syscall.SIGINT}, {"etcd", syscall.SIGTERM}, {"fio-etcd", syscall.SIGINT}, {"randread", syscall.SIGTERM}} {
		r := runCheckBinary(t, 10*time.Second, tc.sig, 1500*time.Millisecond, m.Dir,
			"--profile", tc.profile, "--working-set", "8m", "--max-p99", "1s", "--min-free", "0", "--json")
		t.Logf("%s %v: exit %d %v after the signal: %s", tc.profile, tc.sig, r.code, r.took.Round(time.Millisecond), r.stderr)
		require.Equal(t, 2, r.code, r.stderr)
		require.Less(t, r.took, time.Second, "the op in flight ends within 50 ms")
		j := decodeCheck(t, r.stdout)
		require.Equal(t, "could not measure", j.Verdict)
		require.True(t, j.Partial)
		require.Equal(t, 10000, j.PlannedSamples)
		require.Greater(t, j.Samples, 5)
		require.Less(t, j.Samples, 40)
		require.Equal(t, fmt.Sprintf("interrupted after %d of 10000 samples", j.Samples), j.Reason)
		require.Equal(t, fmt.Sprintf("diskcanary: could not measure %s on %s: %s\n", tc.profile, m.Dir, j.Reason), r.stderr)
		require.GreaterOrEqual(t, j.LatencySeconds.Min, 0.050)
		require.NotContains(t, r.stderr, "hung")
		require.Empty(t, probeFiles(t, m.Dir), "probe files removed")
	}

	r := runCheckBinary(t, 10*time.Second, 0, 0, m.Dir, "--timeout", "1s", "--max-p99", "1s", "--min-free", "0")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stdout, " of 10000 planned (partial) sequential 2300-byte appends")
	require.Contains(t, r.stdout, "  COULD NOT MEASURE: --timeout 1s: timed out after ")
	require.Regexp(t, `^diskcanary: could not measure etcd on \S+: --timeout 1s: timed out after \d+ of 10000 samples\n$`, r.stderr)
	require.Empty(t, probeFiles(t, m.Dir), "probe files removed")
}
