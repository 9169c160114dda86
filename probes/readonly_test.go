package probes

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// logBuffer is a log destination tests read while the engine writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines are the log lines that contain every one of want.
func (l *logBuffer) lines(want ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var got []string
next:
	for _, line := range strings.Split(l.b.String(), "\n") {
		for _, w := range want {
			if !strings.Contains(line, w) {
				continue next
			}
		}
		got = append(got, line)
	}
	return got
}

// startEngineLogged is startEngine with the log (Info and up) kept.
func startEngineLogged(t *testing.T, log *logBuffer, ps ...config.Probe) func() map[string][]*dto.Metric {
	t.Helper()
	for i := range ps {
		ps[i].ApplyProbeDefaults()
	}
	e := NewEngine(ps, hostpath.Paths{}, slog.New(slog.NewTextHandler(log, nil)))
	reg := prometheus.NewRegistry()
	reg.MustRegister(engineCollector{e})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return func() map[string][]*dto.Metric {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		out := map[string][]*dto.Metric{}
		for _, mf := range mfs {
			out[mf.GetName()] = mf.GetMetric()
		}
		return out
	}
}

func failures(mf map[string][]*dto.Metric, probe, reason string) float64 {
	m, _ := value(mf["diskcanary_probe_failures_total"], map[string]string{"probe": probe, "reason": reason})
	return m.GetCounter().GetValue()
}

// ext4 under errors=remount-ro turned read-only by the kernel (its own
// trigger_fs_error, the path a corruption takes): the WAL probe fails
// with reason="read_only" every cycle, never "unsafe_path" (the segment
// it could not unlink is not "a symlink or special file in the way"); the
// failed removal is logged, and the failure once, not every cycle.
func TestKernelReadOnlyFilesystemIsReadOnly(t *testing.T) {
	mnt, dev := testkit.LoopFS(t, 64<<20, "ext4", "-e", "remount-ro")
	trigger := filepath.Join("/sys/fs/ext4", filepath.Base(dev), "trigger_fs_error")
	if _, err := os.Stat(trigger); err != nil {
		t.Skipf("skipping: this kernel's ext4 has no %s", trigger)
	}
	dir := filepath.Join(mnt, "canary")
	log := &logBuffer{}
	gather := startEngineLogged(t, log, config.Probe{Name: "wal", Kind: config.KindWAL, Dir: dir,
		Interval: 20 * time.Millisecond, Ops: 5, MinFree: 1, SegmentSize: 1 << 20})
	require.Eventually(t, func() bool {
		m, ok := value(gather()["diskcanary_fdatasync_duration_seconds"], map[string]string{"probe": "wal"})
		return ok && m.GetHistogram().GetSampleCount() >= 8
	}, 10*time.Second, 20*time.Millisecond, "two cycles on the writable filesystem: %s", log)

	require.NoError(t, os.WriteFile(trigger, []byte("diskcanary test error"), 0))
	require.Eventually(t, func() bool { return failures(gather(), "wal", "read_only") >= 5 }, 10*time.Second, 20*time.Millisecond,
		`five failures with reason="read_only"`)
	mf := gather()
	require.Zero(t, failures(mf, "wal", "unsafe_path"))
	s, _ := value(mf["diskcanary_probe_success"], map[string]string{"probe": "wal"})
	require.Zero(t, s.GetGauge().GetValue())

	seg := filepath.Join(dir, ".diskcanary-wal-wal")
	require.FileExists(t, seg, "the segment could not be removed")
	require.Len(t, log.lines("cannot remove the probe's WAL segment: it is left behind", "path="+seg, "read-only file system"), 1, "the failed removal is logged")
	// One line per distinct error, not one a cycle: the first failure
	// (the burst's own write, or the create after it), then at most the
	// create's, which every later cycle repeats.
	failedLines := log.lines("probe cycle failed", "reason=read_only")
	require.NotEmpty(t, failedLines)
	require.LessOrEqual(t, len(failedLines), 2, "%s", log)
	for _, l := range failedLines {
		require.Contains(t, l, "read-only file system")
	}
	require.Contains(t, failedLines[len(failedLines)-1], "remove the stale "+seg+": read-only file system")
	require.Empty(t, log.lines("unsafe_path"))

	// The next open meets the stale segment: its failed removal is the
	// error (reasonOf: read_only), with the file named.
	d, err := openProbeDir(dir)
	require.NoError(t, err)
	defer d.close()
	_, err = d.create(".diskcanary-wal-wal", 0)
	require.EqualError(t, err, "remove the stale "+seg+": read-only file system")
	require.Equal(t, reasonReadOnly, reasonOf(err))
}
