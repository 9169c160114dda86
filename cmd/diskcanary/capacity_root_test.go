package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/internal/testkit/testfs"
)

// runCapacityProcess runs check --profile capacity as its own process
// (wrap puts it in a cgroup) and returns its JSON and exit status. The
// working set is 32 MiB but for the WAL pattern, which has none.
func runCapacityProcess(t *testing.T, wrap func(string, ...string) *exec.Cmd, dir string, args ...string) (capacityJSON, int) {
	t.Helper()
	base := []string{"check", dir, "--profile", "capacity", "--min-free", "0", "--allow-unsafe-fs", "--json", "--quiet", "--timeout", "50s"}
	if !slices.Contains(args, "wal") {
		base = append(base, "--working-set", "32m")
	}
	cmd := diskcanaryCmd(t, wrap, append(base, args...)...)
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	var j capacityJSON
	require.NoError(t, json.Unmarshal(out, &j), "check output: %s", out)
	for _, s := range j.Steps {
		t.Logf("asked %5.0f achieved %7.1f p50 %7.3fms p99 %7.3fms service p99 %7.3fms held %v",
			s.AskedIOPS, s.AchievedIOPS, s.LatencySeconds.P50*1e3, s.LatencySeconds.P99*1e3, s.ServiceP99Seconds*1e3, s.Held)
	}
	return j, code
}

// Ground truth for the knee: ext4 on a loop device whose reads the blkio
// cgroup throttle holds to 500 IOPS for the checking process. The sweep
// must put the IOPS at the bound within 10 % of it. Above 500 the queue
// grows by the excess each second, so 550 asked breaks the bound whatever
// the machine does: that side gets no second chance. The bound is 50 ms,
// as for writes: on 2 CPUs shared by parallel test packages a read's p99
// alone can pass 10 ms below the ceiling. Up to three runs; one must
// reach 450.
func TestCapacityFindsTheBlkioReadCeiling(t *testing.T) {
	testkit.SkipUnderRace(t)
	mnt, dev := testkit.LoopFSIn(t, "/dev/shm", 128<<20, "ext4")
	throttle := testkit.NewReadThrottle(t, dev, 500)
	var j capacityJSON
	for attempt := 1; attempt <= 3; attempt++ {
		var code int
		j, code = runCapacityProcess(t, throttle.Command, filepath.Join(mnt, "canary"), "--max-p99", "50ms",
			"--rates", "400,450,500,550,600,700")
		require.Contains(t, []int{0, 1}, code, "%+v", j)
		require.True(t, j.BoundReached, "a step past 500 broke the bound")
		if j.IOPSAtBound == nil {
			t.Logf("run %d: the first step broke the bound", attempt)
			continue
		}
		t.Logf("run %d: IOPS at the bound %.1f", attempt, *j.IOPSAtBound)
		require.LessOrEqual(t, *j.IOPSAtBound, 550.0)
		if *j.IOPSAtBound >= 450 {
			break
		}
	}
	require.NotNil(t, j.IOPSAtBound, "in three runs the first step always broke the bound")
	require.GreaterOrEqual(t, *j.IOPSAtBound, 450.0)
	require.InDelta(t, 500, *j.AskedIOPSAtBound, 50)
}

// The same for random writes: ext4 on a loop device whose writes the blkio
// throttle holds to 500 IOPS for the checking process (O_DIRECT writes
// into blocks the layout wrote: no allocation; the cgroup's own count is
// one write a write). The bound is 50 ms, not 10: on 2 loaded CPUs a
// direct write's p99 alone reaches tens of ms (fio's too), which would
// hide the throttle; above its ceiling the queue grows by the excess each
// second (550 asked: ~90 writes behind, ~180 ms, after a step), so the
// knee stands out whatever the load. Up to three runs, as for reads.
func TestCapacityFindsTheBlkioWriteCeiling(t *testing.T) {
	testkit.SkipUnderRace(t)
	mnt, dev := testkit.LoopFSIn(t, "/dev/shm", 128<<20, "ext4")
	throttle := testkit.NewThrottle(t, dev, 500)
	var j capacityJSON
	for attempt := 1; attempt <= 3; attempt++ {
		var code int
		j, code = runCapacityProcess(t, throttle.Command, filepath.Join(mnt, "canary"), "--pattern", "randwrite",
			"--max-p99", "50ms", "--rates", "400,450,500,550,600,700")
		require.Contains(t, []int{0, 1}, code, "%+v", j)
		require.Equal(t, "randwrite", j.Pattern)
		require.True(t, j.BoundReached, "a step past 500 broke the bound")
		if j.IOPSAtBound == nil {
			t.Logf("run %d: the first step broke the bound", attempt)
			continue
		}
		t.Logf("run %d: IOPS at the bound %.1f, %d bytes written", attempt, *j.IOPSAtBound, j.WrittenBytes)
		require.LessOrEqual(t, *j.IOPSAtBound, 550.0)
		if *j.IOPSAtBound >= 450 {
			break
		}
	}
	require.NotNil(t, j.IOPSAtBound, "in three runs the first step always broke the bound")
	require.GreaterOrEqual(t, *j.IOPSAtBound, 450.0)
	require.InDelta(t, 500, *j.AskedIOPSAtBound, 50)
	issued := 0
	for _, s := range j.Steps {
		issued += s.Ops - s.Missed
	}
	require.Equal(t, int64(issued)*4096, j.WrittenBytes)
}

// The WAL pattern on the FUSE test filesystem with 5 ms injected into
// every fdatasync: every append takes at least 5 ms, so every step's p50
// and p99 are at least 5 ms; one writer at 5 ms an append carries at most
// 200 appends/s, so 250 asked falls short and the IOPS at the bound is at
// most 200.
func TestCapacityWALOnFUSEWithSyncDelay(t *testing.T) {
	testkit.SkipUnderRace(t)
	m := testfs.Start(t, "", "--sync-delay", "5ms")
	j, code := runCapacityProcess(t, nil, filepath.Join(m.Dir, "canary"), "--pattern", "wal", "--rates", "100,150,250")
	require.Contains(t, []int{0, 1}, code, "%+v", j)
	require.Equal(t, "wal", j.Pattern)
	require.Equal(t, 1, j.Concurrency)
	require.EqualValues(t, 2300, j.BlockSize)
	require.NotEmpty(t, j.Steps)
	for _, s := range j.Steps {
		require.GreaterOrEqual(t, s.LatencySeconds.P50, 0.005, "asked %.0f", s.AskedIOPS)
		require.GreaterOrEqual(t, s.LatencySeconds.P99, 0.005, "asked %.0f", s.AskedIOPS)
		require.GreaterOrEqual(t, s.ServiceP99Seconds, 0.005, "asked %.0f", s.AskedIOPS)
		require.LessOrEqual(t, s.AchievedIOPS, 200.0, "one writer at 5 ms")
	}
	require.True(t, j.BoundReached)
	last := j.Steps[len(j.Steps)-1]
	require.False(t, last.Held)
	if j.IOPSAtBound != nil {
		require.LessOrEqual(t, *j.IOPSAtBound, 200.0)
	}
	require.Greater(t, j.WrittenBytes, int64(0))
	require.False(t, j.Trusted, "FUSE does not tell the truth about a disk")
	require.Empty(t, probeFiles(t, m.Dir), "the segment is removed")
}

// Every read on the FUSE test filesystem takes at least the injected 5 ms,
// so every step's p50 and p99 are at least 5 ms; and 32 reads outstanding
// at 5 ms each carry at most 6,400 IOPS, so 8,000 asked falls short: the
// IOPS at the bound is at most that.
func TestCapacityOnFUSEWithReadDelay(t *testing.T) {
	testkit.SkipUnderRace(t)
	m := testfs.Start(t, "", "--read-delay", "5ms")
	j, code := runCapacityProcess(t, nil, filepath.Join(m.Dir, "canary"), "--rates", "500,1000,2000,4000,8000")
	require.Contains(t, []int{0, 1}, code, "%+v", j)
	require.NotEmpty(t, j.Steps)
	for _, s := range j.Steps {
		require.GreaterOrEqual(t, s.LatencySeconds.P50, 0.005, "asked %.0f", s.AskedIOPS)
		require.GreaterOrEqual(t, s.LatencySeconds.P99, 0.005, "asked %.0f", s.AskedIOPS)
		require.GreaterOrEqual(t, s.ServiceP99Seconds, 0.005, "asked %.0f", s.AskedIOPS)
		require.LessOrEqual(t, s.AchievedIOPS, 6400.0, "32 slots at 5 ms")
	}
	require.True(t, j.BoundReached)
	last := j.Steps[len(j.Steps)-1]
	require.False(t, last.Held)
	if j.IOPSAtBound != nil {
		require.LessOrEqual(t, *j.IOPSAtBound, 6400.0)
	}
	require.False(t, j.Trusted, "FUSE does not tell the truth about a disk")
}

// Reads that hang mid-sweep: at --timeout the sweep waits for the reads in
// flight up to the stall threshold (5 s), then gives up on them with a
// one-line reason and exit 2, the step done kept; the working set, which
// the hung reads hold, is left behind and named, not unlinked (an unlink
// would hang on it too).
func TestCapacityOnHungReadsExits2(t *testing.T) {
	m := testfs.Start(t, "")
	cmd := diskcanaryCmd(t, nil, "check", m.Dir, "--profile", "capacity", "--rates", "1000,1250", "--max-p99", "1s",
		"--working-set", "1m", "--min-free", "0", "--allow-unsafe-fs", "--timeout", "4s")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, cmd.Start())
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	readset := filepath.Join(m.Dir, ".diskcanary-check-readset")
	var reason string
	for reason == "" {
		select {
		case line := <-lines:
			t.Logf("after %v: %s", time.Since(start).Round(time.Millisecond), line)
			if strings.HasPrefix(line, "capacity: [1000 IOPS asked]") {
				m.Do(t, "hang-reads")
			}
			if strings.HasPrefix(line, "diskcanary: ") {
				reason = line
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no reason printed 20 s after the start")
		}
	}
	require.Regexp(t, `^diskcanary: could not measure capacity on `+m.Dir+`: --timeout 4s: timed out after 1 step: a read on `+m.Dir+
		` has been in flight for 5(\.\d+)?s \(hung disk\?\); `+regexp.QuoteMeta(readset)+` is left behind while that I/O is stuck: remove it once the disk answers$`, reason)
	require.Less(t, time.Since(start), 12*time.Second, "--timeout 4 s, then the stall threshold of 5 s")
	require.Equal(t, []string{".diskcanary-check-readset"}, probeFiles(t, m.Dir))
	m.Do(t, "release")
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 2, ee.ExitCode(), "could not measure")
	require.Contains(t, stdout.String(), "  COULD NOT MEASURE: --timeout 4s: timed out after 1 step: a read on ")
	// The step held its rate: 1000 asked, at least 990 achieved (a race
	// build's workers may end a step a read short of the plan's span).
	require.Regexp(t, `\n        1000 +(99\d\.\d|1000\.0) `, stdout.String())
	require.Equal(t, 1, strings.Count(stdout.String(), "  held\n"), "the step done, in the table:\n%s", stdout.String())
	require.Equal(t, []string{".diskcanary-check-readset"}, probeFiles(t, m.Dir), "as the reason said")
	require.NoError(t, os.Remove(readset))
}

// tmpfs is memory: every pattern is refused at once (exit 2, the reason,
// the JSON naming the pattern) unless --allow-unsafe-fs; with it the WAL
// sweep runs, and its fdatasyncs, reaching no device, are named in the
// warnings; nothing is left behind.
func TestCapacityPatternsOnTmpfs(t *testing.T) {
	dir := testkit.Tmpfs(t)
	for _, pattern := range []string{"randread", "randwrite", "wal"} {
		args := []string{dir, "--profile", "capacity", "--pattern", pattern, "--rates", "1000", "--min-free", "0", "--json", "--quiet"}
		if pattern != "wal" {
			args = append(args, "--working-set", "4m")
		}
		r := runCheckBinary(t, 30*time.Second, 0, 0, args...)
		require.Equal(t, 2, r.code, "%s: %s", pattern, r.stderr)
		require.Equal(t, "diskcanary: could not measure capacity on "+dir+": "+dir+" is tmpfs (memory): no disk to measure (--allow-unsafe-fs to run it anyway)\n", r.stderr)
		var j capacityJSON
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &j), r.stdout)
		require.Equal(t, pattern, j.Pattern)
		require.Equal(t, "could not measure", j.Verdict)
		require.Empty(t, j.Steps)
		require.Empty(t, probeFiles(t, dir))
	}
	r := runCheckBinary(t, 30*time.Second, 0, 0, dir, "--profile", "capacity", "--pattern", "wal", "--rates", "1000", "--max-p99", "1s",
		"--min-free", "0", "--json", "--quiet", "--allow-unsafe-fs")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	var j capacityJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &j), r.stdout)
	require.Equal(t, "pass", j.Verdict)
	require.False(t, j.Trusted)
	// The warning reads the fdatasync p50 (under 10 µs on tmpfs); a race
	// build's op can take longer, so the race pass leaves it out.
	if !testkit.Race {
		require.Contains(t, j.Warnings, "fdatasync p50 < 10µs and no flush reached a device: the flush is not reaching a disk (cache, tmpfs or a lying write cache)")
	}
	require.Empty(t, probeFiles(t, dir))
}

// A block device is read in place, read-only: the randread sweep over a
// raw loop device whose reads the blkio throttle holds to 500 IOPS finds
// that ceiling within 10 % (so the reads reached the device), and the
// device's bytes are the same after it. A writing pattern and the
// working-set flags are usage errors there. Up to three runs for the low
// side, as for the filesystem's ceiling above.
func TestCapacityOnABlockDevice(t *testing.T) {
	testkit.SkipUnderRace(t)
	testkit.RequireRoot(t)
	f, err := os.CreateTemp("/dev/shm", "diskcanary-capacity-dev-*.img")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	data := make([]byte, 32<<20)
	_, _ = rand.Read(data)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	before := sha256.Sum256(data)
	dev := testkit.LoopDevice(t, f.Name())

	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--pattern", "randwrite"}, "--pattern randwrite on " + dev + ": a block device is only read (--pattern randread), never written"},
		{[]string{"--pattern", "wal"}, "--pattern wal on " + dev + ": a block device is only read (--pattern randread), never written"},
		{[]string{"--working-set", "1m"}, "--working-set does not apply to a block device: the reads span the whole device"},
		{[]string{"--keep-working-set"}, "--keep-working-set does not apply to a block device: the reads span the whole device"},
	} {
		_, code, err := runCLI(t, append([]string{"check", dev, "--profile", "capacity"}, tc.args...)...)
		require.Equal(t, 64, code, "%q: %v", tc.args, err)
		require.EqualError(t, err, tc.err, "%q", tc.args)
	}

	throttle := testkit.NewReadThrottle(t, dev, 500)
	var j capacityJSON
	for attempt := 1; attempt <= 3; attempt++ {
		cmd := diskcanaryCmd(t, throttle.Command, "check", dev, "--profile", "capacity", "--json", "--quiet", "--timeout", "50s",
			"--max-p99", "50ms", "--rates", "400,450,500,550,600,700")
		out, err := cmd.Output()
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
			t.Fatalf("check on %s: %v: %s", dev, err, out)
		}
		j = capacityJSON{}
		require.NoError(t, json.Unmarshal(out, &j), "%s", out)
		require.Equal(t, dev, j.Path)
		require.Equal(t, filepath.Base(dev), j.Device)
		require.Equal(t, "randread", j.Pattern)
		require.True(t, j.BoundReached, "a step past 500 broke the bound: %+v", j.Steps)
		if j.IOPSAtBound != nil && *j.IOPSAtBound >= 450 {
			break
		}
		t.Logf("run %d: IOPS at the bound %v", attempt, j.IOPSAtBound)
	}
	require.NotNil(t, j.IOPSAtBound, "in three runs the first step always broke the bound")
	require.GreaterOrEqual(t, *j.IOPSAtBound, 450.0)
	require.LessOrEqual(t, *j.IOPSAtBound, 550.0)
	require.InDelta(t, 500, *j.AskedIOPSAtBound, 50)

	after, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	require.Equal(t, before, sha256.Sum256(after), "the device was only read")
}
