package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// The daemon as a user runs it: a config file, a landing page, /metrics
// with probe results, and on SIGTERM in the middle of probing a clean exit
// that leaves no WAL probe file behind (the read working set is kept on
// purpose: it is expensive to lay out).
func TestServeEndToEndAndSIGTERMCleanup(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "diskcanary.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`probes:
  targets:
    - name: wal
      kind: wal
      dir: %[1]s
      interval: 50ms
      ops: 50
      min_free: 1B
    - name: rr
      kind: randread
      dir: %[1]s
      interval: 50ms
      working_set: 4MiB
      min_free: 1B
smart:
  enabled: false
`, dir)), 0o600))
	addr := testkit.FreeAddr(t)
	daemon := testkit.StartCmd(t, diskcanaryCmd(t, nil, "serve", "--config.file", cfg, "--web.listen-address", addr))

	var metrics string
	require.Eventually(t, func() bool {
		code, body, err := get("http://" + addr + "/metrics")
		metrics = body
		// Counters are exported at zero from the start; success 1 means a
		// burst of each probe completed (so the read set has been laid out).
		return err == nil && code == 200 && strings.Contains(body, `diskcanary_probe_success{probe="wal"} 1`) &&
			strings.Contains(body, `diskcanary_probe_success{probe="rr"} 1`)
	}, 20*time.Second, 50*time.Millisecond, "a successful burst of each probe on /metrics")
	require.Contains(t, metrics, `diskcanary_fdatasync_duration_seconds_bucket{device=`)
	require.Contains(t, metrics, `diskcanary_collector_success{collector="probes"} 1`)
	require.Contains(t, metrics, "diskcanary_build_info")

	code, landing, err := get("http://" + addr + "/")
	require.NoError(t, err)
	require.Equal(t, 200, code)
	require.Contains(t, landing, "/metrics")

	// Stop it while a WAL burst is likely under way (50 syncs every 50 ms).
	require.NoError(t, daemon.Cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-daemon.Done:
		require.True(t, daemon.Cmd.ProcessState.Success(), "clean exit on SIGTERM: %v", daemon.Cmd.ProcessState)
	case <-time.After(10 * time.Second):
		t.Fatal("no exit 10s after SIGTERM")
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.NotContains(t, strings.Join(names, " "), "wal", "WAL probe file removed on shutdown")
	require.Contains(t, strings.Join(names, " "), "readset", "the read working set is kept for the next start")
}

// A port in use is a clear error and a non-zero exit, not a hang.
func TestServePortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	cmd := diskcanaryCmd(t, nil, "serve", "--probe.dir", t.TempDir(),
		"--web.listen-address", l.Addr().String())
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "address already in use")
}

// The daemon runs its Go code on one CPU unless told otherwise, as
// node_exporter does: --runtime.gomaxprocs, whose default the GOMAXPROCS
// environment variable sets. The Go collector's gauge says what the
// runtime took.
func TestServeGOMAXPROCS(t *testing.T) {
	for _, c := range []struct {
		name string
		env  string
		args []string
		want string
	}{
		{"default", "", nil, "go_sched_gomaxprocs_threads 1"},
		{"flag", "", []string{"--runtime.gomaxprocs", "3"}, "go_sched_gomaxprocs_threads 3"},
		{"environment", "GOMAXPROCS=2", nil, "go_sched_gomaxprocs_threads 2"},
		{"flag beats environment", "GOMAXPROCS=2", []string{"--runtime.gomaxprocs", "4"}, "go_sched_gomaxprocs_threads 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := testkit.FreeAddr(t)
			cmd := diskcanaryCmd(t, nil, append([]string{"serve", "--probe.dir", t.TempDir(), "--no-collector.smart",
				"--web.listen-address", addr}, c.args...)...)
			cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") })
			if c.env != "" {
				cmd.Env = append(cmd.Env, c.env)
			}
			testkit.StartCmd(t, cmd)
			var body string
			require.Eventually(t, func() bool {
				var code int
				var err error
				code, body, err = get("http://" + addr + "/metrics")
				return err == nil && code == 200
			}, 20*time.Second, 50*time.Millisecond)
			require.Equal(t, c.want, regexp.MustCompile(`(?m)^go_sched_gomaxprocs_threads .*$`).FindString(body))
		})
	}
}
