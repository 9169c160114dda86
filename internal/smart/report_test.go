package smart

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReportSignalsOnCorpus: every finding about a real disk, worst first,
// as `diskcanary smart -v` prints it. A disk without a health verdict is
// UNKNOWN, never OK; every smartctl error is listed, not only the first.
func TestReportSignalsOnCorpus(t *testing.T) {
	dir := corpusDir(t)
	for _, tc := range []struct {
		file  string
		worst Severity
		want  []string
	}{
		{"sat-hdd-healthy-wd-red-wd10efrx-v7.3-libblockdev.json", SeverityOK, nil},
		{"sat-ssd-kingston-a400-rc4-smartctl-exporter.json", SeverityInfo, []string{
			"INFO: a SMART command failed; some values may be missing"}},
		{"sat-hdd-errorlog-rc64-hc550-v7.1-smartctl-exporter.json", SeverityWarning, []string{
			"WARN: device error log has entries"}},
		{"scsi-sas-hdd-grown-defects-260-uncorrected-smartctl-exporter.json", SeverityDegraded, []string{
			"DEGRADED: 536 media errors",
			"DEGRADED: 260 reallocated sectors"}},
		{"nvme-info-only-kioxia-v7.2-scrutiny.json", SeverityUnknown, []string{
			"UNKNOWN: no SMART health verdict"}},
		{"sat-hdd-attributes-only-v7.0-scrutiny.json", SeverityUnknown, []string{
			"UNKNOWN: no SMART health verdict"}},
		{"usb-bridge-autodetect-nosmart-rc4-v7.4-starosdev.json", SeverityUnknown, []string{
			"UNKNOWN: no SMART health verdict: Device does not support SMART",
			"INFO: a SMART command failed; some values may be missing"}},
		{"error-open-failed-windows-rc2-v7.0-scrutiny.json", SeverityUnknown, []string{
			`UNKNOWN: could not read: Smartctl open device: /dev/sda failed: \\.\PhysicalDrive0: Open failed, Error=5`}},
		{"nvme-critical-warning-smart-failed-rc8-smartctl-exporter.json", SeverityFailing, []string{
			"FAILING: SMART health check FAILED",
			"FAILING: NVMe critical warning: volatile_memory_backup_failed"}},
		{"ata-hdd-failing-reallocated-selftest-usbjmicron-rc216-scrutiny.json", SeverityFailing, []string{
			"FAILING: SMART health check FAILED",
			"FAILING: pre-failure attribute at or below threshold",
			"DEGRADED: 8 pending sectors",
			"DEGRADED: 1975 reallocated sectors",
			"DEGRADED: self-test log has failed tests",
			"WARN: device error log has entries"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, tc.file))
			require.NoError(t, err)
			r, err := Parse(data)
			require.NoError(t, err)
			st := StateFromResult(r)
			rep := NewReport(&st)
			var got []string
			for _, s := range rep.Signals() {
				got = append(got, s.String())
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.worst, rep.Worst())
		})
	}
}

// TestReportEveryErrorListed: a run that could not read the disk says why
// in its first line, and no later error is dropped.
func TestReportEveryErrorListed(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   DeviceState
		want []string
	}{
		{"timed out, two errors", DeviceState{Label: "sdh", ExitStatus: -1,
			Errors: []string{"smartctl timed out after 300ms", "process group killed"}}, []string{
			"UNKNOWN: could not read: smartctl timed out after 300ms",
			"INFO: process group killed"}},
		{"open failed without a message", DeviceState{Label: "sdq", ExitStatus: ExitOpenFailed}, []string{
			"UNKNOWN: could not read: smartctl exit status 2 (device_open_failed)"}},
		{"asleep, never read", DeviceState{Label: "sdb", ExitStatus: ExitOpenFailed, Standby: true}, []string{
			"UNKNOWN: in standby, left asleep: no health verdict (--nocheck never reads it)"}},
		{"asleep, read before", DeviceState{Label: "sdb", ExitStatus: ExitOpenFailed, Standby: true,
			Result: &Result{Health: Health{Healthy: ptr(true)}}}, []string{
			"INFO: in standby, left asleep; values are from its last read"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := NewReport(&tc.st)
			var got []string
			for _, s := range rep.Signals() {
				got = append(got, s.String())
			}
			require.Equal(t, tc.want, got)
		})
	}
}
