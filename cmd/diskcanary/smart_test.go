package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/smart/smarttest"
)

// smartJSONKeys is the `smart --json` object, exactly as DESIGN.md lists it.
var smartJSONKeys = []string{"device", "protocol", "model", "serial", "firmware", "healthy", "temperature_celsius",
	"power_on_seconds", "power_cycles", "wear_used_ratio", "media_errors", "reallocated_sectors", "pending_sectors",
	"available_spare_ratio", "critical_warning", "smartctl_exit_status", "exit_status_bits", "errors"}

func smartJSON(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	out, code, err := runCLI(t, append([]string{"smart", "--json"}, args...)...)
	require.NoError(t, err, out)
	require.Equal(t, 0, code)
	// Scan files add a note on stderr (which runCLI merges): the JSON starts at '['.
	out = out[strings.Index(out, "["):]
	var got []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	for _, d := range got {
		keys := []string{}
		for k := range d {
			keys = append(keys, k)
		}
		require.ElementsMatch(t, smartJSONKeys, keys)
	}
	return got
}

func TestSmartFromJSONEveryCorpusFile(t *testing.T) {
	dir := os.Getenv("DISKCANARY_SMART_CORPUS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "fixtures", "smartctl")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		t.Skipf("smartctl corpus not found at %s", dir)
	}
	devices := 0
	for _, f := range files {
		got := smartJSON(t, "--from-json", f)
		if strings.HasPrefix(filepath.Base(f), "scan-") {
			require.Empty(t, got, f)
			continue
		}
		require.Len(t, got, 1, f)
		devices++
		d := got[0]
		require.NotEmpty(t, d["device"], f)
		require.NotNil(t, d["smartctl_exit_status"], f)
	}
	require.Greater(t, devices, 30)
	// All at once: one array.
	got := smartJSON(t, append([]string{"--from-json", files[0]}, files[1:]...)...)
	require.Len(t, got, devices)
}

func TestSmartJSONNullNotZero(t *testing.T) {
	got := smartJSON(t, "--from-json", smarttest.Fixture("nvme-pct-used-51-spare-93-smartctl-exporter.json"))
	d := got[0]
	require.Equal(t, "nvme0", d["device"])
	require.Equal(t, "NVMe", d["protocol"])
	require.Nil(t, d["reallocated_sectors"], "NVMe has no reallocated-sector count: null, not 0")
	require.Nil(t, d["pending_sectors"])
	require.Equal(t, 0.51, d["wear_used_ratio"])
	require.Equal(t, 0.93, d["available_spare_ratio"])
	require.EqualValues(t, 0, d["critical_warning"])
	require.Equal(t, []any{}, d["exit_status_bits"])
	require.Equal(t, []any{}, d["errors"])
}

func TestSmartTableWorstFirst(t *testing.T) {
	out, code, err := runCLI(t, "smart", "--from-json",
		smarttest.Fixture("nvme-pct-used-51-spare-93-smartctl-exporter.json")+","+
			smarttest.Fixture("sat-hdd-reallocated-304-smartctl-exporter.json")+","+
			smarttest.Fixture("nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json")+","+
			smarttest.Fixture("synth-ata-standby-v7.3.json"))
	require.NoError(t, err)
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5, out)
	require.True(t, strings.HasPrefix(lines[0], "DEVICE"))
	require.Contains(t, lines[1], "SAMSUNG MZWLL3T2HAJQ")
	require.Contains(t, lines[1], "FAILING: SMART health check FAILED")
	require.Contains(t, lines[2], "DEGRADED: 304 reallocated sectors")
	require.Contains(t, lines[3], "in standby")
	require.Contains(t, lines[4], "INTEL SSDPEDMD800G4")
	require.Contains(t, lines[4], "51%")
	// The standby disk reports nothing: dashes, never zeros.
	require.NotContains(t, lines[3], " 0 ")
}

func TestSmartLiveWithFakeSmartctl(t *testing.T) {
	bin := smarttest.Install(t, smarttest.FakeConfig{
		Scan: []map[string]string{{"name": "/dev/sda", "type": "sat", "protocol": "ATA"}, {"name": "/dev/nvme0", "type": "nvme", "protocol": "NVMe"}},
		Devices: map[string]smarttest.FakeDevice{
			"/dev/sda":   {Fixture: smarttest.Fixture("sat-hdd-reallocated-304-smartctl-exporter.json")},
			"/dev/nvme0": {Fixture: smarttest.Fixture("nvme-pct-used-51-spare-93-smartctl-exporter.json")},
			"/dev/sdh":   {Hang: true},
		},
	})
	got := smartJSON(t, "--smartctl", bin)
	require.Len(t, got, 2, "devices come from --scan-open")
	got = smartJSON(t, "--smartctl", bin, "sda", "/dev/sdh", "--timeout", "300ms")
	require.Len(t, got, 2)
	byDev := map[string]map[string]any{}
	for _, d := range got {
		byDev[d["device"].(string)] = d
	}
	require.EqualValues(t, 304, byDev["sda"]["reallocated_sectors"])
	require.Contains(t, byDev["sdh"]["errors"].([]any)[0], "timed out after 300ms")
	require.Nil(t, byDev["sdh"]["smartctl_exit_status"])

	_, code, err := runCLI(t, "smart", "--smartctl", filepath.Join(t.TempDir(), "smartctl"))
	require.Error(t, err)
	require.Equal(t, 2, code)
	require.Contains(t, err.Error(), "install smartmontools")
}
