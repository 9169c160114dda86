package smart

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// TestRealSmartctl runs the installed smartctl (smartmontools, installed
// by the CI script) with the runner's exact arguments: every one of them
// must be accepted (exit bit 0 would say otherwise), and the failures a
// host without disks can produce must come back as per-device errors.
func TestRealSmartctl(t *testing.T) {
	testkit.E2E(t) // the installed smartctl: the end-to-end set, so the fast set is the same everywhere
	bin, err := exec.LookPath("smartctl")
	if err != nil {
		t.Skip("smartctl not installed (apt-get install smartmontools)")
	}
	proc := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "self"), 0o755))
	// As if diskcanary ran without any capability.
	require.NoError(t, os.WriteFile(filepath.Join(proc, "self", "status"), []byte("CapEff:\t0000000000000000\n"), 0o644))
	r := NewRunner(RunnerConfig{Smartctl: bin, Interval: time.Hour, Timeout: 20 * time.Second, Concurrency: 2, Paths: hostpath.Paths{ProcFS: proc, SysFS: t.TempDir()}})
	st, err := r.CollectOnce(context.Background(), []Device{
		{Name: "/dev/diskcanary-none", Type: "sat"},
		{Name: "/dev/diskcanary-nvme-none", Type: "nvme"},
	})
	require.NoError(t, err)
	require.Len(t, st.Devices, 2)
	for _, d := range st.Devices {
		require.Equal(t, ExitOpenFailed, d.ExitStatus, "%s: %v", d.Label, d.Errors)
		require.False(t, d.Success)
		require.Nil(t, d.Result)
		require.Contains(t, strings.Join(d.Errors, ";"), "failed", d.Label)
	}
	require.Equal(t, "CAP_SYS_RAWIO", st.Devices[0].MissingCapability, st.Devices[0].Label)
	require.Equal(t, "CAP_SYS_ADMIN", st.Devices[1].MissingCapability, st.Devices[1].Label)

	// --scan-open is accepted too, and an empty host scans to no devices, not an error.
	out := r.exec(context.Background(), "--scan-open", "--json")
	require.NoError(t, out.Err)
	_, err = ParseScan(out.Stdout)
	require.NoError(t, err)
}
