package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/probes"
)

// openPTY returns a pseudo-terminal's two ends, or skips without one.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("skipping: no pseudo-terminal (%v)", err)
	}
	t.Cleanup(func() { m.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	return m, s
}

// runCheckOnTTY runs check in a new process with stderr on a terminal and
// returns what the terminal and stdout got.
func runCheckOnTTY(t *testing.T, args ...string) (terminal, stdout string) {
	t.Helper()
	master, tty := openPTY(t)
	cmd := diskcanaryCmd(t, nil, append([]string{"check"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, tty
	require.NoError(t, cmd.Start())
	tty.Close()
	read := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(master) // EIO once the process is gone
		read <- string(b)
	}()
	_ = cmd.Wait()
	select {
	case term := <-read:
		return term, out.String()
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal was not closed")
		return "", ""
	}
}

// On a terminal, check shows fio's status line on stderr, rewritten in
// place, and erases it before the result; stdout gets the result only.
func TestCheckStatusLineOnATerminal(t *testing.T) {
	dir := t.TempDir()
	term, stdout := runCheckOnTTY(t, dir, "--gap", "1ms", "--samples", "1500", "--min-free", "0", "--max-p99", "10s")
	require.Regexp(t, `\retcd: \[\d+\.\d%\]\[\d+ of 1500 ops\]\[p50=\S+ p99=\S+\]\[eta \d\dm:\d\ds\]\x1b\[K`, term)
	require.True(t, strings.HasSuffix(term, "\r\x1b[K"), "the line is erased at the end: %q", term)
	require.Contains(t, stdout, "PASS: fdatasync p99")
	require.NotContains(t, stdout, "\r")

	// --json on a terminal: nothing but the JSON.
	term, stdout = runCheckOnTTY(t, dir, "--gap", "1ms", "--samples", "1500", "--min-free", "0", "--max-p99", "10s", "--json")
	require.Empty(t, term)
	require.Contains(t, stdout, `"verdict": "pass"`)
}

// Not a terminal (a CI log, a pipe): one plain line on stderr every
// plainStatusEvery (10 s; shortened here to every tick, a second), --json
// or not, stdout untouched; --quiet: nothing on stderr.
func TestCheckPlainStatusWithoutATerminal(t *testing.T) {
	defer func(d time.Duration) { plainStatusEvery = d }(plainStatusEvery)
	plainStatusEvery = time.Nanosecond
	dir := t.TempDir()
	line := regexp.MustCompile(`^etcd: \[\d+\.\d%\]\[\d+ of 250 ops\]\[p50=\S+ p99=\S+\]\[eta \d\dm:\d\ds\]$`)
	for _, tc := range []struct {
		args  []string
		lines bool
	}{
		{nil, true},
		{[]string{"--json"}, true},
		{[]string{"--quiet"}, false},
		{[]string{"-q", "--json"}, false},
	} {
		// 250 ops 5 ms apart: over 1.25 s, so at least one tick.
		root := newRootCmd()
		var stdout, stderr bytes.Buffer
		root.SetOut(&stdout)
		root.SetErr(&stderr)
		root.SetArgs(append([]string{"check", dir, "--gap", "5ms", "--samples", "250", "--min-free", "0", "--max-p99", "10s"}, tc.args...))
		require.NoError(t, root.Execute(), "%q", tc.args)
		if !tc.lines {
			require.Empty(t, stderr.String(), "%q", tc.args)
		} else {
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			require.NotEmpty(t, stderr.String(), "%q", tc.args)
			for _, l := range lines {
				require.Regexp(t, line, l, "%q", tc.args)
			}
		}
		require.NotContains(t, stdout.String(), "of 250 ops", "%q: the status is stderr's", tc.args)
		require.NotContains(t, stderr.String(), "\r")
		if slices.Contains(tc.args, "--json") {
			var j checkJSON
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &j), "stdout is the JSON alone")
		}
	}
}

// The default interval: a run shorter than 10 s prints no status line.
func TestCheckNoStatusInItsFirst10s(t *testing.T) {
	dir := t.TempDir()
	cmd := diskcanaryCmd(t, nil, "check", dir, "--gap", "1ms", "--samples", "1500", "--min-free", "0", "--max-p99", "10s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run())
	require.Empty(t, stderr.String())
	require.Contains(t, stdout.String(), "PASS: fdatasync p99")
}

func TestStatusText(t *testing.T) {
	for _, tc := range []struct {
		profile string
		p       probes.CheckProgress
		want    string
	}{
		{"randread", probes.CheckProgress{Elapsed: 2 * time.Second, LaidOut: 256 << 20, WorkingSet: 1 << 30},
			"randread: [laying out 25.0%][256MiB of 1GiB, 134 MB/s][eta 00m:06s]"},
		{"etcd", probes.CheckProgress{Elapsed: 30 * time.Second, Done: 4520, Planned: 10000, P50: 160 * time.Microsecond,
			P99: 2700 * time.Microsecond, ETA: 72 * time.Second},
			"etcd: [45.2%][4520 of 10000 ops][p50=160.0µs p99=2.70ms][eta 01m:12s]"},
		{"fio-etcd", probes.CheckProgress{Elapsed: time.Second, Planned: 20000}, "fio-etcd: [starting][00m:01s]"},
		{"etcd", probes.CheckProgress{Done: 1, Planned: 10000, P50: time.Second, P99: time.Second, ETA: 9999 * time.Second},
			"etcd: [0.0%][1 of 10000 ops][p50=1.000s p99=1.000s][eta 2h:46m:39s]"},
	} {
		require.Equal(t, tc.want, statusText(tc.profile, tc.p))
	}
}
