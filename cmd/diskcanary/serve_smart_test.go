package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/smart/smarttest"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// TestServeReadsEverySelfTestLog: the daemon, given a fake smartctl that
// records its arguments, asks for the self-test log on every read of
// every disk it discovers, ATA, NVMe and SCSI alike. smartctl sets exit
// bit 7 only while it reads that log (the fake, like smartctl, prints
// neither the log nor the bit to a caller that did not ask), so the
// self-test series and the bit below are live only because it asks.
func TestServeReadsEverySelfTestLog(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs.log")
	disks := map[string]string{
		// ATA: the newest test passed, an older one failed at LBA
		// 104870168; exit status 216 has bit 7.
		"/dev/sda": "ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json",
		"/dev/sdb": "sat-hdd-reallocated-304-smartctl-exporter.json",
		// NVMe, smartctl 7.5: an empty log whose header says no test runs.
		"/dev/nvme0": "nvme-healthy-v7.5-beszel.json",
		// SCSI: scsi_self_test_0, a completed test 4,662 power-on hours ago.
		"/dev/sdc": "scsi-sas-hdd-15k-seagate-st600mp-v7.3-libblockdev.json",
	}
	fake := smarttest.FakeConfig{Log: runs, Devices: map[string]smarttest.FakeDevice{},
		Scan: []map[string]string{
			{"name": "/dev/sda", "type": "sat", "protocol": "ATA"},
			{"name": "/dev/sdb", "type": "sat", "protocol": "ATA"},
			{"name": "/dev/nvme0", "type": "nvme", "protocol": "NVMe"},
			{"name": "/dev/sdc", "type": "scsi", "protocol": "SCSI"},
		}}
	for name, file := range disks {
		fake.Devices[name] = smarttest.FakeDevice{Fixture: smarttest.Fixture(file)}
	}
	bin := smarttest.Install(t, fake)
	cfg := filepath.Join(t.TempDir(), "diskcanary.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf("probes: {enabled: false}\nsmart:\n  smartctl: %s\n  interval: 10s\n", bin)), 0o600))
	addr := testkit.FreeAddr(t)
	testkit.StartCmd(t, diskcanaryCmd(t, nil, "serve", "--config.file", cfg, "--web.listen-address", addr,
		"--path.sysfs", t.TempDir(), "--no-collector.diskstats", "--no-collector.blocklatency", "--no-collector.errors", "--no-collector.pressure"))

	want := []string{
		`diskcanary_smartctl_exit_status_bit{bit="self_test_log_has_errors",device="sda"} 1`,
		`diskcanary_smartctl_exit_status{device="sda"} 216`,
		`diskcanary_smart_selftest_last_result{device="sda",result="passed",type="Short offline"} 1`,
		`diskcanary_smart_selftest_last_result{device="sda",result="failed",type="Short offline"} 0`,
		`diskcanary_smart_selftest_last_age_seconds{device="sda"} 50400`,
		`diskcanary_smart_selftest_failed_lba{device="sda"} 1.04870168e+08`,
		`diskcanary_smartctl_exit_status_bit{bit="self_test_log_has_errors",device="sdb"} 0`,
		`diskcanary_smart_selftest_in_progress{device="nvme0"} 0`,
		`diskcanary_smart_selftest_last_result{device="sdc",result="passed",type="Reserved(7)"} 1`,
		`diskcanary_smart_selftest_last_age_seconds{device="sdc"} 1.67832e+07`,
	}
	var metrics string
	var missing []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, body, err := get("http://" + addr + "/metrics")
		if err == nil && code == 200 {
			metrics, missing = body, nil
			for _, w := range want {
				if !strings.Contains(body, w+"\n") {
					missing = append(missing, w)
				}
			}
			if len(missing) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s, /metrics still lacks:\n%s\nits SMART series:\n%s", strings.Join(missing, "\n"), smartLines(metrics))
		}
	}

	// Every read of every disk asked for the log (a self-test start would
	// be --test=KIND; scheduled tests are off by default).
	data, err := os.ReadFile(runs)
	require.NoError(t, err)
	read := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "start" {
			continue
		}
		args := f[3:]
		require.Contains(t, args, "--log=selftest", "%s read without its self-test log: %s", f[1], line)
		require.Equal(t, f[1], args[len(args)-1], line)
		read[f[1]]++
	}
	var names []string
	for name := range read {
		names = append(names, name)
	}
	sort.Strings(names)
	require.Equal(t, []string{"/dev/nvme0", "/dev/sda", "/dev/sdb", "/dev/sdc"}, names, "every scanned disk was read:\n%s", metrics)
}

// smartLines keeps the SMART series of an exposition, for failure messages.
func smartLines(exposition string) string {
	var keep []string
	for _, l := range strings.Split(exposition, "\n") {
		if strings.HasPrefix(l, "diskcanary_smart") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
