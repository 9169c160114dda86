package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/smart/smarttest"
)

// runSmartWithin is runSmart that fails the test instead of hanging it.
func runSmartWithin(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	type result struct {
		stdout, stderr string
		code           int
	}
	done := make(chan result, 1)
	go func() {
		o, e, c := runSmart(t, args...)
		done <- result{o, e, c}
	}()
	select {
	case r := <-done:
		return r.stdout, r.stderr, r.code
	case <-time.After(10 * time.Second):
		t.Fatalf("diskcanary smart %s still running after 10 s", strings.Join(args, " "))
		return "", "", 0
	}
}

// TestAdversarialSmartFromJSONNotARegularFile (issue 43): --from-json
// /dev/zero read until memory ran out, a FIFO hung the command. Each is
// refused before a byte is read, as an unreadable file is (exit 2, the
// other files still read), and so is a regular file larger than a live
// smartctl's output may be.
func TestAdversarialSmartFromJSONNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "saved.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	big := filepath.Join(dir, "big.json")
	require.NoError(t, os.WriteFile(big, []byte(strings.Repeat(" ", 4<<20)+"{}"), 0o600))
	good := smarttest.Fixture("nvme-pct-used-51-spare-93-smartctl-exporter.json")

	stdout, stderr, code := runSmartWithin(t, "--from-json", fifo+",/dev/zero,"+big+","+good)
	require.Equal(t, smartExitUnknown, code, stderr)
	require.Equal(t, []string{
		fifo + ": could not read: not a regular file: it is a FIFO",
		"/dev/zero: could not read: not a regular file: it is a character device",
		big + ": could not read: too large: larger than 4194304 bytes",
		"diskcanary: smart: 0 failing, 0 unknown, 0 degraded or warned, of 1 disk; 3 files unreadable",
	}, lines(stderr))
	require.Len(t, lines(stdout), 2, "the header and the one readable disk")
	require.Contains(t, stdout, good)
}

// TestAdversarialSmartOutOfRangeIsUnknown (issue 43): a saved output with a
// value no disk can report (each a copy of a real NVMe or SAS output with
// one number changed) read as OK, exit 0. The value is now dropped (null,
// "-"), named, and the disk is UNKNOWN (exit 2), never OK.
func TestAdversarialSmartOutOfRangeIsUnknown(t *testing.T) {
	const nvme, sas = "nvme-pct-used-51-spare-93-smartctl-exporter.json", "scsi-sas-hdd-grown-defects-260-uncorrected-smartctl-exporter.json"
	for _, tc := range []struct {
		name, fixture, from, to string
		key, signal             string
	}{
		{"temperature below absolute zero", nvme, `"current": 30`, `"current": -300`,
			"temperature_celsius", "invalid value ignored: temperature_celsius -300 is below -273"},
		{"wear past what NVMe can say", nvme, `"percentage_used": 51`, `"percentage_used": 300`,
			"wear_used_ratio", "invalid value ignored: wear_used_ratio 3 is above 2.55"},
		{"negative wear", nvme, `"percentage_used": 51`, `"percentage_used": -1`,
			"wear_used_ratio", "invalid value ignored: wear_used_ratio -0.01 is below 0"},
		{"spare above 100 %", nvme, `"available_spare": 93`, `"available_spare": 101`,
			"available_spare_ratio", "invalid value ignored: available_spare_ratio 1.01 is above 1"},
		{"negative media errors", nvme, `"media_errors": 0`, `"media_errors": -5`,
			"media_errors", "invalid value ignored: media_errors -5 is below 0"},
		{"a count past int64", nvme, `"media_errors": 0`, `"media_errors": 1e30`,
			"media_errors", "invalid value ignored: media_errors is beyond any number a disk reports"},
		{"a count past float64", nvme, `"media_errors": 0`, `"media_errors": 1e400`,
			"media_errors", "invalid value ignored: media_errors is beyond any number a disk reports"},
		{"power-on for a million years", nvme, `"hours": 54704`, `"hours": 9000000000`,
			"power_on_seconds", "invalid value ignored: power_on_seconds 3.24e+13 is above 3.15576e+09"},
		{"negative grown defects", sas, `"scsi_grown_defect_list": 260`, `"scsi_grown_defect_list": -1`,
			"reallocated_sectors", "invalid value ignored: reallocated_sectors -1 is below 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig, err := os.ReadFile(smarttest.Fixture(tc.fixture))
			require.NoError(t, err)
			require.Equal(t, 1, strings.Count(string(orig), tc.from), "the fixture has %s once", tc.from)
			file := filepath.Join(t.TempDir(), tc.fixture)
			require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(orig), tc.from, tc.to, 1)), 0o600))

			got := smartJSON(t, smartExitUnknown, "--from-json", file)
			require.Len(t, got, 1)
			require.Nil(t, got[0][tc.key], "an impossible value is null, not a number")
			require.Contains(t, got[0]["errors"], tc.signal)

			stdout, stderr, code := runSmart(t, "-v", "--from-json", file)
			require.Equal(t, smartExitUnknown, code, stderr)
			row := lines(stdout)[1]
			require.Contains(t, row, "UNKNOWN: "+tc.signal)
			require.NotContains(t, row, "OK")
			require.Equal(t, "diskcanary: smart: 0 failing, 1 unknown, 0 degraded or warned, of 1 disk", lines(stderr)[0])
		})
	}
	// NaN is no JSON number: the file is unreadable (exit 2), not OK.
	orig, err := os.ReadFile(smarttest.Fixture(nvme))
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), nvme)
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(orig), `"current": 30`, `"current": NaN`, 1)), 0o600))
	_, stderr, code := runSmart(t, "--from-json", file)
	require.Equal(t, smartExitUnknown, code)
	require.Equal(t, "diskcanary: smart: no file could be read", lines(stderr)[len(lines(stderr))-1])
}

// TestAdversarialSmartNoDevice (issue 43): with no SMART device (the real
// --scan-open of a VM with virtio disks) `smart` told root to check that it
// runs as root, and `smart --json` printed nothing, which jq cannot read.
// It prints [] and says what the scan found; nothing read is not healthy
// (exit 2). As root there is no privilege hint
// (TestAdversarialSmartNoDeviceUnprivileged has it).
func TestAdversarialSmartNoDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the message without the privilege hint is root's: run as root")
	}
	bin := smarttest.Install(t, smarttest.FakeConfig{ScanFixture: smarttest.Fixture("scan-none-vm-v7.3.json")})
	const msg = "diskcanary: smart: smartctl --scan-open found no device; name a disk to read it (diskcanary smart /dev/sda)"
	stdout, stderr, code := runSmartWithin(t, "--smartctl", bin, "--json")
	require.Equal(t, smartExitUnknown, code)
	require.Equal(t, "[]\n", stdout)
	require.Equal(t, []string{msg}, lines(stderr))
	stdout, stderr, code = runSmartWithin(t, "--smartctl", bin)
	require.Equal(t, smartExitUnknown, code)
	require.Empty(t, stdout)
	require.Equal(t, []string{msg}, lines(stderr))
}

// TestAdversarialSmartNoDeviceUnprivileged: the privilege hint is given
// where it can be the reason, to a user without the capabilities.
func TestAdversarialSmartNoDeviceUnprivileged(t *testing.T) {
	cmd, base := nobodyCmd(t)
	fixture, err := os.ReadFile(smarttest.Fixture("scan-none-vm-v7.3.json"))
	require.NoError(t, err)
	script := "#!/bin/sh\ncat <<'EOF'\n" + string(fixture) + "EOF\n"
	require.NoError(t, os.WriteFile(filepath.Join(base, "smartctl"), []byte(script), 0o755))
	cmd.Args = append(cmd.Args, "smart", "--json", "--smartctl", filepath.Join(base, "smartctl"))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	require.Equal(t, smartExitUnknown, cmd.ProcessState.ExitCode(), "%v: %s", err, stderr.String())
	require.Equal(t, "[]\n", stdout.String())
	require.Equal(t, "diskcanary: smart: smartctl --scan-open found no device (diskcanary lacks CAP_SYS_RAWIO or CAP_SYS_ADMIN, "+
		"without which smartctl cannot open a disk: run it as root); name a disk to read it (diskcanary smart /dev/sda)\n", stderr.String())
}

// TestAdversarialSmartScanCapped: `smart` reads at most the config's limit
// of the devices a scan lists, like the daemon, and says how many more it
// left unread; those could be the failing disks, so a run of healthy disks
// is UNKNOWN (exit 2), not healthy.
func TestAdversarialSmartScanCapped(t *testing.T) {
	healthy := smarttest.FakeDevice{Fixture: smarttest.Fixture("nvme-pct-used-51-spare-93-smartctl-exporter.json")}
	fake := smarttest.FakeConfig{Devices: map[string]smarttest.FakeDevice{}}
	for i := range 1030 {
		name := fmt.Sprintf("/dev/nvme%d", i)
		fake.Scan = append(fake.Scan, map[string]string{"name": name, "type": "nvme", "protocol": "NVMe"})
		fake.Devices[name] = healthy
	}
	bin := smarttest.Install(t, fake)
	got := smartJSON(t, smartExitUnknown, "--smartctl", bin, "--concurrency", "8")
	require.Len(t, got, 1024)
	_, stderr, code := runSmart(t, "--smartctl", bin, "--concurrency", "8")
	require.Equal(t, smartExitUnknown, code)
	require.Equal(t, []string{"diskcanary: smart: 0 failing, 0 unknown, 0 degraded or warned, of 1024 disks; " +
		"6 more devices listed by smartctl --scan-open not read (at most 1024 are; name others as DEVICE)"}, lines(stderr))
}

// TestSmartJSONIsAnArrayWhenNothingIsRead: with smartctl missing `smart
// --json` still prints an array, so a pipe into jq reads [] and the exit
// status says why (2, could not measure).
func TestSmartJSONIsAnArrayWhenNothingIsRead(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "smartctl")
	stdout, stderr, code := runSmart(t, "--smartctl", missing, "--json")
	require.Equal(t, smartExitUnknown, code)
	require.Equal(t, "[]\n", stdout)
	require.Equal(t, []string{`diskcanary: smartctl not found (exec: "` + missing + `": stat ` + missing +
		`: no such file or directory): install smartmontools, or use --from-json`}, lines(stderr))
}
