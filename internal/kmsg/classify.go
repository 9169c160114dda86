package kmsg

import (
	"regexp"
	"strconv"
	"strings"
)

// Scope says what an event is counted against.
type Scope uint8

const (
	// Disk: a block device or the driver under it (Device is a kernel
	// block name, or a driver's name for it: "nvme0", "ata1", "0:0:0:0").
	Disk Scope = iota + 1
	// Filesystem: a filesystem on Device (a partition, a dm device, a disk).
	Filesystem
	// HungTask: a task blocked in D state past the hung-task timeout. The
	// kernel does not say on which device.
	HungTask
	// Suppressed: Count messages of the function Kind that the kernel's
	// rate limit did not print.
	Suppressed
)

// Event is one storage record, classified.
type Event struct {
	Scope  Scope
	Device string
	FSType string // Filesystem only
	Kind   string
	Count  uint64 // 1, or the number of suppressed messages
}

// A matcher turns the text of one kernel record into an event. Each cites
// the kernel source its format follows; the message formats are the
// kernel's ABI in practice and every one here has changed at least once,
// so the old forms still in production are matched too.
type matcher struct {
	re *regexp.Regexp
	ev func(m []string, level int) (Event, bool)
}

// blkStatus maps the block layer's status names to kinds
// (block/blk-core.c, blk_errors[]: the name printed before " error, dev").
// "critical nexus" became "reservation conflict" in v6.5.
var blkStatus = map[string]string{
	"I/O":                       "io",
	"critical medium":           "medium",
	"timeout":                   "timeout",
	"recoverable transport":     "transport",
	"critical target":           "target",
	"critical nexus":            "reservation",
	"reservation conflict":      "reservation",
	"critical space allocation": "space",
	"protection":                "protection",
	"kernel resource":           "resource",
	"device resource":           "resource",
	"operation not supported":   "not_supported",
	"nonblocking retry":         "again",
	"device offline":            "offline",
	"duration limit exceeded":   "duration_limit",
	"invalid":                   "invalid",
}

func one(s Scope, dev, kind string) Event { return Event{Scope: s, Device: dev, Kind: kind, Count: 1} }

func fs(fstype, dev, kind string) Event {
	return Event{Scope: Filesystem, Device: dev, FSType: fstype, Kind: kind, Count: 1}
}

// nameRE is what a kernel device name may look like in a label: block
// names (sda, nvme0n1p2, dm-0, md127, mmcblk0p1, cciss!c0d0), ATA ports
// (ata1, ata1.00) and SCSI addresses (0:0:0:0).
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:!+-]{0,63}$`)

var matchers = []matcher{
	// Block layer, one line per failed request with the request's status:
	// block/blk-core.c blk_print_req_error (v5.18+, no prefix)
	//   "I/O error, dev loop0, sector 0 op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 2"
	// block/blk-core.c print_req_error (v5.3–v5.17: "%s: " with the caller, blk_update_request)
	//   "blk_update_request: I/O error, dev sda, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0"
	// v4.14–v5.2: "print_req_error: critical medium error, dev sda, sector 1234"
	// up to v4.13: "blk_update_request: I/O error, dev sda, sector 1234"
	{regexp.MustCompile(`^(?:(?:blk_update_request|print_req_error|blk_print_req_error|end_request): )?([a-zA-Z/ ]+?) error, dev ([^, ]+), sector \d+`),
		func(m []string, _ int) (Event, bool) {
			kind, ok := blkStatus[m[1]]
			if !ok {
				kind = "other"
			}
			return one(Disk, m[2], kind), true
		}},
	// fs/buffer.c buffer_io_error / end_buffer_async_write: the page cache
	// could not read or write back a buffer ("lost ... write" is data the
	// application believed written).
	//   "Buffer I/O error on dev loop0, logical block 0, async page read"
	//   "Buffer I/O error on dev sda1, logical block 1234, lost async page write"
	{regexp.MustCompile(`^Buffer I/O error on (?:dev|device) ([^, ]+), logical block \d+(?:, (lost)?)?`),
		func(m []string, _ int) (Event, bool) {
			if m[2] != "" {
				return one(Disk, m[1], "lost_write"), true
			}
			return one(Disk, m[1], "buffer_io"), true
		}},
	// drivers/nvme/host/core.c nvme_log_error (v5.19+): the NVMe status of a
	// failed request, which the block layer's line above counts already.
	//   "nvme0n1: I/O Cmd(0x2) @ LBA 0, 8 blocks, I/O Error (sct 0x2 / sc 0x81) MORE"
	{regexp.MustCompile(`^nvme\d+(?:c\d+)?n\d+: I/O Cmd\(|^nvme\d+: Admin Cmd\(`),
		func([]string, int) (Event, bool) { return Event{}, false }},
	// drivers/nvme/host/pci.c nvme_timeout (dev_warn on the controller):
	//   v4.5–v6.1: "nvme nvme0: I/O 123 QID 4 timeout, aborting"
	//   v6.2+:     "nvme nvme0: I/O tag 123 (007b) opcode 0x1 (Write) QID 4 timeout, aborting req_op:WRITE(1) size:4096"
	//   also ", reset controller", ", disable controller", ", completion polled"
	{regexp.MustCompile(`^nvme (nvme\d+): I/O (?:tag )?\d+ .*QID \d+ timeout, (aborting|reset controller|disable controller|completion polled)`),
		func(m []string, _ int) (Event, bool) {
			if m[2] == "completion polled" {
				return one(Disk, m[1], "timeout_polled"), true
			}
			return one(Disk, m[1], "timeout"), true
		}},
	// drivers/nvme/host/pci.c abort_endio: "nvme nvme0: Abort status: 0x0"
	{regexp.MustCompile(`^nvme (nvme\d+): Abort status: `),
		func(m []string, _ int) (Event, bool) { return one(Disk, m[1], "abort"), true }},
	// drivers/nvme/host/pci.c nvme_timeout / nvme_reset_work / AER:
	//   "nvme nvme0: controller is down; will reset: CSTS=0x3, PCI_STATUS=0x10"
	//   "nvme nvme0: resetting controller due to AER" (drivers/nvme/host/pci.c, v5.x+)
	//   "nvme nvme0: Disabling device after reset failure: -19"
	//   "nvme nvme0: Removing after probe failure status: -19"
	{regexp.MustCompile(`^nvme (nvme\d+): (?:controller is down; will reset|resetting controller|Disabling device after reset failure|Removing after probe failure)`),
		func(m []string, _ int) (Event, bool) {
			return one(Disk, m[1], "reset"), true
		}},
	// drivers/scsi/scsi_lib.c scsi_softirq_done / scsi_complete (scmd_printk):
	//   "sd 2:0:0:0: [sdb] tag#12 timing out command, waited 180s"
	{regexp.MustCompile(`^sd (\d+:\d+:\d+:\d+): (?:\[([^\]]+)\] )?(?:tag#\d+ )?timing out command`),
		func(m []string, _ int) (Event, bool) { return one(Disk, scsiName(m), "timeout"), true }},
	// drivers/scsi/scsi_error.c (sdev_printk / scmd_printk):
	//   "sd 0:0:0:0: Device offlined - not ready after error recovery"
	//   "sd 0:0:0:0: rejecting I/O to offline device"
	//   "sd 0:0:0:0: [sda] tag#0 abort"
	//   "sd 0:0:0:0: Power-on or device reset occurred"
	{regexp.MustCompile(`^sd (\d+:\d+:\d+:\d+): (?:\[([^\]]+)\] )?(?:tag#\d+ )?(Device offlined|rejecting I/O to offline device|abort|Power-on or device reset occurred)`),
		func(m []string, _ int) (Event, bool) {
			kind := map[string]string{
				"Device offlined":                   "offline",
				"rejecting I/O to offline device":   "offline",
				"abort":                             "abort",
				"Power-on or device reset occurred": "reset",
			}[m[3]]
			return one(Disk, scsiName(m), kind), true
		}},
	// drivers/ata/libata-eh.c / libata-core.c (ata_port_* / ata_dev_* / ata_link_*):
	//   "ata1: hard resetting link", "ata1.00: soft resetting link" → reset
	//   "ata1: SATA link down (SStatus 0 SControl 300)" → link_down
	//   "ata1.00: exception Emask 0x0 SAct 0x1 SErr 0x0 action 0x6 frozen" → exception
	//   "ata1.00: limiting speed to UDMA/100:PIO4", "ata1: limiting SATA link speed to 1.5 Gbps" → link_degraded
	{regexp.MustCompile(`^(ata\d+)(?:\.\d+)?: (hard resetting link|soft resetting link|SATA link down|exception Emask|limiting (?:SATA link )?speed)`),
		func(m []string, _ int) (Event, bool) {
			kind := "reset"
			switch {
			case m[2] == "SATA link down":
				kind = "link_down"
			case m[2] == "exception Emask":
				kind = "exception"
			case strings.HasPrefix(m[2], "limiting"):
				kind = "link_degraded"
			}
			return one(Disk, m[1], kind), true
		}},

	// ext4, fs/ext4/super.c:
	//   __ext4_error:       "EXT4-fs error (device loop0): ext4_lookup:1821: inode #2: comm ls: deleted inode referenced: 12"
	//   __ext4_std_error:   "EXT4-fs error (device sda1) in ext4_reserve_inode_write:5751: IO failure"
	//   __ext4_warning:     "EXT4-fs warning (device sda1): ext4_dx_add_entry:2512: Directory index full!"
	//   ext4_handle_error:  "EXT4-fs (loop0): Remounting filesystem read-only" (v5.11+; before, the same words from ext4_handle_error)
	//   ext4_commit_super:  "EXT4-fs (sda1): I/O error while writing superblock"
	//   fs/ext4/ioctl.c ext4_shutdown: "EXT4-fs (sda1): shut down requested (2)"
	{regexp.MustCompile(`^EXT4-fs (error|warning) \(device ([^)]+)\)`),
		func(m []string, _ int) (Event, bool) { return fs("ext4", m[2], m[1]), true }},
	{regexp.MustCompile(`^EXT4-fs \(([^)]+)\): (.*)`),
		func(m []string, level int) (Event, bool) {
			switch msg := m[2]; {
			case strings.HasPrefix(msg, "Remounting filesystem read-only"):
				return fs("ext4", m[1], "remount_ro"), true
			case strings.Contains(msg, "I/O error"):
				return fs("ext4", m[1], "io"), true
			case strings.HasPrefix(msg, "shut down requested"):
				return fs("ext4", m[1], "shutdown"), true
			case level <= 3: // KERN_ERR and worse, e.g. "failed to convert unwritten extents ... potential data loss!"
				return fs("ext4", m[1], "error"), true
			}
			return Event{}, false // mount notices and the like
		}},
	// fs/jbd2/journal.c (ext4's journal; the device is "<fs device>-<journal inode>"):
	//   __jbd2_journal_abort_hard / jbd2_journal_abort: "Aborting journal on device loop0-8."
	//   jbd2_write_superblock: "JBD2: Error -5 detected when updating journal superblock for loop0-8."
	//   jbd2_journal_commit_transaction (fs/jbd2/commit.c): "JBD2: Detected IO errors while flushing file data on loop0-8"
	{regexp.MustCompile(`^(?:Aborting journal on device|JBD2: .* (?:for|on)) ([^ ]+?)-\d+\.?$`),
		func(m []string, _ int) (Event, bool) {
			return fs("ext4", m[1], map[bool]string{true: "journal_abort", false: "io"}[strings.HasPrefix(m[0], "Aborting")]), true
		}},
	// XFS, fs/xfs/xfs_message.c ("XFS (%s): " + message), messages from
	// fs/xfs/xfs_buf.c, xfs_log.c, xfs_fsops.c (xfs_do_force_shutdown):
	//   "XFS (sda1): metadata I/O error in \"xfs_buf_ioend+0x..\" at daddr 0x10 len 8 error 5"
	//   "XFS (sda1): log I/O error -5"
	//   "XFS (sda1): Corruption detected. Unmount and run xfs_repair"
	//   "XFS (sda1): Log I/O Error (0x2) detected at xlog_ioend_work+0x.. (fs/xfs/xfs_log.c:1296).  Shutting down filesystem."
	//   "XFS (sda1): Filesystem has been shut down due to log error (0x2)." (v6.x)
	//   "XFS (sda1): xfs_do_force_shutdown(0x2) called from line 1196 of file fs/xfs/xfs_log.c." (v4.x–v5.x)
	{regexp.MustCompile(`^XFS \(([^)]+)\): (.*)`),
		func(m []string, level int) (Event, bool) {
			switch msg := m[2]; {
			case strings.Contains(msg, "Shutting down filesystem") || strings.Contains(msg, "has been shut down") || strings.Contains(msg, "xfs_do_force_shutdown"):
				return fs("xfs", m[1], "shutdown"), true
			case strings.Contains(msg, "Corruption") || strings.Contains(msg, "corrupt"):
				return fs("xfs", m[1], "corruption"), true
			case strings.Contains(msg, "I/O error") || strings.Contains(msg, "I/O Error") || strings.Contains(msg, "IO error"):
				return fs("xfs", m[1], "io"), true
			case strings.HasPrefix(msg, "Please unmount the filesystem"):
				return Event{}, false // follows a shutdown, already counted
			case level <= 3:
				return fs("xfs", m[1], "error"), true
			}
			return Event{}, false
		}},
	// btrfs, fs/btrfs/messages.c _btrfs_printk: "BTRFS <level> (device %s): "
	// (v6.3+ adds " state <flags>" after the device), fs/btrfs/volumes.c
	// btrfs_dev_stat_print_on_error, fs/btrfs/messages.c __btrfs_handle_fs_error:
	//   "BTRFS error (device loop0): bdev /dev/loop0 errs: wr 1, rd 0, flush 0, corrupt 0, gen 0"
	//   "BTRFS error (device loop0 state EA): Transaction aborted (error -5)"
	//   "BTRFS info (device loop0 state EA): forced readonly"
	//   "BTRFS critical (device sda): corrupt leaf: root=2 block=30457856 slot=4, ..."
	//   "BTRFS warning (device sda): csum failed root 5 ino 257 off 0 csum 0x98f94189 expected csum 0x... mirror 1"
	//   v4.x: "BTRFS: error (device sda) in btrfs_commit_transaction:2259: errno=-5 IO failure"
	{regexp.MustCompile(`^BTRFS:? (\w+):? \(device ([^ )]+)[^)]*\)(?: in [^:]+:\d+)?: ?(.*)`),
		func(m []string, level int) (Event, bool) {
			switch msg := m[3]; {
			case strings.HasPrefix(msg, "forced readonly"):
				return fs("btrfs", m[2], "remount_ro"), true
			case strings.Contains(msg, "errs: wr") || strings.Contains(msg, "IO failure"):
				return fs("btrfs", m[2], "io"), true
			case strings.Contains(msg, "corrupt") || strings.Contains(msg, "csum failed") || strings.Contains(msg, "checksum error"):
				return fs("btrfs", m[2], "corruption"), true
			case m[1] == "error" || m[1] == "critical" || m[1] == "crit" || m[1] == "emergency" || level <= 3:
				return fs("btrfs", m[2], "error"), true
			}
			return Event{}, false
		}},
	// kernel/hung_task.c check_hung_task:
	//   "INFO: task kworker/u4:2:1234 blocked for more than 120 seconds."
	{regexp.MustCompile(`^INFO: task .+:\d+ blocked for more than \d+ seconds\.`),
		func(m []string, _ int) (Event, bool) {
			return Event{Scope: HungTask, Kind: "hung_task", Count: 1}, true
		}},
	// lib/ratelimit.c ___ratelimit: "blk_print_req_error: 12 callbacks suppressed"
	{regexp.MustCompile(`^([A-Za-z0-9_.]+): (\d+) callbacks suppressed`),
		func(m []string, _ int) (Event, bool) {
			if !storageFunc.MatchString(m[1]) {
				return Event{}, false
			}
			n, err := strconv.ParseUint(m[2], 10, 32)
			if err != nil {
				return Event{}, false
			}
			return Event{Scope: Suppressed, Kind: m[1], Count: n}, true
		}},
}

// storageFunc is which rate-limited functions are storage ones: the
// request-error printers above and the filesystems' and drivers' own.
var storageFunc = regexp.MustCompile(`^(blk_|print_req_error|buffer_io_error|end_buffer|__ext4|ext4_|jbd2|xfs|btrfs|nvme|scsi|sd_|ata)`)

// storageLooking is a line a storage driver or filesystem printed that no
// matcher knows: counted as kind "other" so a format change is seen, not
// dropped.
var storageLooking = regexp.MustCompile(`^(?:sd \d+:\d+:\d+:\d+|ata\d+|nvme|scsi|EXT4-fs|XFS|BTRFS|JBD2|blk_|md/|md:|device-mapper|virtio_blk|mmc\d|loop\d).*?(?i:error|fail|timeout|timed out|reset|abort|offline|corrupt)`)

// scsiName is the disk a SCSI line names: its [sdX] when printed, else
// its H:C:T:L address for the collector to resolve.
func scsiName(m []string) string {
	if m[2] != "" {
		return m[2]
	}
	return m[1]
}

// Classify sorts one record. Only the kernel's own records count: any
// process allowed to write /dev/kmsg could otherwise forge disk errors
// (the kernel never gives a userspace record facility 0).
func Classify(r Record) (Event, bool) {
	if r.Facility != Kernel {
		return Event{}, false
	}
	for _, m := range matchers {
		if s := m.re.FindStringSubmatch(r.Text); s != nil {
			ev, ok := m.ev(s, r.Level)
			if !ok {
				return Event{}, false
			}
			if ev.Device != "" && !nameRE.MatchString(ev.Device) {
				ev.Device = ""
			}
			return ev, true
		}
	}
	// Warnings and worse only: informational driver chatter is not an error.
	if r.Level <= 4 && storageLooking.MatchString(r.Text) {
		return Event{Scope: Disk, Kind: "other", Count: 1}, true
	}
	return Event{}, false
}
