package smart

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/internal/smart/smarttest"
)

// scanRunner is a runner on the fake smartctl whose scans a test starts
// itself (r.scan), one at a time, with no device read in between; it
// logs into the returned buffer. capEff is this process's capability set
// as /proc/self/status would give it.
func scanRunner(t *testing.T, fake smarttest.FakeConfig, capEff string) (*Runner, *bytes.Buffer) {
	t.Helper()
	proc := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "self"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "self", "status"), []byte("Name:\tx\nCapEff:\t"+capEff+"\n"), 0o644))
	var log bytes.Buffer
	r := NewRunner(RunnerConfig{
		Smartctl: smarttest.Install(t, fake), Scan: true,
		Paths:  hostpath.Paths{ProcFS: proc, SysFS: t.TempDir()},
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{ReplaceAttr: dropTime})),
	})
	require.True(t, r.lookup(time.Now()))
	return r, &log
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// kernelName is the n-th SCSI disk's kernel name: sda … sdz, sdaa …
func kernelName(n int) string {
	name := ""
	for n++; n > 0; n = (n - 1) / 26 {
		name = string(rune('a'+(n-1)%26)) + name
	}
	return "/dev/sd" + name
}

// TestRunnerScanReadsAtMostTheConfigLimit (issue 43): a --scan-open that
// lists 20,000 devices once gave 340,372 series, a 24.7 MB /metrics and
// 465 MB RSS. The runner tracks the scan's first config.MaxSmartDevices,
// says how many it dropped in its status, and logs that once, naming the
// first five, not on every rescan.
func TestRunnerScanReadsAtMostTheConfigLimit(t *testing.T) {
	require.Equal(t, "/dev/sdzz", kernelName(701))
	var scan []map[string]string
	for i := range 20_000 {
		scan = append(scan, map[string]string{"name": kernelName(i), "type": "sat", "protocol": "ATA"})
	}
	r, log := scanRunner(t, smarttest.FakeConfig{Scan: scan}, "000001ffffffffff")
	r.scan(context.Background())
	r.scan(context.Background())

	st := r.Status()
	require.True(t, st.ScanSuccess)
	require.Equal(t, 18_976, st.ScanDropped)
	require.Len(t, st.Devices, 1024)
	tracked := map[string]bool{}
	for _, d := range st.Devices {
		tracked[d.Device.Name] = true
	}
	for i := range 20_000 {
		require.Equal(t, i < 1024, tracked[kernelName(i)], kernelName(i))
	}
	require.Equal(t, "/dev/sdamj", kernelName(1023))
	want := `level=WARN msg="smart: smartctl --scan-open listed more devices than diskcanary reads; the rest are not read" limit=1024 dropped=18976 first_dropped="/dev/sdamk /dev/sdaml /dev/sdamm /dev/sdamn /dev/sdamo"` + "\n"
	require.Equal(t, 1, strings.Count(log.String(), "listed more devices"), log.String())
	require.Contains(t, log.String(), want)
	require.Equal(t, 1024, strings.Count(log.String(), `msg="smart: new device"`))
}

// TestRunnerLogsWhenTheScanFindsNoDevice (issue 43): serve said nothing
// when smartctl --scan-open found no device (a VM's virtio disks: the real
// output is scan-none-vm-v7.3.json). It warns once, not at every rescan,
// says so again when devices appear, and names the missing capabilities
// only when they are missing.
func TestRunnerLogsWhenTheScanFindsNoDevice(t *testing.T) {
	none := smarttest.FakeConfig{ScanFixture: fixture("scan-none-vm-v7.3.json")}
	for _, tc := range []struct{ capEff, warning string }{
		{"000001ffffffffff", `level=WARN msg="smart: smartctl --scan-open found no device; SMART series appear when it finds one" configured_devices=0` + "\n"},
		{"0000000000000000", `level=WARN msg="smart: smartctl --scan-open found no device (diskcanary lacks CAP_SYS_RAWIO or CAP_SYS_ADMIN, without which smartctl cannot open a disk: run it as root); SMART series appear when it finds one" configured_devices=0` + "\n"},
	} {
		r, log := scanRunner(t, none, tc.capEff)
		for range 3 {
			r.scan(context.Background())
		}
		require.Equal(t, tc.warning, log.String(), "one warning for three empty scans")
		require.True(t, r.Status().ScanSuccess)
		require.Empty(t, r.Status().Devices)

		log.Reset()
		smarttest.Install(t, smarttest.FakeConfig{Scan: []map[string]string{{"name": "/dev/sda", "type": "sat", "protocol": "ATA"}}})
		r.scan(context.Background())
		r.scan(context.Background())
		require.Equal(t, fmt.Sprintf("%s\n%s\n",
			`level=INFO msg="smart: smartctl --scan-open finds devices again" count=1`,
			`level=INFO msg="smart: new device" device=/dev/sda type=""`), log.String())

		log.Reset()
		smarttest.Install(t, none)
		r.scan(context.Background())
		require.Equal(t, tc.warning, log.String(), "empty again: warned again")
	}
	r, log := scanRunner(t, none, "000001ffffffffff")
	r.cfg.Devices = []Device{{Name: "/dev/sdb"}}
	r.scan(context.Background())
	require.Equal(t, `level=WARN msg="smart: smartctl --scan-open found no device; only smart.devices are read" configured_devices=1`+"\n", log.String())
}

// TestRunnerSaysWhenItHasNothingToRead: with the scan off and no device
// configured, SMART is empty by configuration; the log says so at start.
func TestRunnerSaysWhenItHasNothingToRead(t *testing.T) {
	var log bytes.Buffer
	r := NewRunner(RunnerConfig{Smartctl: smarttest.Install(t, smarttest.FakeConfig{}),
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{ReplaceAttr: dropTime}))})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.Run(ctx)
	require.Equal(t, `level=WARN msg="smart: smart.scan is off and smart.devices lists no device: there is nothing to read"`+"\n", log.String())
}
