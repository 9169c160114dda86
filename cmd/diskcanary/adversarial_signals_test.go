package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// walProbeConfig writes a config with one WAL probe on dir, a burst every
// 50 ms, and no SMART.
func walProbeConfig(t *testing.T, dir string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "diskcanary.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`probes:
  targets:
    - name: wal
      kind: wal
      dir: %s
      interval: 50ms
      ops: 50
      min_free: 1B
smart:
  enabled: false
`, dir)), 0o600))
	return cfg
}

var walRunsRE = regexp.MustCompile(`(?m)^diskcanary_probe_runs_total\{probe="wal"\} (\d+)$`)

// walRuns is the daemon's diskcanary_probe_runs_total for the wal probe, or
// -1 when /metrics does not answer with it.
func walRuns(addr string) int {
	code, body, err := get("http://" + addr + "/metrics")
	if err != nil || code != http.StatusOK {
		return -1
	}
	m := walRunsRE.FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// waitExit waits for a SIGTERM'd daemon and requires a clean exit that
// leaves no WAL probe file in dir.
func waitExit(t *testing.T, done <-chan struct{}, state func() *os.ProcessState, dir string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no exit 10 s after SIGTERM")
	}
	require.True(t, state().Success(), "clean exit on SIGTERM: %v", state())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.NotContains(t, e.Name(), "wal", "WAL probe file left in %s", dir)
	}
}

// SIGHUP (a reload habit, or a closed terminal) neither kills the daemon
// nor stops its probes; it logs one line per signal saying there is no
// reload. SIGTERM still stops it cleanly. Its default action used to kill
// the daemon mid-burst and leave the WAL file behind.
func TestAdversarialSIGHUPDoesNotKill(t *testing.T) {
	dir := t.TempDir()
	addr := testkit.FreeAddr(t)
	daemon := testkit.StartCmd(t, diskcanaryCmd(t, nil, "serve", "--config.file", walProbeConfig(t, dir), "--web.listen-address", addr))
	require.Eventually(t, func() bool { return walRuns(addr) > 0 }, 20*time.Second, 50*time.Millisecond, "wal probe results on /metrics")

	for i := 0; i < 3; i++ {
		require.NoError(t, daemon.Cmd.Process.Signal(syscall.SIGHUP))
		select {
		case <-daemon.Done:
			t.Fatalf("SIGHUP killed the daemon: %v", daemon.Cmd.ProcessState)
		case <-time.After(200 * time.Millisecond):
		}
	}
	before := walRuns(addr)
	require.Positive(t, before, "/metrics answers after SIGHUP")
	require.Eventually(t, func() bool { return walRuns(addr) > before }, 5*time.Second, 50*time.Millisecond, "probes still run after SIGHUP")
	log, err := os.ReadFile(daemon.Log)
	require.NoError(t, err)
	hups := regexp.MustCompile(`level=INFO source=serve\.go:\d+ msg="SIGHUP ignored: diskcanary does not reload; restart it to apply a changed config or web config"\n`)
	require.Len(t, hups.FindAllString(string(log), -1), 3, "one INFO line per SIGHUP:\n%s", log)

	require.NoError(t, daemon.Cmd.Process.Signal(syscall.SIGTERM))
	waitExit(t, daemon.Done, func() *os.ProcessState { return daemon.Cmd.ProcessState }, dir)
}

// The daemon's stderr is a pipe whose reader (a log shipper) goes away.
// Writing a log line then must not kill it with SIGPIPE: it goes on serving
// /metrics and running probes, and SIGTERM (which logs too) still stops it
// cleanly without a WAL file left behind.
func TestAdversarialClosedLogPipe(t *testing.T) {
	dir := t.TempDir()
	addr := testkit.FreeAddr(t)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd := diskcanaryCmd(t, nil, "serve", "--config.file", walProbeConfig(t, dir), "--web.listen-address", addr)
	cmd.Stderr = w
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	require.NoError(t, w.Close())
	// Drain the start-up lines, so the pipe buffer is not what fails.
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := r.Read(buf); err != nil {
				return
			}
		}
	}()
	require.Eventually(t, func() bool { return walRuns(addr) > 0 }, 20*time.Second, 50*time.Millisecond, "wal probe results on /metrics")

	require.NoError(t, r.Close())
	// SIGHUP makes the daemon write a log line, now to a pipe with no reader.
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	select {
	case <-done:
		t.Fatalf("writing a log line to a closed pipe killed the daemon: %v", cmd.ProcessState)
	case <-time.After(500 * time.Millisecond):
	}
	before := walRuns(addr)
	require.Positive(t, before, "/metrics answers after the log pipe closed")
	require.Eventually(t, func() bool { return walRuns(addr) > before }, 5*time.Second, 50*time.Millisecond, "probes still run")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	waitExit(t, done, func() *os.ProcessState { return cmd.ProcessState }, dir)
}

// The kernel hands a process-directed signal (SIGTERM from systemd or the
// kubelet, ^C) to the main thread when that thread can take it, and a
// thread waiting on a hung FUSE or NFS request cannot: the signal stays
// pending until the request returns, and the daemon ignores SIGTERM for as
// long as its disk hangs. So no goroutine but main may run on the main
// thread, whatever it does (init in main.go).
func TestNoGoroutineRunsOnTheMainThread(t *testing.T) {
	pid := unix.Getpid()
	var onMain atomic.Int32
	for round := 0; round < 50; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				if unix.Gettid() == pid {
					onMain.Add(1)
				}
				time.Sleep(time.Millisecond)
			}()
		}
		wg.Wait()
	}
	require.Zero(t, onMain.Load(), "goroutines that ran on the main thread, of 400")
}
