package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
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
	require.ElementsMatch(t, []string{"profile", "path", "device", "filesystem", "samples", "gap_seconds", "latency_seconds", "threshold_seconds", "pass"}, keys)
	require.Equal(t, "etcd", got["profile"])
	require.Equal(t, 0.01, got["gap_seconds"], "paced like etcd by default")
	require.EqualValues(t, 300, got["samples"])
	require.Equal(t, true, got["pass"])
	lat := got["latency_seconds"].(map[string]any)
	require.Len(t, lat, 7)
	order := []string{"min", "p50", "p90", "p99", "p99_9", "max"}
	for i := 1; i < len(order); i++ {
		require.LessOrEqual(t, lat[order[i-1]].(float64), lat[order[i]].(float64), "%s <= %s", order[i-1], order[i])
	}
	require.Greater(t, lat["min"].(float64), 0.0)
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
	require.NotContains(t, got[2], "gap_seconds")
	require.EqualValues(t, 200, got[2]["samples"])
}

func TestCheckExitCodes(t *testing.T) {
	dir := t.TempDir()
	// 1: over the threshold (no disk syncs in a nanosecond).
	out, code, _ := runCLI(t, "check", dir, "--samples", "100", "--min-free", "0", "--max-p99", "1ns")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "FAIL: fdatasync p99")
	// 2: could not measure, with a one-line reason.
	_, code, err := runCLI(t, "check", filepath.Join(dir, "no", "such", "dir"), "--samples", "10")
	require.Equal(t, 2, code)
	require.Contains(t, err.Error(), "could not measure etcd")
	require.Contains(t, err.Error(), "no such file or directory")
	require.NotContains(t, err.Error(), "\n")
	_, code, err = runCLI(t, "check", dir, "--profile", "nope")
	require.Equal(t, 2, code)
	require.Contains(t, err.Error(), "--profile")
	_, code, err = runCLI(t, "check", dir, "--samples", "10", "--min-free", "1000TB")
	require.Equal(t, 2, code)
	require.Contains(t, err.Error(), "min_free")
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
