package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAdversarialConfigRefused (issue "Hostile input never wins"): a hostile
// config is refused by `serve --config.check` with its key and line, and
// `serve` itself refuses the same file with the same message and exit
// status before it writes anything.
func TestAdversarialConfigRefused(t *testing.T) {
	// wal is a WAL probe on DIR whose sixth line is extra.
	wal := func(extra string) string {
		return "probes:\n  targets:\n    - name: wal\n      kind: wal\n      dir: DIR\n" + extra + "\nsmart:\n  enabled: false\n"
	}
	var many strings.Builder
	many.WriteString("probes:\n  targets:\n    - {name: p0, kind: wal, dir: &d DIR}\n")
	for i := 1; i < 10_000; i++ {
		fmt.Fprintf(&many, "    - {name: p%d, kind: wal, dir: *d}\n", i)
	}
	cases := []struct {
		name, yaml, want string
	}{
		{"busy loop", wal("      interval: 1ns"),
			`line 6: probe "wal": probes.targets[0].interval: 1ns is below the minimum of 10ms`},
		{"unit-less interval is nanoseconds", wal("      interval: 30"),
			`line 6: probes.targets[0].interval: "30" is not a duration such as 30s, 5m or 100ms`},
		{"NaN jitter", wal("      jitter: .nan"),
			`line 6: probe "wal": probes.targets[0].jitter: .nan is not in [0, 1)`},
		{"free-space floor overflows to negative", wal("      min_free: 1e30TB"),
			`line 6: probes.targets[0].min_free: size "1e30TB" is too large (the limit is 8EiB)`},
		{"infinite write budget", wal("      daily_write_budget: inf"),
			`line 6: probes.targets[0].daily_write_budget: invalid size "inf"`},
		{"NaN write budget", wal("      daily_write_budget: NaN"),
			`line 6: probes.targets[0].daily_write_budget: invalid size "NaN"`},
		{"write budget wraps int64", wal("      daily_write_budget: 1e30TB"),
			`line 6: probes.targets[0].daily_write_budget: size "1e30TB" is too large (the limit is 8EiB)`},
		{"negative stall threshold", wal("      stall_threshold: -1s"),
			`line 6: probe "wal": probes.targets[0].stall_threshold: -1s is below the minimum of 10ms`},
		{"probe name escapes the directory",
			"probes:\n  targets:\n    - name: \"a/../../victim\"\n      kind: wal\n      dir: DIR\n",
			`line 3: probe "a/../../victim": probes.targets[0].name: "a/../../victim" is not a probe name`},
		{"relative device",
			"probes:\n  targets:\n    - name: raw\n      kind: randread\n      device: dev/sda\n",
			`line 5: probe "raw": probes.targets[0].device: "dev/sda" is not an absolute path`},
		{"device through ..",
			"probes:\n  targets:\n    - name: raw\n      kind: randread\n      device: /dev/../etc/shadow\n",
			`line 5: probe "raw": probes.targets[0].device: "/dev/../etc/shadow" contains ".."`},
		{"thread exhaustion", many.String(),
			"line 3: probes.targets: 10000 targets exceed the limit of 128"},
		{"a config file as large as memory", wal("      interval: 1s") + "# " + strings.Repeat("x", 2<<20) + "\n",
			"larger than 1048576 bytes; a diskcanary config is a few kilobytes"},
		{"SMART busy loop", wal("      interval: 1s") + "  interval: 1ns\n",
			"line 9: smart.interval: 1ns is below the minimum of 10s"},
		{"SMART option injection", wal("      interval: 1s") + "  smartctl: --scan\n",
			`line 9: smart.smartctl: "--scan" starts with "-"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The probe directory does not exist: a daemon that got as far
			// as probing would create it.
			dir := filepath.Join(t.TempDir(), "canary")
			cfg := filepath.Join(t.TempDir(), "hostile.yml")
			require.NoError(t, os.WriteFile(cfg, []byte(strings.ReplaceAll(tc.yaml, "DIR", dir)), 0o600))
			want := "diskcanary: config " + cfg + ": " + tc.want

			out, code := runRefused(t, "serve", "--config.check", "--config.file", cfg)
			require.Equal(t, 1, code, out)
			require.Contains(t, out, want)
			require.NotContains(t, out, "-9223372036854775808")

			served, code := runRefused(t, "serve", "--config.file", cfg, "--web.listen-address", "127.0.0.1:0")
			require.Equal(t, 1, code, served)
			require.Equal(t, out, served, "serve refuses exactly as --config.check does")
			_, err := os.Stat(dir)
			require.ErrorIs(t, err, os.ErrNotExist, "nothing written: not even the probe directory")
		})
	}
}

// runRefused runs diskcanary and returns its output and exit status; a
// daemon still running after 15 s accepted the config, and fails the test.
func runRefused(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := diskcanaryCmd(t, nil, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("diskcanary %s was still running after 15 s: the config was accepted\n%s", strings.Join(args, " "), out.String())
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// TestAdversarialConfigFileNotRegular (issue 43): a --config.file that is a
// FIFO blocked `serve` and `--config.check` for ever, silently. Both now
// refuse it at once, as they refuse a bad config (exit 1), and a device
// the same way; runRefused fails the test if either is still running 15 s on.
func TestAdversarialConfigFileNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "diskcanary.yml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for path, want := range map[string]string{
		fifo:        "diskcanary: config: open " + fifo + ": not a regular file: it is a FIFO\n",
		"/dev/zero": "diskcanary: config: open /dev/zero: not a regular file: it is a character device\n",
	} {
		out, code := runRefused(t, "serve", "--config.check", "--config.file", path)
		require.Equal(t, 1, code, out)
		require.Equal(t, want, out)
		out, code = runRefused(t, "serve", "--config.file", path, "--web.listen-address", "127.0.0.1:0")
		require.Equal(t, 1, code, out)
		require.Equal(t, want, out, "refused before the daemon logs that it starts")
	}
}
