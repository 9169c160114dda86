package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseIostatArgs(t *testing.T) {
	devs, itv, count, err := parseIostatArgs([]string{"sda", "/dev/nvme0n1", "2", "3"})
	require.NoError(t, err)
	require.Equal(t, []string{"sda", "nvme0n1"}, devs)
	require.Equal(t, 2*time.Second, itv)
	require.Equal(t, 3, count)

	_, itv, count, err = parseIostatArgs(nil)
	require.NoError(t, err)
	require.Zero(t, itv)
	require.Equal(t, 1, count, "no interval: one report since boot")

	_, _, count, err = parseIostatArgs([]string{"1"})
	require.NoError(t, err)
	require.Equal(t, -1, count, "interval without count repeats")

	for _, bad := range [][]string{{"1", "sda"}, {"1", "2", "3"}, {"0"}, {"1", "0"}} {
		_, _, _, err := parseIostatArgs(bad)
		require.Error(t, err, bad)
	}
}

// -y with INTERVAL COUNT prints COUNT interval reports and no since-boot one.
func TestIostatCommandOmitSinceBoot(t *testing.T) {
	proc, sys := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "block/sda"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "uptime"), []byte("100.00 1.00\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "diskstats"),
		[]byte("8 0 sda 10 0 80 5 0 0 0 0 0 10 10 0 0 0 0 0 0\n"), 0o644))
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"iostat", "--path.procfs", proc, "--path.sysfs", sys, "-y", "--json", "0.05", "2"})
	require.NoError(t, cmd.Execute())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2)
	// The counters did not move: interval reports are all zero, unlike the
	// since-boot report would be (0.1 r/s).
	require.Contains(t, lines[0], `"r/s":0.00`)

	out.Reset()
	cmd = newRootCmd()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"iostat", "--path.procfs", proc, "--path.sysfs", sys})
	require.NoError(t, cmd.Execute())
	require.Contains(t, out.String(), "sda              0.10      0.40")
}
