package kmsg

import (
	"fmt"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	// As read(2) returns it on Linux 6.18: a dev_printk record with its
	// dictionary.
	r, err := Parse([]byte("3,1234,5678901,-;sd 0:0:0:0: [sda] tag#0 timing out command, waited 180s\n SUBSYSTEM=scsi\n DEVICE=+scsi:0:0:0:0\n"))
	require.NoError(t, err)
	require.Equal(t, Record{Facility: 0, Level: 3, Seq: 1234, Usec: 5678901,
		Text: "sd 0:0:0:0: [sda] tag#0 timing out command, waited 180s", Subsystem: "scsi", Device: "+scsi:0:0:0:0"}, r)

	// A userspace record (facility 1) with the caller field of newer kernels.
	r, err = Parse([]byte("14,77,99,-,caller=T123;hello\n"))
	require.NoError(t, err)
	require.Equal(t, Record{Facility: 1, Level: 6, Seq: 77, Usec: 99, Text: "hello"}, r)

	// No flag at all.
	r, err = Parse([]byte("6,5,7;x"))
	require.NoError(t, err)
	require.Equal(t, uint64(5), r.Seq)
	require.Equal(t, "x", r.Text)

	for _, bad := range []string{"", "no semicolon", "3,1;x", "a,1,2,-;x", "3,-1,2,-;x", "3,1,2x,-;x"} {
		_, err := Parse([]byte(bad))
		require.ErrorIs(t, err, ErrMalformed, "%q", bad)
	}
}

// Recorded kernel lines, each with the kernel and source it comes from,
// and what it must count as.
func TestClassify(t *testing.T) {
	cases := []struct {
		source string
		level  int
		text   string
		want   Event // zero: not counted
	}{
		// block/blk-core.c blk_print_req_error, v5.18+ (seen on this machine's 6.18 through a FUSE-backed loop device)
		{"6.18 blk_print_req_error", 3, "I/O error, dev loop3, sector 0 op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 2",
			Event{Scope: Disk, Device: "loop3", Kind: "io", Count: 1}},
		{"6.1 blk_print_req_error", 3, "critical medium error, dev sdb, sector 4048 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2",
			Event{Scope: Disk, Device: "sdb", Kind: "medium", Count: 1}},
		{"6.8 blk_print_req_error, v6.5 name", 3, "reservation conflict error, dev sdc, sector 0 op 0x1:(WRITE) flags 0x0 phys_seg 1 prio class 0",
			Event{Scope: Disk, Device: "sdc", Kind: "reservation", Count: 1}},
		{"6.1 timeout", 3, "timeout error, dev nvme0n1, sector 1000 op 0x1:(WRITE) flags 0x8800 phys_seg 1 prio class 2",
			Event{Scope: Disk, Device: "nvme0n1", Kind: "timeout", Count: 1}},
		// v5.3–v5.17 print_req_error with its caller as prefix
		{"5.10 blk_update_request", 3, "blk_update_request: I/O error, dev sda, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0",
			Event{Scope: Disk, Device: "sda", Kind: "io", Count: 1}},
		{"5.4 blk_update_request transport", 3, "blk_update_request: recoverable transport error, dev sdd, sector 80 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0",
			Event{Scope: Disk, Device: "sdd", Kind: "transport", Count: 1}},
		// v4.14–v5.2
		{"4.19 print_req_error", 3, "print_req_error: critical target error, dev sde, sector 123456",
			Event{Scope: Disk, Device: "sde", Kind: "target", Count: 1}},
		{"4.19 print_req_error nexus", 3, "print_req_error: critical nexus error, dev sde, sector 1",
			Event{Scope: Disk, Device: "sde", Kind: "reservation", Count: 1}},
		// up to v4.13
		{"3.10 blk_update_request", 3, "blk_update_request: I/O error, dev sdf, sector 16",
			Event{Scope: Disk, Device: "sdf", Kind: "io", Count: 1}},
		{"unknown status", 3, "I/O error, dev sdf, sector 16",
			Event{Scope: Disk, Device: "sdf", Kind: "io", Count: 1}},
		{"a status no kernel has yet", 3, "quantum error, dev sdf, sector 16 op 0x0:(READ)",
			Event{Scope: Disk, Device: "sdf", Kind: "other", Count: 1}},
		// fs/buffer.c
		{"6.18 buffer_io_error", 3, "Buffer I/O error on dev loop3, logical block 0, async page read",
			Event{Scope: Disk, Device: "loop3", Kind: "buffer_io", Count: 1}},
		{"5.15 end_buffer_async_write", 3, "Buffer I/O error on dev sda1, logical block 1234, lost async page write",
			Event{Scope: Disk, Device: "sda1", Kind: "lost_write", Count: 1}},
		// drivers/nvme/host/pci.c nvme_timeout
		{"5.15 nvme_timeout", 4, "nvme nvme0: I/O 123 QID 4 timeout, aborting",
			Event{Scope: Disk, Device: "nvme0", Kind: "timeout", Count: 1}},
		{"6.8 nvme_timeout", 4, "nvme nvme1: I/O tag 123 (007b) opcode 0x1 (Write) QID 4 timeout, aborting req_op:WRITE(1) size:4096",
			Event{Scope: Disk, Device: "nvme1", Kind: "timeout", Count: 1}},
		{"5.4 nvme_timeout reset", 4, "nvme nvme0: I/O 5 QID 0 timeout, reset controller",
			Event{Scope: Disk, Device: "nvme0", Kind: "timeout", Count: 1}},
		{"5.10 nvme completion polled", 4, "nvme nvme0: I/O 9 QID 2 timeout, completion polled",
			Event{Scope: Disk, Device: "nvme0", Kind: "timeout_polled", Count: 1}},
		{"5.15 abort_endio", 4, "nvme nvme0: Abort status: 0x0",
			Event{Scope: Disk, Device: "nvme0", Kind: "abort", Count: 1}},
		{"5.15 controller down", 4, "nvme nvme0: controller is down; will reset: CSTS=0x3, PCI_STATUS=0x10",
			Event{Scope: Disk, Device: "nvme0", Kind: "reset", Count: 1}},
		{"6.1 reset failure", 4, "nvme nvme0: Disabling device after reset failure: -19",
			Event{Scope: Disk, Device: "nvme0", Kind: "reset", Count: 1}},
		// drivers/nvme/host/core.c nvme_log_error: detail of a request the block layer reports
		{"6.1 nvme_log_error", 3, "nvme0n1: I/O Cmd(0x2) @ LBA 0, 8 blocks, I/O Error (sct 0x2 / sc 0x81) MORE", Event{}},
		// drivers/scsi
		{"5.15 scsi timing out", 3, "sd 2:0:0:0: [sdb] tag#12 timing out command, waited 180s",
			Event{Scope: Disk, Device: "sdb", Kind: "timeout", Count: 1}},
		{"4.19 scsi offlined", 3, "sd 0:0:0:0: Device offlined - not ready after error recovery",
			Event{Scope: Disk, Device: "0:0:0:0", Kind: "offline", Count: 1}},
		{"5.10 scsi rejecting", 3, "sd 0:0:0:0: rejecting I/O to offline device",
			Event{Scope: Disk, Device: "0:0:0:0", Kind: "offline", Count: 1}},
		{"6.1 scsi reset", 4, "sd 1:0:0:0: Power-on or device reset occurred",
			Event{Scope: Disk, Device: "1:0:0:0", Kind: "reset", Count: 1}},
		{"6.1 sense detail", 6, "sd 0:0:0:0: [sda] tag#0 Sense Key : Medium Error [current]", Event{}},
		// drivers/ata/libata-eh.c
		{"5.15 ata hard reset", 6, "ata1: hard resetting link",
			Event{Scope: Disk, Device: "ata1", Kind: "reset", Count: 1}},
		{"4.19 ata link down", 6, "ata3: SATA link down (SStatus 0 SControl 300)",
			Event{Scope: Disk, Device: "ata3", Kind: "link_down", Count: 1}},
		{"6.1 ata exception", 3, "ata1.00: exception Emask 0x0 SAct 0x20000 SErr 0x0 action 0x0",
			Event{Scope: Disk, Device: "ata1", Kind: "exception", Count: 1}},
		{"5.4 ata speed", 4, "ata2: limiting SATA link speed to 1.5 Gbps",
			Event{Scope: Disk, Device: "ata2", Kind: "link_degraded", Count: 1}},
		// fs/ext4/super.c
		{"6.18 __ext4_error via trigger_fs_error", 2, "EXT4-fs error (device loop4): trigger_test_error:129: diskcanary test",
			Event{Scope: Filesystem, Device: "loop4", FSType: "ext4", Kind: "error", Count: 1}},
		{"5.10 __ext4_std_error", 2, "EXT4-fs error (device sda1) in ext4_reserve_inode_write:5751: IO failure",
			Event{Scope: Filesystem, Device: "sda1", FSType: "ext4", Kind: "error", Count: 1}},
		{"6.18 remount ro", 2, "EXT4-fs (loop4): Remounting filesystem read-only",
			Event{Scope: Filesystem, Device: "loop4", FSType: "ext4", Kind: "remount_ro", Count: 1}},
		{"4.19 superblock I/O", 3, "EXT4-fs (dm-0): I/O error while writing superblock",
			Event{Scope: Filesystem, Device: "dm-0", FSType: "ext4", Kind: "io", Count: 1}},
		{"5.15 ext4 warning", 4, "EXT4-fs warning (device sda1): ext4_dx_add_entry:2512: Directory index full!",
			Event{Scope: Filesystem, Device: "sda1", FSType: "ext4", Kind: "warning", Count: 1}},
		{"5.15 ext4 shutdown", 6, "EXT4-fs (sda1): shut down requested (2)",
			Event{Scope: Filesystem, Device: "sda1", FSType: "ext4", Kind: "shutdown", Count: 1}},
		{"5.15 ext4 data loss", 2, "EXT4-fs (sdb1): failed to convert unwritten extents to written extents -- potential data loss!  (inode 12, error -5)",
			Event{Scope: Filesystem, Device: "sdb1", FSType: "ext4", Kind: "error", Count: 1}},
		{"6.18 ext4 mount notice", 6, "EXT4-fs (loop0): mounted filesystem 2c8b7d1c-0e5e-4c5a-9c4b-4a4f7d0c8f11 r/w with ordered data mode. Quota mode: none.", Event{}},
		// fs/jbd2
		{"6.18 journal abort", 3, "Aborting journal on device loop4-8.",
			Event{Scope: Filesystem, Device: "loop4", FSType: "ext4", Kind: "journal_abort", Count: 1}},
		{"5.10 jbd2 superblock", 3, "JBD2: Error -5 detected when updating journal superblock for dm-0-8.",
			Event{Scope: Filesystem, Device: "dm-0", FSType: "ext4", Kind: "io", Count: 1}},
		// fs/xfs
		{"5.15 xfs metadata io", 1, `XFS (sda1): metadata I/O error in "xfs_buf_ioend+0x1a5/0x3c0 [xfs]" at daddr 0x10 len 8 error 5`,
			Event{Scope: Filesystem, Device: "sda1", FSType: "xfs", Kind: "io", Count: 1}},
		{"6.1 xfs log shutdown", 1, "XFS (dm-3): Log I/O Error (0x2) detected at xlog_ioend_work+0x6e/0x70 [xfs] (fs/xfs/xfs_log.c:1378).  Shutting down filesystem.",
			Event{Scope: Filesystem, Device: "dm-3", FSType: "xfs", Kind: "shutdown", Count: 1}},
		{"4.19 xfs force shutdown", 1, "XFS (sdb): xfs_do_force_shutdown(0x2) called from line 1196 of file fs/xfs/xfs_log.c.  Return address = 00000000a7e25fc1",
			Event{Scope: Filesystem, Device: "sdb", FSType: "xfs", Kind: "shutdown", Count: 1}},
		{"6.6 xfs shut down", 1, "XFS (sdb): Filesystem has been shut down due to log error (0x2).",
			Event{Scope: Filesystem, Device: "sdb", FSType: "xfs", Kind: "shutdown", Count: 1}},
		{"5.15 xfs corruption", 1, "XFS (sdb1): Corruption detected. Unmount and run xfs_repair",
			Event{Scope: Filesystem, Device: "sdb1", FSType: "xfs", Kind: "corruption", Count: 1}},
		{"6.1 xfs please unmount", 1, "XFS (sdb): Please unmount the filesystem and rectify the problem(s)", Event{}},
		{"6.1 xfs mount", 5, "XFS (sdb): Mounting V5 Filesystem", Event{}},
		// fs/btrfs
		{"6.1 btrfs dev stats", 3, "BTRFS error (device loop5): bdev /dev/loop5 errs: wr 1, rd 0, flush 0, corrupt 0, gen 0",
			Event{Scope: Filesystem, Device: "loop5", FSType: "btrfs", Kind: "io", Count: 1}},
		{"6.8 btrfs state", 6, "BTRFS info (device loop5 state EA): forced readonly",
			Event{Scope: Filesystem, Device: "loop5", FSType: "btrfs", Kind: "remount_ro", Count: 1}},
		{"6.8 btrfs transaction", 3, "BTRFS error (device loop5 state A): Transaction aborted (error -5)",
			Event{Scope: Filesystem, Device: "loop5", FSType: "btrfs", Kind: "error", Count: 1}},
		{"5.15 btrfs corrupt leaf", 2, "BTRFS critical (device sda): corrupt leaf: root=2 block=30457856 slot=4, unexpected item end",
			Event{Scope: Filesystem, Device: "sda", FSType: "btrfs", Kind: "corruption", Count: 1}},
		{"4.19 btrfs handle fs error", 2, "BTRFS: error (device sdb) in btrfs_commit_transaction:2259: errno=-5 IO failure",
			Event{Scope: Filesystem, Device: "sdb", FSType: "btrfs", Kind: "io", Count: 1}},
		{"6.1 btrfs info", 6, "BTRFS info (device loop5): using crc32c (crc32c-generic) checksum algorithm", Event{}},
		// kernel/hung_task.c
		{"6.1 hung task", 3, "INFO: task jbd2/sda1-8:312 blocked for more than 122 seconds.",
			Event{Scope: HungTask, Kind: "hung_task", Count: 1}},
		// lib/ratelimit.c
		{"6.18 suppressed", 4, "blk_print_req_error: 26 callbacks suppressed",
			Event{Scope: Suppressed, Kind: "blk_print_req_error", Count: 26}},
		{"5.10 suppressed buffer", 4, "buffer_io_error: 6 callbacks suppressed",
			Event{Scope: Suppressed, Kind: "buffer_io_error", Count: 6}},
		{"not storage", 4, "net_ratelimit: 10 callbacks suppressed", Event{}},
		// unknown storage-looking lines: counted, never dropped
		{"md", 2, "md/raid1:md0: Disk failure on sdb1, disabling device.",
			Event{Scope: Disk, Kind: "other", Count: 1}},
		{"a future ata line", 3, "ata5.00: failed to IDENTIFY (I/O error, err_mask=0x4)",
			Event{Scope: Disk, Kind: "other", Count: 1}},
		{"informational storage line", 6, "sd 0:0:0:0: [sda] Attached SCSI disk", Event{}},
		{"unrelated", 3, "e1000e 0000:00:19.0 eth0: Detected Hardware Unit Hang", Event{}},
	}
	for _, c := range cases {
		got, ok := Classify(Record{Facility: Kernel, Level: c.level, Text: c.text})
		if c.want == (Event{}) {
			require.False(t, ok, "%s: %q counted as %+v", c.source, c.text, got)
			continue
		}
		require.True(t, ok, "%s: %q not counted", c.source, c.text)
		require.Equal(t, c.want, got, c.source)
	}
}

// A process that may write /dev/kmsg cannot forge a disk error: its
// records never have the kernel's facility.
func TestClassifyIgnoresUserspaceRecords(t *testing.T) {
	_, ok := Classify(Record{Facility: 1, Level: 3, Text: "I/O error, dev sda, sector 0 op 0x0:(READ)"})
	require.False(t, ok)
}

// A device name that could not be a kernel name is not made a label.
func TestClassifyRefusesOddDeviceNames(t *testing.T) {
	ev, ok := Classify(Record{Level: 3, Text: "I/O error, dev {evil}\"label, sector 0 op 0x0:(READ)"})
	require.True(t, ok)
	require.Equal(t, Event{Scope: Disk, Kind: "io", Count: 1}, ev)
}

func FuzzParseClassify(f *testing.F) {
	for _, s := range []string{
		"3,1234,5678901,-;I/O error, dev loop3, sector 0 op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 2\n",
		"3,1,2,-;sd 0:0:0:0: [sda] tag#0 timing out command, waited 180s\n SUBSYSTEM=scsi\n DEVICE=+scsi:0:0:0:0\n",
		"2,9,9,-;EXT4-fs error (device loop4): trigger_test_error:129: x\n",
		"4,5,6,-;blk_print_req_error: 26 callbacks suppressed\n",
		"3,7,8,c;BTRFS error (device loop5 state EA): forced readonly\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			return
		}
		ev, ok := Classify(r)
		if !ok {
			return
		}
		if ev.Count == 0 && ev.Scope != Suppressed {
			t.Fatalf("event with no count: %+v", ev)
		}
		if ev.Device != "" && !nameRE.MatchString(ev.Device) {
			t.Fatalf("device label %q escaped the name check", ev.Device)
		}
		if !utf8.ValidString(ev.Kind) || ev.Kind == "" {
			t.Fatalf("kind %q", ev.Kind)
		}
	})
}

// BenchmarkClassify: what sorting one record costs, over a mix of real
// lines (storage errors of each family, and the chatter that is most of a
// kernel log).
func BenchmarkClassify(b *testing.B) {
	lines := []string{
		"I/O error, dev loop3, sector 0 op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 2",
		"nvme nvme1: I/O tag 123 (007b) opcode 0x1 (Write) QID 4 timeout, aborting req_op:WRITE(1) size:4096",
		"EXT4-fs error (device loop4): trigger_test_error:129: diskcanary test",
		"XFS (sda1): metadata I/O error in \"xfs_buf_ioend+0x1a5/0x3c0 [xfs]\" at daddr 0x10 len 8 error 5",
		"e1000e 0000:00:19.0 eth0: NIC Link is Up 1000 Mbps Full Duplex, Flow Control: Rx/Tx",
		"audit: type=1400 audit(1700000000.123:42): apparmor=\"DENIED\" operation=\"open\"",
		"EXT4-fs (loop0): mounted filesystem r/w with ordered data mode. Quota mode: none.",
		"IPv6: ADDRCONF(NETDEV_CHANGE): veth0: link becomes ready",
	}
	recs := make([][]byte, len(lines))
	for i, l := range lines {
		recs[i] = []byte(fmt.Sprintf("3,%d,1000,-;%s\n", i, l))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Parse(recs[i%len(recs)])
		if err != nil {
			b.Fatal(err)
		}
		Classify(r)
	}
}
