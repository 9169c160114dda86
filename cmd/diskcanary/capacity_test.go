package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Bad input is refused before anything is measured: exit 64, a message
// naming the flag and the fix, and nothing created in DIR.
func TestCapacityUsageErrors(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "canary")
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--max-p99", "0s"}, "--max-p99 0s: must be positive"},
		{[]string{"--max-p99", "-1ms"}, "--max-p99 -1ms: must be positive"},
		{[]string{"--rates", "100,200,200"}, `--rates "100,200,200": the rates must rise, and 200 follows 200`},
		{[]string{"--rates", "400,200"}, `--rates "400,200": the rates must rise, and 200 follows 400`},
		{[]string{"--rates", "100,,200"}, `--rates "100,,200": "" is not an IOPS rate (a number over 0, at most 1000000)`},
		{[]string{"--rates", "0,100"}, `--rates "0,100": 0 is not an IOPS rate (a number over 0, at most 1000000)`},
		{[]string{"--rates", "100,NaN"}, `--rates "100,NaN": NaN is not an IOPS rate (a number over 0, at most 1000000)`},
		{[]string{"--rates", "100,2000000"}, `--rates "100,2000000": 2000000 is not an IOPS rate (a number over 0, at most 1000000)`},
		{[]string{"--rates", "1k"}, `--rates "1k": "1k" is not an IOPS rate (a number over 0, at most 1000000)`},
		{[]string{"--rates", strings.Repeat("1,", 100) + "1"}, "--rates: 101 steps; at most 100"},
		{[]string{"--plot", filepath.Join(parent, "missing", "curve.svg")},
			"--plot " + filepath.Join(parent, "missing", "curve.svg") + ": directory " + filepath.Join(parent, "missing") + " does not exist"},
		{[]string{"--plot", filepath.Join(parent, "curve.txt")}, "--plot " + filepath.Join(parent, "curve.txt") + ": want a .svg or .png file"},
		{[]string{"--jobs", "2"}, "--jobs applies to the etcd profiles (concurrent writers), not capacity (--pattern sets the ops outstanding)"},
		{[]string{"--lat-log", filepath.Join(parent, "lat.csv")}, "--lat-log applies to the etcd and randread profiles, not capacity"},
		{[]string{"--samples", "2000"}, "--samples does not apply to --profile capacity: each step takes at least 1000 ops and at least 1s"},
		{[]string{"--gap", "1ms"}, "--gap does not apply to --profile capacity: the ops come at the step's rate"},
		{[]string{"--pattern", "seqread"}, `--pattern "seqread": want randread, randwrite, wal`},
		{[]string{"--pattern", ""}, `--pattern "": want randread, randwrite, wal`},
		{[]string{"--pattern", "wal", "--working-set", "1m"}, "--working-set does not apply to --pattern wal: it appends to a segment of its own"},
		{[]string{"--pattern", "wal", "--keep-working-set"}, "--keep-working-set does not apply to --pattern wal: it appends to a segment of its own"},
		{[]string{"--pattern", "randwrite", "--write-budget", "0"}, `--write-budget "0": want a positive size, e.g. 2GiB`},
		{[]string{"--pattern", "randwrite", "--write-budget", "lots"}, `--write-budget "lots": want a positive size, e.g. 2GiB`},
		// 1,000 writes of 4 KiB; 1,000 appends of up to 2 pages and 8 KiB of journal.
		{[]string{"--pattern", "randwrite", "--write-budget", "1m"}, "--write-budget 1m: the first step alone (1000 ops at 100 IOPS asked) may write 4000KiB"},
		{[]string{"--pattern", "wal", "--rates", "2000", "--write-budget", "16m"}, "--write-budget 16m: the first step alone (2000 ops at 2000 IOPS asked) may write 32000KiB"},
	} {
		_, code, err := runCLI(t, append([]string{"check", dir, "--profile", "capacity"}, tc.args...)...)
		require.Equal(t, 64, code, "%q: %v", tc.args, err)
		require.EqualError(t, err, tc.err, "%q", tc.args)
	}
	// The capacity flags on another profile.
	for _, args := range [][]string{{"--rates", "100,200"}, {"--pattern", "wal"}, {"--write-budget", "1g"}, {"--plot", filepath.Join(parent, "curve.svg")}} {
		_, code, err := runCLI(t, append([]string{"check", dir}, args...)...)
		require.Equal(t, 64, code)
		require.EqualError(t, err, "--rates, --pattern, --write-budget and --plot apply to --profile capacity")
	}
	require.NoDirExists(t, dir)
	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// A sweep whose rates run out before the bound: exit 0, every step in the
// JSON with its percentiles, the IOPS at the bound a floor (a warning says
// so), and DIR and its working set gone.
func TestCapacityJSON(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "canary")
	out, code, err := runCLI(t, "check", dir, "--profile", "capacity", "--rates", "1000,1500", "--max-p99", "2s",
		"--working-set", "1m", "--min-free", "0", "--json", "--quiet")
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	keys := []string{}
	for k := range got {
		keys = append(keys, k)
	}
	require.ElementsMatch(t, []string{"version", "start_time", "profile", "pattern", "path", "device", "filesystem", "block_size", "concurrency",
		"threshold_seconds", "iops_at_bound", "asked_iops_at_bound", "bound_reached", "partial", "steps", "pass", "verdict",
		"trusted", "warnings", "written_bytes"}, keys)
	var j capacityJSON
	require.NoError(t, json.Unmarshal([]byte(out), &j))
	require.Equal(t, "capacity", j.Profile)
	require.Equal(t, "randread", j.Pattern, "the default pattern")
	require.Zero(t, j.WrittenBytes)
	require.EqualValues(t, 4096, j.BlockSize)
	require.Equal(t, 32, j.Concurrency)
	require.Equal(t, 2.0, j.ThresholdSeconds)
	require.Equal(t, "pass", j.Verdict)
	require.False(t, j.Partial)
	require.False(t, j.BoundReached)
	require.Len(t, j.Steps, 2)
	for i, asked := range []float64{1000, 1500} {
		s := j.Steps[i]
		require.Equal(t, asked, s.AskedIOPS)
		require.Equal(t, int(asked), s.Ops, "a second's worth, at least 1,000")
		require.True(t, s.Held)
		require.Greater(t, s.LatencySeconds.P50, 0.0)
		require.LessOrEqual(t, s.LatencySeconds.P50, s.LatencySeconds.P90)
		require.LessOrEqual(t, s.LatencySeconds.P90, s.LatencySeconds.P99)
		require.LessOrEqual(t, s.LatencySeconds.P99, s.LatencySeconds.P999)
		require.LessOrEqual(t, s.AchievedIOPS, asked, "open loop: never more than asked")
	}
	require.Equal(t, 1500.0, *j.AskedIOPSAtBound)
	require.Equal(t, j.Steps[1].AchievedIOPS, *j.IOPSAtBound)
	require.Len(t, j.Warnings, 1)
	require.Regexp(t, `^no step broke the bound: the disk holds at least 1[45]\d\d IOPS; ask higher --rates to find its bound$`, j.Warnings[0])
	require.True(t, j.Trusted)
	require.NoDirExists(t, dir, "check removes the directory it created, the working set first")
}

// Even the first step over the bound is a FAIL: exit 1, the table says
// which step and why.
func TestCapacityFirstStepOverTheBound(t *testing.T) {
	dir := t.TempDir()
	out, code, err := runCLI(t, "check", dir, "--profile", "capacity", "--rates", "1000,2000", "--max-p99", "1ns",
		"--working-set", "1m", "--min-free", "0", "--quiet")
	require.Equal(t, 1, code, out)
	require.EqualError(t, err, "capacity: even the first step broke the bound")
	require.Contains(t, out, "  FAIL: the first step, 1000 IOPS asked, broke the bound (p99 over 0.0µs)\n")
	require.NotContains(t, out, "IOPS at the p99 bound")
	require.Equal(t, 1, strings.Count(out, "p99 over 0.0µs\n"), "one step, the sweep stopped there:\n%s", out)
	entries, _ := os.ReadDir(dir)
	require.Empty(t, entries)
}

// --timeout (as Ctrl-C) ends the sweep between two reads: the steps done
// are printed, marked partial, exit 2 with the reason, the working set
// removed.
func TestCapacityTimeoutKeepsTheStepsDone(t *testing.T) {
	dir := t.TempDir()
	// Each step takes 1 s: the first is done (at most 1.25 s: it stops
	// issuing reads then), the second is not.
	out, code, err := runCLI(t, "check", dir, "--profile", "capacity", "--rates", "1000,1100", "--max-p99", "2s",
		"--working-set", "1m", "--min-free", "0", "--json", "--quiet", "--timeout", "1600ms")
	require.Equal(t, 2, code, out)
	require.EqualError(t, err, "could not measure capacity on "+dir+": --timeout 1.6s: timed out after 1 step")
	var j capacityJSON
	require.NoError(t, json.Unmarshal([]byte(out), &j), out)
	require.True(t, j.Partial)
	require.Equal(t, "could not measure", j.Verdict)
	require.Equal(t, "--timeout 1.6s: timed out after 1 step", j.Reason)
	require.Len(t, j.Steps, 1)
	require.Equal(t, 1000.0, j.Steps[0].AskedIOPS)
	require.Equal(t, 1000.0, *j.AskedIOPSAtBound, "the step done held")
	require.False(t, j.BoundReached)
	entries, _ := os.ReadDir(dir)
	require.Empty(t, entries, "the working set is removed")
}

// --pattern randwrite: the same JSON, the pattern named, every write of
// every step counted in written_bytes, the working set removed.
func TestCapacityRandWriteJSON(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "canary")
	out, code, err := runCLI(t, "check", dir, "--profile", "capacity", "--pattern", "randwrite", "--rates", "1000,1500", "--max-p99", "2s",
		"--working-set", "1m", "--min-free", "0", "--json", "--quiet")
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	var j capacityJSON
	require.NoError(t, json.Unmarshal([]byte(out), &j), out)
	require.Equal(t, "randwrite", j.Pattern)
	require.EqualValues(t, 4096, j.BlockSize)
	require.Equal(t, 32, j.Concurrency)
	require.Len(t, j.Steps, 2)
	issued := 0
	for _, s := range j.Steps {
		issued += s.Ops - s.Missed
	}
	require.Equal(t, int64(issued)*4096, j.WrittenBytes)
	require.NoDirExists(t, dir)
}

// --pattern wal: one writer, 2300-byte appends, the table says so and
// what was written of the budget; the segment removed.
func TestCapacityWALText(t *testing.T) {
	dir := t.TempDir()
	out, code, _ := runCLI(t, "check", dir, "--profile", "capacity", "--pattern", "wal", "--rates", "200", "--max-p99", "2s",
		"--min-free", "0", "--quiet", "--allow-unsafe-fs")
	require.Contains(t, []int{0, 1}, code, out)
	require.Contains(t, out, "capacity profile, wal pattern, ")
	require.Contains(t, out, "\n  2300-byte appends into a preallocated segment, fdatasync after each, open loop, one writer;\n")
	require.Regexp(t, `\n  written: [0-9.]+[KM]iB of the --write-budget 2GiB\n`, out)
	require.Contains(t, out, "\n         200 ")
	entries, _ := os.ReadDir(dir)
	require.Empty(t, entries)
}

// --plot draws the sweep through diskcanary-plot, found in PATH here (the
// test binary has none beside it): the picture of the steps just run, or
// of those done when --timeout stopped it. Without diskcanary-plot the sweep is not run at all (exit 2, nothing
// created); a plotter that fails turns a pass into exit 2, the table
// printed all the same.
func TestCapacityPlot(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go tool to build diskcanary-plot")
	}
	bin := t.TempDir()
	build := exec.Command(goTool, "build", "-o", filepath.Join(bin, "diskcanary-plot"), "github.com/diskcanary/diskcanary/cmd/diskcanary-plot")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	parent := t.TempDir()
	dir, svg := filepath.Join(parent, "canary"), filepath.Join(parent, "curve.svg")
	t.Setenv("PATH", t.TempDir())
	self, err := os.Executable()
	require.NoError(t, err)
	_, code, err := runCLI(t, "check", dir, "--profile", "capacity", "--plot", svg)
	require.Equal(t, 2, code)
	require.EqualError(t, err, "--plot needs diskcanary-plot, found neither beside diskcanary ("+
		filepath.Join(filepath.Dir(self), "diskcanary-plot")+") nor in PATH (docs/cli.md#diskcanary-plot)")
	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	require.Empty(t, entries, "no sweep without a plotter")

	t.Setenv("PATH", bin)
	text, code, err := runCLI(t, "check", dir, "--profile", "capacity", "--rates", "1000,1500", "--max-p99", "2s",
		"--working-set", "1m", "--min-free", "0", "--quiet", "--plot", svg)
	require.NoError(t, err, text)
	require.Equal(t, 0, code)
	b, err := os.ReadFile(svg)
	require.NoError(t, err)
	pic := string(b)
	require.True(t, strings.HasPrefix(pic, "<?xml"), "an SVG")
	for _, want := range []string{">p50<", ">p99<", ">p99 bound 2s<", ">diskcanary capacity: " + dir + " (",
		">achieved read IOPS (4096-byte O_DIRECT random reads, open loop)<"} {
		require.Contains(t, pic, want)
	}

	// A sweep stopped by --timeout is drawn with the step it finished.
	require.NoError(t, os.Remove(svg))
	_, code, _ = runCLI(t, "check", dir, "--profile", "capacity", "--rates", "1000,1100", "--max-p99", "2s",
		"--working-set", "1m", "--min-free", "0", "--quiet", "--timeout", "1600ms", "--plot", svg)
	require.Equal(t, 2, code)
	b, err = os.ReadFile(svg)
	require.NoError(t, err)
	require.Regexp(t, `>  knee: (9[0-9][0-9]|1000) IOPS<`, string(b), "the 1,000 step held")
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "the working set removed (the directory is kept after a stop)")
	require.NoError(t, os.Remove(dir))

	// A plotter that cannot draw: the sweep's table stands, the exit is 2.
	broken := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(broken, "diskcanary-plot"), []byte("#!/bin/sh\necho 'no room' >&2\nexit 1\n"), 0o755))
	t.Setenv("PATH", broken)
	text, code, err = runCLI(t, "check", dir, "--profile", "capacity", "--rates", "1000", "--max-p99", "2s",
		"--working-set", "1m", "--min-free", "0", "--quiet", "--plot", svg)
	require.Equal(t, 2, code)
	require.EqualError(t, err, "--plot "+svg+": "+filepath.Join(broken, "diskcanary-plot")+": exit status 1: no room")
	require.Contains(t, text, "PASS: 1 of 1 steps held")
	require.NoDirExists(t, dir)
}
