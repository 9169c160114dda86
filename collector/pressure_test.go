package collector

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
)

// The files are this project's VM's /proc/pressure/{cpu,io} (kernel 6.18),
// copied as they were.
func TestPressureFromProc(t *testing.T) {
	p, err := newPressureCollector(Options{Config: &config.Config{}, Paths: hostpath.Paths{ProcFS: "testdata/pressure/proc"}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.Equal(t, map[string]float64{
		"diskcanary_pressure_available{}":                 1,
		"diskcanary_pressure_cpu_waiting_seconds_total{}": 687.696153,
		"diskcanary_pressure_io_waiting_seconds_total{}":  616.580809,
		"diskcanary_pressure_io_stalled_seconds_total{}":  513.988903,
	}, scrape(t, p))
}

// A kernel without PSI has no /proc/pressure: a gauge and one log line,
// not a failed collector.
func TestPressureMissingIsAMetricAndOneLogLine(t *testing.T) {
	proc := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(proc, "stat"), []byte("cpu 1 2 3 4\n"), 0o644))
	var log bytes.Buffer
	p, err := newPressureCollector(Options{Config: &config.Config{}, Paths: hostpath.Paths{ProcFS: proc}, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	require.NoError(t, err)
	want := map[string]float64{"diskcanary_pressure_available{}": 0}
	require.Equal(t, want, scrape(t, p))
	require.Equal(t, want, scrape(t, p))
	require.Equal(t, 1, bytes.Count(log.Bytes(), []byte("no pressure stall information")), log.String())
}
