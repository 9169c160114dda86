package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/version"
	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/probes"
)

// runCLI runs the CLI in-process and returns stdout and the exit code main would use.
func runCLI(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	code := 0
	if err != nil {
		code = 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
	}
	return out.String(), code, err
}

func TestCheckJSONContract(t *testing.T) {
	dir := t.TempDir()
	out, code, err := runCLI(t, "check", dir, "--samples", "300", "--min-free", "0", "--max-p99", "10s", "--json")
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	keys := []string{}
	for k := range got {
		keys = append(keys, k)
	}
	require.ElementsMatch(t, []string{"profile", "path", "device", "filesystem", "samples", "gap_seconds", "latency_seconds", "threshold_seconds", "pass",
		"version", "start_time", "planned_samples", "partial", "write_latency_seconds", "verdict", "trusted", "warnings",
		"jobs", "job_p99_seconds"}, keys,
		"docs/contract.md's keys, then the ones a script needs (reason is omitted when empty)")
	require.Equal(t, "etcd", got["profile"])
	require.Equal(t, 0.01, got["gap_seconds"], "paced like etcd by default")
	require.EqualValues(t, 1, got["jobs"])
	require.Equal(t, []any{got["latency_seconds"].(map[string]any)["p99"]}, got["job_p99_seconds"], "one job: its p99 is the p99")
	require.EqualValues(t, 300, got["samples"])
	require.EqualValues(t, 300, got["planned_samples"])
	require.Equal(t, false, got["partial"])
	require.Equal(t, true, got["pass"])
	require.Equal(t, "pass", got["verdict"])
	require.Equal(t, true, got["trusted"], "ext4 on a block device")
	require.Equal(t, version.Version, got["version"])
	require.NotEmpty(t, got["version"])
	started, err := time.Parse(time.RFC3339, got["start_time"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), started, time.Minute)
	require.Equal(t, []any{"300 samples are too few for a p99 (it needs 1000; below 100 the p99 is the maximum): use --samples 1000 or more"}, got["warnings"])
	for _, key := range []string{"latency_seconds", "write_latency_seconds"} {
		lat := got[key].(map[string]any)
		require.Len(t, lat, 7)
		order := []string{"min", "p50", "p90", "p99", "p99_9", "max"}
		for i := 1; i < len(order); i++ {
			require.LessOrEqual(t, lat[order[i-1]].(float64), lat[order[i]].(float64), "%s: %s <= %s", key, order[i-1], order[i])
		}
		require.Greater(t, lat["min"].(float64), 0.0)
	}
	entries, _ := os.ReadDir(dir)
	require.Empty(t, entries, "the check file is deleted")
}

func TestCheckAllProfilesIsAnArray(t *testing.T) {
	dir := t.TempDir()
	out, code, err := runCLI(t, "check", dir, "--profile", "all", "--samples", "200", "--working-set", "4MiB", "--min-free", "0", "--max-p99", "10s", "--json")
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	var got []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Len(t, got, 3)
	require.Equal(t, "etcd", got[0]["profile"])
	require.Equal(t, 0.01, got[0]["gap_seconds"])
	require.Equal(t, "fio-etcd", got[1]["profile"])
	require.Equal(t, 0.0, got[1]["gap_seconds"], "fio's recipe: back to back")
	require.Equal(t, "randread", got[2]["profile"])
	require.Nil(t, got[2]["gap_seconds"])
	require.Nil(t, got[2]["write_latency_seconds"], "randread writes nothing timed")
	require.NotNil(t, got[0]["write_latency_seconds"])
	require.EqualValues(t, 200, got[2]["samples"])
	for _, g := range got {
		var keys []string
		for k := range g {
			keys = append(keys, k)
		}
		var first []string
		for k := range got[0] {
			first = append(first, k)
		}
		require.ElementsMatch(t, first, keys, "one shape for every profile: %s", g["profile"])
		require.Equal(t, "pass", g["verdict"])
		require.Len(t, g["warnings"], 1, "too few samples for a p99")
	}
}

// A judged percentile needs 1,000 samples behind it (docs/contract.md, measurement rule 1):
// fewer is a warning in the table and the JSON; 1,000 is none.
func TestCheckWarnsOfTooFewSamples(t *testing.T) {
	dir := t.TempDir()
	out, code, err := runCLI(t, "check", dir, "--profile", "fio-etcd", "--samples", "50", "--min-free", "0", "--max-p99", "10s")
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	require.Contains(t, out, "  WARNING: 50 samples are too few for a p99 (it needs 1000; below 100 the p99 is the maximum): use --samples 1000 or more\n")
	out, code, err = runCLI(t, "check", dir, "--profile", "fio-etcd", "--samples", "1000", "--min-free", "0", "--max-p99", "10s", "--json")
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	var got checkJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Equal(t, 1000, got.Samples)
	require.Equal(t, []string{}, got.Warnings, "warnings is an array even when empty")
	require.Contains(t, out, `"warnings": []`)
}

// fio users type 4k and 1G: check takes fio's spellings (k, m, g are
// powers of 1024, as fio's default kb_base).
func TestCheckTakesFioSizes(t *testing.T) {
	dir := t.TempDir()
	out, code, err := runCLI(t, "check", dir, "--profile", "randread", "--block-size", "4k", "--working-set", "4m", "--samples", "100", "--min-free", "0", "--max-p99", "10s")
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	require.Contains(t, out, "100 random 4096-byte O_DIRECT reads")
	// 1G and 1GiB parse (the free-space floor is what refuses the run,
	// before anything is written).
	for _, ws := range []string{"1G", "1GiB", "1g"} {
		_, code, err = runCLI(t, "check", dir, "--profile", "randread", "--working-set", ws, "--samples", "10", "--min-free", "1000TB")
		require.Equal(t, 2, code, ws)
		require.ErrorContains(t, err, "min_free", ws)
	}
	_, code, err = runCLI(t, "check", dir, "--block-size", "1m", "--samples", "10", "--min-free", "1000TB")
	require.Equal(t, 2, code)
	require.ErrorContains(t, err, "min_free")
	entries, _ := os.ReadDir(dir)
	require.Empty(t, entries)
}

func TestCheckExitCodes(t *testing.T) {
	dir := t.TempDir()
	// 1: over the threshold (no disk syncs in a nanosecond).
	// With 100 samples the p99 allows 1 over the threshold: the second
	// makes the FAIL certain, and the run stops there.
	out, code, _ := runCLI(t, "check", dir, "--samples", "100", "--min-free", "0", "--max-p99", "1ns")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "  2 of 100 planned (partial) sequential 2300-byte appends")
	require.Contains(t, out, "FAIL: fdatasync p99")
	require.Contains(t, out, "(partial: stopped after 2 of 100 samples: 2 were over 0.0µs, more than the p99 allows (1), so it cannot pass)\n")
	// 2: could not measure, with a one-line reason.
	_, code, err := runCLI(t, "check", dir, "--samples", "10", "--min-free", "1000TB")
	require.Equal(t, 2, code)
	require.Contains(t, err.Error(), "could not measure etcd")
	require.Contains(t, err.Error(), "min_free")
	require.NotContains(t, err.Error(), "\n")
	// 64: usage errors, cobra's own among them, before anything runs.
	for _, args := range [][]string{
		{"--profile", "nope"}, {"--max-p99", "10"}, {"--max-p99", "0s"}, {"--bogus"}, {"--samples", "x"}, {"--samples", "0"},
		{"--block-size", "4x"}, {"--working-set", "lots"}, {"--gap", "-1ms"}, {dir},
		{"--jobs", "0"}, {"--jobs", "17"}, {"--jobs", "2", "--profile", "randread"},
	} {
		_, code, err = runCLI(t, append([]string{"check", dir}, args...)...)
		require.Equal(t, 64, code, "%q: %v", args, err)
	}
	_, code, err = runCLI(t, "check", dir, dir)
	require.Equal(t, 64, code)
	require.EqualError(t, err, fmt.Sprintf("check takes one directory, got 2: [%q %q]", dir, dir))
	_, code, err = runCLI(t, "check", dir, "--samples", "10", "--min-free", "1000TB")
	require.Equal(t, 2, code)
	require.Contains(t, err.Error(), "min_free")
}

// Sizes that would allocate the machine's memory are refused before any
// buffer is sized (exit 64, the bound in the message), never an out of
// memory or a makeslice panic; nothing is created in DIR.
func TestCheckBoundsBeforeAllocating(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--samples", "1000000000000"}, "--samples 1000000000000: want 1 to 1000000"},
		{[]string{"--profile", "randread", "--samples", "9223372036854775807"}, "--samples 9223372036854775807: want 1 to 1000000"},
		{[]string{"--samples", "-1"}, "--samples -1: want 1 to 1000000"},
		{[]string{"--samples", "500001", "--jobs", "2"}, "--samples 500001 with --jobs 2: want 1 to 500000 per job (1000000 samples in all at most)"},
		{[]string{"--block-size", "1TiB"}, `--block-size "1TiB": want a positive size up to 1MiB, e.g. 2300 or 4k`},
		{[]string{"--block-size", "1048577"}, `--block-size "1048577": want a positive size up to 1MiB, e.g. 2300 or 4k`},
	} {
		_, code, err := runCLI(t, append([]string{"check", dir, "--min-free", "0"}, tc.args...)...)
		require.Equal(t, exitUsage, code, "%q", tc.args)
		require.EqualError(t, err, tc.err, "%q", tc.args)
	}
	entries, _ := os.ReadDir(dir)
	require.Empty(t, entries)
	// The bound itself is a run.
	_, code, err := runCLI(t, "check", dir, "--samples", "500000", "--jobs", "2", "--min-free", "1000TB")
	require.Equal(t, 2, code)
	require.ErrorContains(t, err, "min_free")
}

func TestCheckTableLooksLikeFio(t *testing.T) {
	out, code, err := runCLI(t, "check", t.TempDir(), "--samples", "200", "--min-free", "0", "--max-p99", "10s")
	require.NoError(t, err)
	require.Equal(t, 0, code)
	for _, want := range []string{"fdatasync percentiles (usec):", "99.00th=[", "99.90th=[", "PASS: fdatasync p99"} {
		require.Contains(t, out, want)
	}
}

// check refuses what the daemon refuses: an etcd data directory.
func TestCheckRefusesEtcdDataDir(t *testing.T) {
	data := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(data, "member", "wal"), 0o700))
	_, code, err := runCLI(t, "check", filepath.Join(data, "member"), "--samples", "10")
	require.Equal(t, 2, code)
	require.ErrorContains(t, err, "unsafe probe directory")
	entries, _ := os.ReadDir(filepath.Join(data, "member"))
	require.Len(t, entries, 1, "nothing written next to etcd's wal/")
}

// --jobs 2: two writers at once, judged on the worst; the table and the
// JSON say so and give each job's p99.
func TestCheckJobs(t *testing.T) {
	dir := t.TempDir()
	out, code, err := runCLI(t, "check", dir, "--jobs", "2", "--profile", "fio-etcd", "--samples", "200", "--min-free", "0", "--max-p99", "10s")
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	require.Contains(t, out, "\n  200 sequential 2300-byte appends per job into a preallocated segment, fdatasync after each, back to back")
	require.Regexp(t, `\n  2 jobs at once, 200 appends each, each job on its own file; judged on the worst job \(job p99s: \S+ \S+\)\n`, out)
	out, code, err = runCLI(t, "check", dir, "--jobs", "3", "--profile", "all", "--samples", "100", "--working-set", "4MiB", "--min-free", "0", "--max-p99", "10s", "--json")
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	var got []checkJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Len(t, got, 3)
	for i, jobs := range []int{3, 3, 1} {
		require.Equal(t, jobs, got[i].Jobs, got[i].Profile)
		require.Len(t, got[i].JobP99Seconds, jobs, got[i].Profile)
		worst := 0.0
		for _, p := range got[i].JobP99Seconds {
			worst = max(worst, p)
		}
		require.Equal(t, worst, got[i].LatencySeconds.P99, "%s: judged on the worst job", got[i].Profile)
	}
	entries, _ := os.ReadDir(dir)
	require.Empty(t, entries, "every job's file is removed")
}

// --lat-log writes every timed op, one line each in the order taken, each
// job's in turn (fio's --write_lat_log habit: pool runs, find when a spike
// came); the JSON's per-job p99s are the log's.
func TestCheckLatLog(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(t.TempDir(), "lat.csv")
	out, code, err := runCLI(t, "check", dir, "--jobs", "2", "--profile", "fio-etcd", "--samples", "150", "--min-free", "0",
		"--max-p99", "10s", "--json", "--lat-log", log)
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	var got checkJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	require.Len(t, lines, 301, "a header, then 2 jobs × 150 ops")
	require.Equal(t, "profile,job,op,latency_ns", lines[0])
	jobs := [2][]time.Duration{}
	for i, l := range lines[1:] {
		f := strings.Split(l, ",")
		require.Len(t, f, 4, l)
		require.Equal(t, []string{"fio-etcd", strconv.Itoa(i/150 + 1), strconv.Itoa(i%150 + 1)}, f[:3], l)
		ns, err := strconv.ParseInt(f[3], 10, 64)
		require.NoError(t, err, l)
		require.Greater(t, ns, int64(1000), "an fdatasync on a disk takes more than 1 µs: %s", l)
		jobs[i/150] = append(jobs[i/150], time.Duration(ns))
	}
	for j, ops := range jobs {
		slices.Sort(ops)
		require.Equal(t, got.JobP99Seconds[j], probes.Percentile(ops, 99).Seconds(), "job %d", j+1)
	}

	_, code, err = runCLI(t, "check", dir, "--samples", "100", "--lat-log", filepath.Join(dir, "no", "such", "dir", "lat.csv"))
	require.Equal(t, 2, code)
	require.EqualError(t, err, "--lat-log "+filepath.Join(dir, "no", "such", "dir", "lat.csv")+": directory "+filepath.Join(dir, "no", "such", "dir")+" does not exist")
	entries, _ := os.ReadDir(dir)
	require.Empty(t, entries, "nothing measured, nothing left")
}

// --lat-log never writes through a symlink, and never touches a file for a
// run that measures nothing; an existing file is replaced once samples are
// in, and stderr says so.
func TestCheckLatLogIsCreatedOnlyToBeWritten(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	victim := filepath.Join(other, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious\n"), 0o600))
	link := filepath.Join(other, "lat.csv")
	require.NoError(t, os.Symlink(victim, link))
	_, code, err := runCLI(t, "check", dir, "--samples", "100", "--min-free", "0", "--lat-log", link)
	require.Equal(t, 2, code)
	require.EqualError(t, err, "--lat-log "+link+": is a symlink; not followed: name the file itself")
	b, _ := os.ReadFile(victim)
	require.Equal(t, "precious\n", string(b))
	entries, _ := os.ReadDir(dir)
	require.Empty(t, entries, "refused before measuring")

	// A run refused (the free-space floor) leaves an existing log as it was.
	log := filepath.Join(other, "old.csv")
	require.NoError(t, os.WriteFile(log, []byte("last week's run\n"), 0o644))
	_, code, err = runCLI(t, "check", dir, "--samples", "100", "--min-free", "1000TB", "--lat-log", log)
	require.Equal(t, 2, code)
	require.ErrorContains(t, err, "min_free")
	b, _ = os.ReadFile(log)
	require.Equal(t, "last week's run\n", string(b))
	fresh := filepath.Join(other, "fresh.csv")
	_, code, _ = runCLI(t, "check", dir, "--samples", "100", "--min-free", "1000TB", "--lat-log", fresh)
	require.Equal(t, 2, code)
	require.NoFileExists(t, fresh, "nothing measured, no log created")

	// A run that measures replaces it, and says so.
	out, code, err := runCLI(t, "check", dir, "--profile", "fio-etcd", "--samples", "100", "--min-free", "0", "--max-p99", "10s", "--lat-log", log)
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(out, "diskcanary: --lat-log "+log+" existed: replaced\n"), out)
	b, _ = os.ReadFile(log)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	require.Len(t, lines, 101)
	require.Equal(t, "profile,job,op,latency_ns", lines[0])
	require.True(t, strings.HasPrefix(lines[100], "fio-etcd,1,100,"), lines[100])
}

// A DIR that does not exist is created for the run (mode 0700, the last
// element only) and removed after it, measured or refused; a missing parent
// is one line and exit 2, nothing created.
func TestCheckMissingDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "no", "such")
	_, code, err := runCLI(t, "check", dir, "--samples", "10", "--min-free", "0")
	require.Equal(t, 2, code)
	require.EqualError(t, err, dir+": parent directory "+filepath.Join(base, "no")+" does not exist (check creates the directory, never its parents)")
	require.NoDirExists(t, filepath.Join(base, "no"))

	dir = filepath.Join(base, "new")
	_, code, err = runCLI(t, "check", dir, "--samples", "10", "--min-free", "1000TB")
	require.Equal(t, 2, code)
	require.ErrorContains(t, err, "min_free")
	require.NoDirExists(t, dir, "refused: the directory check created is removed")

	out, code, err := runCLI(t, "check", dir, "--profile", "fio-etcd", "--samples", "100", "--min-free", "0", "--max-p99", "10s")
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	require.Contains(t, out, "PASS: fdatasync p99")
	require.NoDirExists(t, dir, "measured: the directory check created is removed")

	// A kept working set keeps the directory it is in.
	_, code, err = runCLI(t, "check", dir, "--profile", "randread", "--working-set", "4m", "--keep-working-set", "--samples", "100", "--min-free", "0", "--max-p99", "10s")
	require.NoError(t, err)
	require.Equal(t, 0, code)
	require.FileExists(t, filepath.Join(dir, ".diskcanary-check-readset"))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	// Stopped by --timeout: left, as an I/O may be hung there (an rmdir on
	// a hung FUSE directory would hang check's exit too).
	stoppedDir := filepath.Join(base, "stopped")
	_, code, err = runCLI(t, "check", stoppedDir, "--profile", "fio-etcd", "--samples", "100000", "--timeout", "100ms", "--min-free", "0")
	require.Equal(t, 2, code)
	require.ErrorContains(t, err, "--timeout 100ms: timed out after ")
	require.DirExists(t, stoppedDir)

	// An existing directory is never removed, even empty.
	keep := t.TempDir()
	_, code, _ = runCLI(t, "check", keep, "--samples", "10", "--min-free", "1000TB")
	require.Equal(t, 2, code)
	require.DirExists(t, keep)
}
