package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/smart/smarttest"
)

// smartJSONKeys is the `smart --json` object, exactly as docs/contract.md lists it.
var smartJSONKeys = []string{"device", "protocol", "model", "serial", "firmware", "healthy", "temperature_celsius",
	"power_on_seconds", "power_cycles", "wear_used_ratio", "media_errors", "reallocated_sectors", "pending_sectors",
	"available_spare_ratio", "critical_warning", "smartctl_exit_status", "exit_status_bits", "errors"}

func smartJSON(t *testing.T, wantCode int, args ...string) []map[string]any {
	t.Helper()
	out, code, err := runCLI(t, append([]string{"smart", "--json"}, args...)...)
	require.Equal(t, wantCode, code, "%v\n%s", err, out)
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

// smartCorpus is the shared real-disk corpus ($DISKCANARY_SMART_CORPUS, or
// ../shared/fixtures/smartctl next to the repository), as an absolute path.
func smartCorpus(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("DISKCANARY_SMART_CORPUS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "fixtures", "smartctl")
	}
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST.tsv")); err != nil {
		t.Skipf("smartctl corpus not found at %s (set DISKCANARY_SMART_CORPUS): %v", dir, err)
	}
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	return abs
}

// runSmart runs `diskcanary smart ARGS` and returns stdout, stderr (with the
// line main prints for an error) and the exit status.
func runSmart(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"smart"}, args...))
	if err := root.Execute(); err != nil {
		code = 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		fmt.Fprintln(&errOut, "diskcanary:", err)
	}
	return out.String(), errOut.String(), code
}

// smartCorpusExit is the exit status of `smart --from-json FILE` for every
// corpus file (1 failing, 2 unknown, 3 degraded or warned, 0 healthy).
var smartCorpusExit = map[string]int{
	"ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json": 1,
	"nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json":       1,
	"error-open-failed-windows-rc2-v7.0-scrutiny.json":                    2,
	"nvme-info-only-kioxia-v7.2-scrutiny.json":                            2,
	"sat-hdd-attributes-only-v7.0-scrutiny.json":                          2,
	"sat-hdd-info-only-hitachi-v7.4-starosdev.json":                       2,
	"scsi-intel-raid1-volume-windows-rc4-v7.0-scrutiny.json":              2,
	"usb-bridge-autodetect-nosmart-rc4-v7.4-starosdev.json":               2,
	"scan-2sat-v7.3-netdata.json":                                         2,
	"scan-7scsi-v7.0-scrutiny.json":                                       2,
	"scan-megaraid-10dev-v7.1-telegraf.json":                              2,
	"scan-nvme-1dev-v7.0-scrutiny.json":                                   2,
	"scan-sat-nvme-v7.4-telegraf.json":                                    2,
	"megaraid-sat-hdd-disk1-reallocated-387-rc4-v7.1-scrutiny.json":       3,
	"sat-hdd-errorlog-rc64-hc550-v7.1-smartctl-exporter.json":             3,
	"sat-hdd-reallocated-304-smartctl-exporter.json":                      3,
	"scsi-sas-hdd-grown-defects-260-uncorrected-smartctl-exporter.json":   3,
	"ata-hdd-healthy-hgst-hms5c4040-v7.3-libblockdev.json":                0,
	"ata-ssd-samsung850pro-dev-ata-v7.0-scrutiny.json":                    0,
	"megaraid-sat-hdd-disk0-rc4-v7.1-scrutiny.json":                       0,
	"nvme-healthy-corsair-mp510-v7.0-scrutiny.json":                       0,
	"nvme-healthy-firecuda530-v7.3-netdata.json":                          0,
	"nvme-healthy-intel660p-v7.1-scrutiny.json":                           0,
	"nvme-healthy-v7.5-beszel.json":                                       0,
	"nvme-pct-used-51-spare-93-smartctl-exporter.json":                    0,
	"sat-hdd-healthy-wd-red-wd10efrx-v7.3-libblockdev.json":               0,
	"sat-hdd-healthy-wd140edfz-v7.0-scrutiny.json":                        0,
	"sat-health-only-v7.0-scrutiny.json":                                  0,
	"sat-ssd-crucial-m4-xall-v7.4-starosdev.json":                         0,
	"sat-ssd-intel-s3500-v7.3-libblockdev.json":                           0,
	"sat-ssd-kingston-a400-rc4-smartctl-exporter.json":                    0,
	"sat-ssd-samsung860evo-xall-v7.0-scrutiny.json":                       0,
	"sat-ssd-wd-red-sa500-v7.3-netdata.json":                              0,
	"sat-usb-ssd-sandisk-pssd-v7.4-telegraf.json":                         0,
	"scsi-sas-hdd-15k-seagate-st600mp-v7.3-libblockdev.json":              0,
	"scsi-sas-hdd-anonymised-v7.2-telegraf.json":                          0,
	"scsi-sas-hdd-envtemp-v7.4-starosdev.json":                            0,
	"scsi-sas-hdd-redacted-v7.3-netdata.json":                             0,
	"scsi-sas-hdd-seagate-st1200mm-v6.7-scrutiny.json":                    0,
	"scsi-sas-hdd-toshiba-al15seb120-v7.3-libblockdev.json":               0,
	"scsi-sas-hdd-wd4001fyyg-logs-v7.3-libblockdev.json":                  0,
	"scsi-sas-ssd-hgst-husmr3280-v7.3-libblockdev.json":                   0,
}

func TestSmartFromJSONEveryCorpusFile(t *testing.T) {
	dir := smartCorpus(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	devices := 0
	for _, f := range files {
		want, ok := smartCorpusExit[filepath.Base(f)]
		require.True(t, ok, "%s: a new corpus file needs its exit status in smartCorpusExit", f)
		got := smartJSON(t, want, "--from-json", f)
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
	require.Len(t, files, len(smartCorpusExit))
	require.Greater(t, devices, 30)
	// All at once: one array, and the worst verdict (two disks FAILED).
	got := smartJSON(t, 1, append([]string{"--from-json", files[0]}, files[1:]...)...)
	require.Len(t, got, devices)
}

// TestSmartExitStatus: the exit status is the worst verdict (failing, then
// unknown, then degraded), every row names its file, a disk without a
// health verdict is UNKNOWN, and -v shows every reason.
func TestSmartExitStatus(t *testing.T) {
	t.Chdir(smartCorpus(t))
	const header = "FILE                                                   DEVICE  PROTOCOL  MODEL                               HEALTH  TEMP  POWER-ON  WEAR  MEDIA-ERR  REALLOC  PENDING  SPARE  SIGNAL"
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		stdout     []string
		stderrLast string
	}{
		{"healthy, INFO does not count",
			[]string{"--from-json", "sat-hdd-healthy-wd-red-wd10efrx-v7.3-libblockdev.json", "nvme-healthy-firecuda530-v7.3-netdata.json", "sat-ssd-kingston-a400-rc4-smartctl-exporter.json"},
			0, []string{
				header,
				"sat-ssd-kingston-a400-rc4-smartctl-exporter.json       sda     ATA       KINGSTON SA400M8120G                PASSED  38°C  208d      2%    0          -        -        -      INFO: a SMART command failed; some values may be missing",
				"nvme-healthy-firecuda530-v7.3-netdata.json             nvme0   NVMe      Seagate FireCuda 530 ZP4000GM30023  PASSED  39°C  130d      0%    0          -        -        100%   OK",
				"sat-hdd-healthy-wd-red-wd10efrx-v7.3-libblockdev.json  sdz     ATA       WDC WD10EFRX-68PJCN0                PASSED  25°C  157d      -     0          0        0        -      OK",
			}, ""},
		{"degraded and warned",
			[]string{"--from-json", "sat-hdd-reallocated-304-smartctl-exporter.json,sat-hdd-errorlog-rc64-hc550-v7.1-smartctl-exporter.json"},
			3, []string{
				"FILE                                                     DEVICE  PROTOCOL  MODEL                 HEALTH  TEMP  POWER-ON  WEAR  MEDIA-ERR  REALLOC  PENDING  SPARE  SIGNAL",
				"sat-hdd-reallocated-304-smartctl-exporter.json           sda     ATA       ST3500418AS           PASSED  33°C  5.1y      -     0          304      0        -      DEGRADED: 304 reallocated sectors",
				"sat-hdd-errorlog-rc64-hc550-v7.1-smartctl-exporter.json  sdx     ATA       WDC  WUH721816ALE6L4  PASSED  26°C  2.3y      -     0          0        0        -      WARN: device error log has entries",
			}, "diskcanary: smart: 0 failing, 0 unknown, 2 degraded or warned, of 2 disks"},
		{"no health verdict is UNKNOWN and outranks degraded",
			[]string{"--from-json", "sat-hdd-reallocated-304-smartctl-exporter.json", "nvme-info-only-kioxia-v7.2-scrutiny.json", "sat-hdd-attributes-only-v7.0-scrutiny.json"},
			2, []string{
				"FILE                                            DEVICE  PROTOCOL  MODEL         HEALTH   TEMP  POWER-ON  WEAR  MEDIA-ERR  REALLOC  PENDING  SPARE  SIGNAL",
				"nvme-info-only-kioxia-v7.2-scrutiny.json        nvme4   NVMe      KCD61LUL3T84  UNKNOWN  -     -         -     -          -        -        -      UNKNOWN: no SMART health verdict",
				"sat-hdd-attributes-only-v7.0-scrutiny.json      sdc     ATA       -             UNKNOWN  29°C  114d      -     0          0        0        -      UNKNOWN: no SMART health verdict",
				"sat-hdd-reallocated-304-smartctl-exporter.json  sda     ATA       ST3500418AS   PASSED   33°C  5.1y      -     0          304      0        -      DEGRADED: 304 reallocated sectors",
			}, "diskcanary: smart: 0 failing, 2 unknown, 1 degraded or warned, of 3 disks"},
		{"failing outranks could-not-read; two sda told apart by file",
			[]string{"--from-json", "sat-hdd-reallocated-304-smartctl-exporter.json", "error-open-failed-windows-rc2-v7.0-scrutiny.json", "nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json"},
			1, []string{
				"FILE                                                           DEVICE  PROTOCOL  MODEL                       HEALTH   TEMP  POWER-ON  WEAR  MEDIA-ERR  REALLOC  PENDING  SPARE  SIGNAL",
				"nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json  nvme0   NVMe      SAMSUNG MZWLL3T2HAJQ-00005  FAILED   40°C  2.1y      0%    0          -        -        100%   FAILING: SMART health check FAILED (+1 more, -v lists them)",
				`error-open-failed-windows-rc2-v7.0-scrutiny.json               sda     -         -                           UNKNOWN  -     -         -     -          -        -        -      UNKNOWN: could not read: Smartctl open device: /dev/sda failed: \\.\PhysicalDrive0: Open failed, Error=5`,
				"sat-hdd-reallocated-304-smartctl-exporter.json                 sda     ATA       ST3500418AS                 PASSED   33°C  5.1y      -     0          304      0        -      DEGRADED: 304 reallocated sectors",
			}, "diskcanary: smart: 1 failing, 1 unknown, 1 degraded or warned, of 3 disks"},
		{"-v lists every reason",
			[]string{"-v", "--from-json", "ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json"},
			1, []string{
				"FILE                                                                 DEVICE  PROTOCOL  MODEL                    HEALTH  TEMP  POWER-ON  WEAR  MEDIA-ERR  REALLOC  PENDING  SPARE  SIGNAL",
				"ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json  sdc     ATA       Hitachi HDS721050DLE630  FAILED  25°C  7.5y      -     0          1975     8        -      FAILING: SMART health check FAILED; FAILING: pre-failure attribute at or below threshold; DEGRADED: 8 pending sectors; DEGRADED: 1975 reallocated sectors; DEGRADED: self-test log has failed tests; WARN: device error log has entries",
			}, "diskcanary: smart: 1 failing, 0 unknown, 0 degraded or warned, of 1 disk"},
		{"only --scan output: no disk",
			[]string{"--from-json", "scan-2sat-v7.3-netdata.json"},
			2, nil, "diskcanary: smart: no SMART data in the given files (smartctl --scan output only)"},
		{"an unreadable file among readable ones",
			[]string{"--from-json", "nosuch.json,sat-hdd-healthy-wd-red-wd10efrx-v7.3-libblockdev.json"},
			2, []string{
				"FILE                                                   DEVICE  PROTOCOL  MODEL                 HEALTH  TEMP  POWER-ON  WEAR  MEDIA-ERR  REALLOC  PENDING  SPARE  SIGNAL",
				"sat-hdd-healthy-wd-red-wd10efrx-v7.3-libblockdev.json  sdz     ATA       WDC WD10EFRX-68PJCN0  PASSED  25°C  157d      -     0          0        0        -      OK",
			}, "diskcanary: smart: 0 failing, 0 unknown, 0 degraded or warned, of 1 disk; 1 file unreadable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runSmart(t, tc.args...)
			require.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.Equal(t, tc.stdout, lines(stdout))
			errLines := lines(stderr)
			if tc.stderrLast == "" {
				require.Empty(t, errLines)
			} else {
				require.Equal(t, tc.stderrLast, errLines[len(errLines)-1])
			}
		})
	}
}

func lines(s string) []string {
	if s = strings.TrimRight(s, "\n"); s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestSmartUsageExit64: a usage error has its own status, never a verdict's
// (cobra's default 1 would read as "a disk is failing").
func TestSmartUsageExit64(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--bogus"}, "diskcanary: unknown flag: --bogus"},
		{[]string{"--json=maybe"}, `diskcanary: invalid argument "maybe" for "--json" flag: strconv.ParseBool: parsing "maybe": invalid syntax`},
		// The limits are the config file's smart section's (once looser here: any
		// positive timeout, any concurrency).
		{[]string{"--nocheck", "always"}, `diskcanary: --nocheck: "always" is not one of never, sleep, standby, idle`},
		{[]string{"--concurrency", "0"}, "diskcanary: --concurrency: 0 is below the minimum of 1"},
		{[]string{"--concurrency", "65"}, "diskcanary: --concurrency: 65 is above the maximum of 64"},
		{[]string{"--timeout", "0s"}, "diskcanary: --timeout: 0s is below the minimum of 1s"},
		{[]string{"--timeout", "11m"}, "diskcanary: --timeout: 11m is above the maximum of 10m"},
		{[]string{"--smartctl", "-x"}, `diskcanary: --smartctl: "-x" starts with "-"`},
		{[]string{"--from-json", "x.json", "-d", "sat"}, "diskcanary: --device-type is for live reads; --from-json files already hold smartctl's output"},
		// A DEVICE obeys smart.devices' rules (once passed to smartctl as given).
		{[]string{"/etc/passwd"}, `diskcanary: DEVICE "/etc/passwd": name: "/etc/passwd" is not a /dev path`},
		{[]string{"../etc/passwd"}, `diskcanary: DEVICE "../etc/passwd": name: "/dev/../etc/passwd" contains ".."; name the path directly`},
		{[]string{"sda;sat -T permissive"}, `diskcanary: DEVICE "sda;sat -T permissive": type: "sat -T permissive" is not a smartctl -d type (sat, nvme, megaraid,N, ...)`},
		{[]string{"-d", "nvme,0xffffffff;x", "sda"}, `diskcanary: --device-type: "nvme,0xffffffff;x" is not a smartctl -d type (sat, nvme, megaraid,N, ...)`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := runSmart(t, tc.args...)
			require.Equal(t, 64, code)
			require.Empty(t, stdout)
			require.Equal(t, []string{tc.msg}, lines(stderr))
		})
	}
}

// TestSmartHelpShowsConfigDefaults: the CLI's live-read flags default to the
// daemon's SMART defaults (the CLI once said concurrency 4 to the daemon's 2).
func TestSmartHelpShowsConfigDefaults(t *testing.T) {
	stdout, stderr, code := runSmart(t, "--help")
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{
		`--smartctl string      the smartctl binary (default "smartctl")`,
		`--timeout duration     kill a smartctl run after this long (default 30s)`,
		`--nocheck string       smartctl --nocheck: never, sleep, standby or idle (default "standby")`,
		`--concurrency int      smartctl runs at once (default 2)`,
	} {
		require.Contains(t, stdout, want)
	}
}

func TestSmartJSONNullNotZero(t *testing.T) {
	got := smartJSON(t, 0, "--from-json", smarttest.Fixture("nvme-pct-used-51-spare-93-smartctl-exporter.json"))
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
	t.Chdir(filepath.Dir(smarttest.Fixture("synth-ata-standby-v7.3.json")))
	stdout, _, code := runSmart(t, "--from-json",
		"nvme-pct-used-51-spare-93-smartctl-exporter.json,sat-hdd-reallocated-304-smartctl-exporter.json,"+
			"nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json,synth-ata-standby-v7.3.json")
	require.Equal(t, 1, code)
	// The standby disk reports nothing: dashes, never zeros, and no verdict.
	require.Equal(t, []string{
		"FILE                                                           DEVICE  PROTOCOL  MODEL                       HEALTH   TEMP  POWER-ON  WEAR  MEDIA-ERR  REALLOC  PENDING  SPARE  SIGNAL",
		"nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json  nvme0   NVMe      SAMSUNG MZWLL3T2HAJQ-00005  FAILED   40°C  2.1y      0%    0          -        -        100%   FAILING: SMART health check FAILED (+1 more, -v lists them)",
		"synth-ata-standby-v7.3.json                                    sdb     ATA       WDC WD40EFRX-68N32N0        UNKNOWN  -     -         -     -          -        -        -      UNKNOWN: in standby, left asleep: no health verdict (--nocheck never reads it)",
		"sat-hdd-reallocated-304-smartctl-exporter.json                 sda     ATA       ST3500418AS                 PASSED   33°C  5.1y      -     0          304      0        -      DEGRADED: 304 reallocated sectors",
		"nvme-pct-used-51-spare-93-smartctl-exporter.json               nvme0   NVMe      INTEL SSDPEDMD800G4         PASSED   30°C  6.2y      51%   0          -        -        93%    OK",
	}, lines(stdout))
}

func TestSmartLiveWithFakeSmartctl(t *testing.T) {
	bin := smarttest.Install(t, smarttest.FakeConfig{
		Scan: []map[string]string{{"name": "/dev/sda", "type": "sat", "protocol": "ATA"}, {"name": "/dev/nvme0", "type": "nvme", "protocol": "NVMe"}},
		Devices: map[string]smarttest.FakeDevice{
			"/dev/sda":   {Fixture: smarttest.Fixture("sat-hdd-reallocated-304-smartctl-exporter.json")},
			"/dev/nvme0": {Fixture: smarttest.Fixture("nvme-pct-used-51-spare-93-smartctl-exporter.json")},
			"/dev/nvme1": {Fixture: smarttest.Fixture("nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json")},
			"/dev/sdh":   {Hang: true},
		},
	})
	got := smartJSON(t, 3, "--smartctl", bin)
	require.Len(t, got, 2, "devices come from --scan-open")
	got = smartJSON(t, 2, "--smartctl", bin, "sda", "/dev/sdh", "--timeout", "1s")
	require.Len(t, got, 2)
	byDev := map[string]map[string]any{}
	for _, d := range got {
		byDev[d["device"].(string)] = d
	}
	require.EqualValues(t, 304, byDev["sda"]["reallocated_sectors"])
	require.Contains(t, byDev["sdh"]["errors"].([]any)[0], "timed out after 1s")
	require.Nil(t, byDev["sdh"]["smartctl_exit_status"])

	_, code, err := runCLI(t, "smart", "--smartctl", filepath.Join(t.TempDir(), "smartctl"))
	require.Error(t, err)
	require.Equal(t, 2, code)
	require.Contains(t, err.Error(), "install smartmontools")
}

// TestSmartLiveExitStatus: what `smart vda` on a disk smartctl cannot open
// prints and returns, live, through a fake smartctl replaying corpus files.
func TestSmartLiveExitStatus(t *testing.T) {
	bin := smarttest.Install(t, smarttest.FakeConfig{
		Devices: map[string]smarttest.FakeDevice{
			"/dev/sda":   {Fixture: smarttest.Fixture("sat-hdd-reallocated-304-smartctl-exporter.json")},
			"/dev/nvme0": {Fixture: smarttest.Fixture("nvme-pct-used-51-spare-93-smartctl-exporter.json")},
			"/dev/nvme1": {Fixture: smarttest.Fixture("nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json")},
			// /dev/vda is unknown to the fake: "No such device", exit 2.
		},
	})
	const header = "DEVICE  PROTOCOL  MODEL  HEALTH   TEMP  POWER-ON  WEAR  MEDIA-ERR  REALLOC  PENDING  SPARE  SIGNAL"
	for _, tc := range []struct {
		args   []string
		code   int
		stdout []string
	}{
		{[]string{"nvme0"}, 0, []string{
			"DEVICE  PROTOCOL  MODEL                HEALTH  TEMP  POWER-ON  WEAR  MEDIA-ERR  REALLOC  PENDING  SPARE  SIGNAL",
			"nvme0   NVMe      INTEL SSDPEDMD800G4  PASSED  30°C  6.2y      51%   0          -        -        93%    OK",
		}},
		{[]string{"vda"}, 2, []string{
			header,
			"vda     -         -      UNKNOWN  -     -         -     -          -        -        -      UNKNOWN: could not read: /dev/vda: No such device",
		}},
		{[]string{"sda"}, 3, []string{
			"DEVICE  PROTOCOL  MODEL        HEALTH  TEMP  POWER-ON  WEAR  MEDIA-ERR  REALLOC  PENDING  SPARE  SIGNAL",
			"sda     ATA       ST3500418AS  PASSED  33°C  5.1y      -     0          304      0        -      DEGRADED: 304 reallocated sectors",
		}},
		{[]string{"sda", "vda"}, 2, []string{
			"DEVICE  PROTOCOL  MODEL        HEALTH   TEMP  POWER-ON  WEAR  MEDIA-ERR  REALLOC  PENDING  SPARE  SIGNAL",
			"vda     -         -            UNKNOWN  -     -         -     -          -        -        -      UNKNOWN: could not read: /dev/vda: No such device",
			"sda     ATA       ST3500418AS  PASSED   33°C  5.1y      -     0          304      0        -      DEGRADED: 304 reallocated sectors",
		}},
		{[]string{"-v", "sda", "vda", "nvme1"}, 1, []string{
			"DEVICE  PROTOCOL  MODEL                       HEALTH   TEMP  POWER-ON  WEAR  MEDIA-ERR  REALLOC  PENDING  SPARE  SIGNAL",
			"nvme1   NVMe      SAMSUNG MZWLL3T2HAJQ-00005  FAILED   40°C  2.1y      0%    0          -        -        100%   FAILING: SMART health check FAILED; FAILING: NVMe critical warning: volatile_memory_backup_failed",
			"vda     -         -                           UNKNOWN  -     -         -     -          -        -        -      UNKNOWN: could not read: /dev/vda: No such device",
			"sda     ATA       ST3500418AS                 PASSED   33°C  5.1y      -     0          304      0        -      DEGRADED: 304 reallocated sectors",
		}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := runSmart(t, append([]string{"--smartctl", bin}, tc.args...)...)
			require.Equal(t, tc.code, code, stderr)
			require.Equal(t, tc.stdout, lines(stdout))
		})
	}
}
