package collector

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/internal/kmsg"
)

// fakeTree writes files (path → content; content "->target" makes a
// symlink) under a temporary root, laid out as the real sysfs and procfs
// are for hardware this machine does not have.
func fakeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		if len(c) > 2 && c[:2] == "->" {
			require.NoError(t, os.Symlink(c[2:], full))
			continue
		}
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
	return root
}

func newTestErrorsCollector(t *testing.T, procfs, sysfs string) *errorsCollector {
	t.Helper()
	p := &errorsCollector{paths: hostpath.Paths{ProcFS: procfs, SysFS: sysfs}, logger: slog.New(slog.DiscardHandler), counts: map[errorKey]uint64{}}
	var err error
	p.deviceFilter, err = newDeviceFilter(&config.Config{})
	require.NoError(t, err)
	p.reason = "permission" // the log part is tested as root, on the real /dev/kmsg
	return p
}

// A SATA disk's SCSI counters (sysfs prints them in hex), ext4's recorded
// errors, and the read-only state from the mount table: a filesystem the
// kernel made read-only under a rw mount is 1, one mounted ro on purpose 0.
func TestErrorsFromSysfsAndMounts(t *testing.T) {
	sysfs := fakeTree(t, map[string]string{
		"block/sda": "->../devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda",
		"devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/ioerr_cnt":        "0x1a\n",
		"devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/iotmo_cnt":        "0x2\n",
		"devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/iodone_cnt":       "0x4d2\n",
		"devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda/device": "->../../../0:0:0:0",
		"dev/block/8:1":                       "->../../devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda/sda1",
		"dev/block/8:2":                       "->../../devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda/sda2",
		"fs/ext4/sda1/errors_count":           "3\n",
		"fs/ext4/sda1/last_error_time":        "1795522723\n",
		"fs/ext4/features/metadata_csum_seed": "supported\n",
	})
	procfs := fakeTree(t, map[string]string{
		"self/mountinfo": "45 27 8:1 / /var/lib/etcd rw,relatime - ext4 /dev/sda1 rw,emergency_ro\n" +
			"46 27 8:2 / /srv ro,relatime - ext4 /dev/sda2 ro\n" +
			"47 27 0:22 / /run rw - tmpfs tmpfs rw\n" +
			// FUSE: its fsname is no block device, whatever it looks like.
			"48 27 0:53 / /mnt/fuse rw,nosuid - fuse.diskcanary-testfs /dev/shm/testfs-backing rw,user_id=0\n" +
			"49 27 0:54 / /mnt/fuse2 rw,nosuid - fuse /dev/fuse rw,user_id=0\n",
	})
	s := scrape(t, newTestErrorsCollector(t, procfs, sysfs))
	require.Equal(t, map[string]float64{
		`diskcanary_disk_scsi_io_errors_total{device="sda"}`:                              26,
		`diskcanary_disk_scsi_io_timeouts_total{device="sda"}`:                            2,
		`diskcanary_disk_scsi_io_done_total{device="sda"}`:                                1234,
		`diskcanary_filesystem_recorded_errors{device="sda1",fstype="ext4",kind="error"}`: 3,
		`diskcanary_filesystem_last_error_timestamp_seconds{device="sda1",fstype="ext4"}`: 1795522723,
		`diskcanary_filesystem_readonly{device="sda1",mountpoint="/var/lib/etcd"}`:        1,
		`diskcanary_filesystem_readonly{device="sda2",mountpoint="/srv"}`:                 0,
		"diskcanary_kernel_log_available{}":                                               0,
		`diskcanary_kernel_log_unavailable_info{reason="permission"}`:                     1,
	}, s)
}

// Drivers name a device their own way; every disk error lands on the disk
// names diskcanary_disk_info uses: an NVMe controller on its namespaces,
// an ATA port and a SCSI address on their sd disk.
func TestDiskErrorsJoinTheDisk(t *testing.T) {
	sysfs := fakeTree(t, map[string]string{
		"class/block/nvme0n1": "->../../devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1",
		"class/block/nvme0n2": "->../../devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n2",
		"class/block/sda":     "->../../devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda",
		"class/nvme/nvme0":    "->../../devices/pci0000:00/0000:00:04.0/nvme/nvme0",
		"devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1/size": "1\n",
		"devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n2/size": "1\n",
		"devices/pci0000:00/0000:00:04.0/nvme/nvme0/model":        "QEMU NVMe Ctrl\n",
		"block/sda": "->../devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda",
		"devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda/size": "1\n",
		"class/scsi_device/0:0:0:0": "->../../devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/scsi_device/0:0:0:0",
		"devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/scsi_device/0:0:0:0/device": "->../../../0:0:0:0",
	})
	p := newTestErrorsCollector(t, fakeTree(t, map[string]string{"self/mountinfo": ""}), sysfs)
	for _, line := range []string{
		"nvme nvme0: I/O 123 QID 4 timeout, aborting",
		"ata1: hard resetting link",
		"sd 0:0:0:0: Device offlined - not ready after error recovery",
		"I/O error, dev sda, sector 0 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2",
		"nvme nvme7: Abort status: 0x0", // a controller sysfs does not know keeps its name
	} {
		p.count(kmsg.Record{Level: 3, Text: line}, 0)
	}
	p.count(kmsg.Record{Level: 6, Text: "EXT4-fs (sda1): mounted filesystem"}, 5)
	p.reader, p.reason = &kmsg.Reader{}, ""
	s := scrape(t, p)
	for k := range s {
		if strings.HasPrefix(k, "diskcanary_disk_scsi_") || strings.HasPrefix(k, "diskcanary_filesystem_") {
			delete(s, k) // TestErrorsFromSysfsAndMounts
		}
	}
	require.Equal(t, map[string]float64{
		`diskcanary_disk_errors_total{device="nvme0n1",kind="timeout"}`:   1,
		`diskcanary_disk_errors_total{device="nvme0n2",kind="timeout"}`:   1,
		`diskcanary_disk_errors_total{device="sda",kind="reset"}`:         1,
		`diskcanary_disk_errors_total{device="sda",kind="offline"}`:       1,
		`diskcanary_disk_errors_total{device="sda",kind="io"}`:            1,
		`diskcanary_disk_errors_total{device="nvme7",kind="abort"}`:       1,
		"diskcanary_hung_tasks_total{}":                                   0,
		"diskcanary_kernel_log_available{}":                               1,
		"diskcanary_kernel_log_records_total{}":                           6,
		`diskcanary_kernel_log_lost_records_total{reason="overwritten"}`:  5,
		`diskcanary_kernel_log_lost_records_total{reason="series_limit"}`: 0,
	}, s)
}

// A kernel that logs errors for ever-new device names cannot grow the
// daemon's memory: past 4,096 device/kind pairs the rest are counted as
// lost, not kept.
func TestKernelLogSeriesLimit(t *testing.T) {
	p := newTestErrorsCollector(t, fakeTree(t, map[string]string{"self/mountinfo": ""}), t.TempDir())
	for i := range 4100 {
		p.count(kmsg.Record{Level: 3, Text: fmt.Sprintf("I/O error, dev loop%d, sector 0 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2", i)}, 0)
	}
	p.count(kmsg.Record{Level: 3, Text: "I/O error, dev loop7, sector 8 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2"}, 0)
	p.reader, p.reason = &kmsg.Reader{}, ""
	s := scrape(t, p)
	require.Len(t, p.counts, 4096)
	require.Equal(t, 4.0, s[`diskcanary_kernel_log_lost_records_total{reason="series_limit"}`])
	require.Equal(t, 2.0, s[`diskcanary_disk_errors_total{device="loop7",kind="io"}`], "a known pair still counts")
	require.NotContains(t, s, `diskcanary_disk_errors_total{device="loop4099",kind="io"}`)
}

// Read-only is the filesystem's state: one series per device however many
// times it is mounted, named by its shortest mountpoint.
func TestReadonlyOneSeriesPerFilesystem(t *testing.T) {
	sysfs := fakeTree(t, map[string]string{
		"dev/block/8:1": "->../../devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda/sda1",
	})
	procfs := fakeTree(t, map[string]string{
		"self/mountinfo": "45 27 8:1 / /var/lib/kubelet rw,relatime - ext4 /dev/sda1 rw,emergency_ro\n" +
			"46 27 8:1 /pods/x /var/lib/kubelet/pods/x/volume-subpaths/a ro,relatime - ext4 /dev/sda1 rw,emergency_ro\n" +
			"47 27 8:1 / /mnt/a rw,relatime - ext4 /dev/sda1 rw,emergency_ro\n",
	})
	s := scrape(t, newTestErrorsCollector(t, procfs, sysfs))
	require.Equal(t, 1.0, s[`diskcanary_filesystem_readonly{device="sda1",mountpoint="/mnt/a"}`])
	n := 0
	for k := range s {
		if strings.HasPrefix(k, "diskcanary_filesystem_readonly{") {
			n++
		}
	}
	require.Equal(t, 1, n)
}

// A --path.procfs without a mount table costs the read-only state only,
// said once: the scrape succeeds and the other parts export.
func TestErrorsWithoutMountTable(t *testing.T) {
	var logs strings.Builder
	sysfs := fakeTree(t, map[string]string{"fs/ext4/sda1/errors_count": "0\n"})
	p := newTestErrorsCollector(t, t.TempDir(), sysfs)
	p.logger = slog.New(slog.NewTextHandler(&logs, nil))
	for range 3 {
		s := scrape(t, p)
		require.Contains(t, s, `diskcanary_filesystem_recorded_errors{device="sda1",fstype="ext4",kind="error"}`)
	}
	require.Equal(t, 1, strings.Count(logs.String(), "no mount table"), logs.String())
}
