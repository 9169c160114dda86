package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/collector"
)

func TestConfigCheck(t *testing.T) {
	out, code, err := runCLI(t, "serve", "--config.check")
	require.NoError(t, err)
	require.Equal(t, 0, code)
	require.Contains(t, out, "config OK: 2 probe(s)")
	require.Contains(t, out, "wal: wal on /var/tmp/diskcanary, 50 ops every 44s")

	// A capacity probe says what it sweeps, not a burst's ops.
	capacity := filepath.Join(t.TempDir(), "capacity.yml")
	require.NoError(t, os.WriteFile(capacity, []byte("probes:\n  targets:\n    - name: headroom\n      kind: capacity\n      dir: /var/tmp/diskcanary\n      pattern: wal\n"), 0o600))
	out, code, err = runCLI(t, "serve", "--config.check", "--config.file", capacity)
	require.NoError(t, err)
	require.Equal(t, 0, code)
	require.Contains(t, out, "headroom: capacity sweep, wal pattern, p99 bound 10ms, on /var/tmp/diskcanary every 24h0m0s")

	bad := filepath.Join(t.TempDir(), "bad.yml")
	require.NoError(t, os.WriteFile(bad, []byte("probes:\n  targets:\n    - name: wal\n      kind: wal\n      dir: /x\n      bogus: 1\n"), 0o600))
	_, code, err = runCLI(t, "serve", "--config.check", "--config.file", bad)
	require.Error(t, err)
	require.Equal(t, 1, code)
	require.Contains(t, err.Error(), "line 6: field bogus not found")
	require.Contains(t, err.Error(), bad)
}

func TestProbeDirFlagBeatsFile(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	out, _, err := runCLI(t, "serve", "--config.check", "--probe.dir", a, "--probe.dir", b)
	require.NoError(t, err)
	require.Contains(t, out, "config OK: 4 probe(s)")
	require.Contains(t, out, "on "+a)
	require.Contains(t, out, "on "+b)
	require.NotContains(t, out, "/var/tmp/diskcanary")
}

func TestCollectorFlags(t *testing.T) {
	cmd := newServeCmd()
	for _, name := range []string{"collector.probes", "no-collector.probes", "web.listen-address", "web.config.file",
		"log.level", "log.format", "path.procfs", "path.sysfs", "probe.dir", "config.file", "config.check",
		"web.telemetry-path", "web.max-requests", "web.max-connections", "web.write-timeout"} {
		require.NotNil(t, cmd.Flags().Lookup(name), name)
	}
	require.Equal(t, "[:9742]", cmd.Flags().Lookup("web.listen-address").DefValue)
}

// serve --help offers one --collector.NAME and one --no-collector.NAME per
// part of collector.Collectors, with the part's default, and no others.
func TestServeHelpListsTheCollectors(t *testing.T) {
	want := map[string]bool{"probes": true, "diskstats": true, "smart": true, "blocklatency": true, "errors": true, "contention": true, "pressure": true}
	table := map[string]bool{}
	for _, p := range collector.Collectors {
		table[p.Name] = p.EnabledDefault
	}
	require.Equal(t, want, table)

	out, _, err := runCLI(t, "serve", "--help")
	require.NoError(t, err)
	on, off := map[string]bool{}, map[string]bool{}
	flag := regexp.MustCompile(`^\s+--(no-)?collector\.([a-z]+)\s.*?(\(default true\))?$`)
	for _, line := range strings.Split(out, "\n") {
		m := flag.FindStringSubmatch(line)
		switch {
		case m == nil:
		case m[1] == "":
			on[m[2]] = m[3] != ""
		default:
			require.Empty(t, m[3], line)
			off[m[2]] = true
		}
	}
	require.Equal(t, want, on, out)
	require.Equal(t, map[string]bool{"probes": true, "diskstats": true, "smart": true, "blocklatency": true, "errors": true, "contention": true, "pressure": true}, off, out)
}

func TestBadLogLevel(t *testing.T) {
	_, _, err := runCLI(t, "serve", "--log.level", "loud", "--config.check")
	require.ErrorContains(t, err, "--log.level")
}

func TestDiskstatsFilterFlags(t *testing.T) {
	out, code, err := runCLI(t, "serve", "--config.check", "--collector.diskstats.device-include", "^loop")
	require.NoError(t, err)
	require.Equal(t, 0, code)
	require.Contains(t, out, "diskstats: devices matching ^loop\n")
	out, _, err = runCLI(t, "serve", "--config.check")
	require.NoError(t, err)
	require.Contains(t, out, "(default)")
	_, _, err = runCLI(t, "serve", "--config.check", "--collector.diskstats.device-exclude", "([")
	require.ErrorContains(t, err, "device_exclude")
	_, _, err = runCLI(t, "serve", "--config.check", "--collector.diskstats.device-include", "a", "--collector.diskstats.device-exclude", "b")
	require.ErrorContains(t, err, "mutually exclusive")
}
