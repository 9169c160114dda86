package collector

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/diskcanary/diskcanary/internal/blockdev"
	"github.com/diskcanary/diskcanary/internal/hostpath"
	"github.com/diskcanary/diskcanary/internal/kmsg"
)

// The kernel's view of storage errors: /dev/kmsg classified by
// internal/kmsg as records arrive (a scrape only copies counts); the exact
// counters sysfs keeps, read on scrape (SCSI's ioerr_cnt/iotmo_cnt, ext4's
// errors_count, btrfs's device stats; XFS and NVMe keep none there); and
// the mount table, for a filesystem the kernel turned read-only.

var (
	diskErrorsDesc = prometheus.NewDesc(namespace+"_disk_errors_total",
		"Storage errors the kernel logged for a disk since diskcanary started, by kind: the block layer's request status (io, medium, timeout, transport, target, …), driver timeouts, aborts, resets and link events, page-cache buffer errors (buffer_io, lost_write), and other for a storage error line no matcher knows. Counted from /dev/kmsg.",
		[]string{"device", "kind"}, nil)
	filesystemErrorsDesc = prometheus.NewDesc(namespace+"_filesystem_errors_total",
		"Filesystem errors the kernel logged since diskcanary started, by kind: error, warning, io, corruption, journal_abort, shutdown, remount_ro. Counted from /dev/kmsg; device is the filesystem's block device.",
		[]string{"device", "fstype", "kind"}, nil)
	hungTasksDesc = prometheus.NewDesc(namespace+"_hung_tasks_total",
		"Tasks the kernel reported blocked in uninterruptible sleep past kernel.hung_task_timeout_secs since diskcanary started (the kernel does not name the device).",
		nil, nil)
	kmsgSuppressedDesc = prometheus.NewDesc(namespace+"_kernel_log_suppressed_total",
		"Storage messages the kernel's rate limit did not print, by the function that printed them (\"N callbacks suppressed\"): errors that happened but are not in diskcanary_disk_errors_total.",
		[]string{"function"}, nil)
	kmsgRecordsDesc = prometheus.NewDesc(namespace+"_kernel_log_records_total",
		"Kernel log records read from /dev/kmsg since diskcanary started.", nil, nil)
	kmsgLostDesc = prometheus.NewDesc(namespace+"_kernel_log_lost_records_total",
		"Kernel log records not counted: overwritten (the ring buffer wrapped before they were read) or series_limit (more distinct device/kind pairs than diskcanary keeps, 4096).",
		[]string{"reason"}, nil)
	kmsgAvailableDesc = prometheus.NewDesc(namespace+"_kernel_log_available",
		"Whether diskcanary reads the kernel log (0: see diskcanary_kernel_log_unavailable_info; the sysfs counters and diskcanary_filesystem_readonly still work).",
		nil, nil)
	kmsgUnavailableDesc = prometheus.NewDesc(namespace+"_kernel_log_unavailable_info",
		"Why the kernel log is not read: permission (/dev/kmsg needs CAP_SYSLOG where kernel.dmesg_restrict=1) or missing (no /dev/kmsg, e.g. a container without it mounted); always 1.",
		[]string{"reason"}, nil)

	scsiIOErrorsDesc = prometheus.NewDesc(namespace+"_disk_scsi_io_errors_total",
		"Commands the SCSI midlayer completed with an error on this device since it appeared (sysfs device/ioerr_cnt).",
		[]string{"device"}, nil)
	scsiTimeoutsDesc = prometheus.NewDesc(namespace+"_disk_scsi_io_timeouts_total",
		"Commands that timed out on this SCSI device since it appeared (sysfs device/iotmo_cnt).",
		[]string{"device"}, nil)
	scsiDoneDesc = prometheus.NewDesc(namespace+"_disk_scsi_io_done_total",
		"Commands completed on this SCSI device since it appeared (sysfs device/iodone_cnt), the denominator of the two above.",
		[]string{"device"}, nil)
	fsRecordedErrorsDesc = prometheus.NewDesc(namespace+"_filesystem_recorded_errors",
		"Errors the filesystem itself keeps on disk, across mounts until fsck or a reset clears them: ext4's superblock error count (kind=error, /sys/fs/ext4/DEV/errors_count), btrfs's per-device error stats (kind=write, read, flush, corruption, generation).",
		[]string{"device", "fstype", "kind"}, nil)
	fsFirstErrorDesc = prometheus.NewDesc(namespace+"_filesystem_first_error_timestamp_seconds",
		"When ext4 first recorded an error in its superblock since fsck last cleared it (/sys/fs/ext4/DEV/first_error_time; 0: never).",
		[]string{"device", "fstype"}, nil)
	fsLastErrorDesc = prometheus.NewDesc(namespace+"_filesystem_last_error_timestamp_seconds",
		"When ext4 last recorded an error in its superblock (/sys/fs/ext4/DEV/last_error_time; 0: never).",
		[]string{"device", "fstype"}, nil)
	fsReadonlyDesc = prometheus.NewDesc(namespace+"_filesystem_readonly",
		"1 while the kernel holds a read-write mount's filesystem read-only (an error under errors=remount-ro, btrfs forced readonly); 0 when it is writable again. A filesystem mounted ro on purpose is 0.",
		[]string{"device", "mountpoint"}, nil)
)

// maxErrorSeries bounds the distinct (scope, device, fstype, kind) keys,
// so a kernel that logs errors for ever-new device names cannot grow the
// daemon's memory without limit.
const maxErrorSeries = 4096

type errorKey struct {
	scope            kmsg.Scope
	device, fs, kind string
}

// errorsCollector counts what the kernel says about storage errors.
type errorsCollector struct {
	paths hostpath.Paths
	deviceFilter
	logger *slog.Logger

	reader *kmsg.Reader // nil when the log cannot be read
	reason string
	// noMounts is set once the mount table could not be read (a
	// --path.procfs without self/mountinfo): said once, then skipped.
	noMounts atomic.Bool

	mu           sync.Mutex
	counts       map[errorKey]uint64
	records      uint64
	lost, capped uint64
}

func newErrorsCollector(o Options) (Collector, error) {
	filter, err := newDeviceFilter(o.Config)
	if err != nil {
		return nil, err
	}
	p := &errorsCollector{paths: o.Paths, deviceFilter: filter,
		logger: o.Logger, counts: map[errorKey]uint64{}}
	r, err := kmsg.Open("/dev/kmsg")
	switch {
	case err == nil:
		p.reader = r
	case errors.Is(err, fs.ErrPermission):
		p.reason = "permission"
		p.logger.Warn("kernel log not read: /dev/kmsg needs CAP_SYSLOG where kernel.dmesg_restrict=1 (the systemd unit and the Kubernetes SMART overlay grant it); disk and filesystem error counts from the log are off, the sysfs counters and read-only state run", "err", err)
	default:
		p.reason = "missing"
		p.logger.Warn("kernel log not read: no /dev/kmsg (in a container, mount the host's); disk and filesystem error counts from the log are off, the sysfs counters and read-only state run", "err", err)
	}
	return p, nil
}

// Run reads the kernel log until ctx ends.
func (p *errorsCollector) Run(ctx context.Context) {
	if p.reader == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			rec, err := p.reader.Next()
			if err != nil {
				if ctx.Err() == nil {
					p.logger.Error("kernel log: read failed; error counts from the log stop here", "err", err)
				}
				return
			}
			p.count(rec, p.reader.Lost())
		}
	}()
	<-ctx.Done()
	_ = p.reader.Close()
	<-done
}

func (p *errorsCollector) count(rec kmsg.Record, lost uint64) {
	ev, ok := kmsg.Classify(rec)
	var devices []string
	if ok && ev.Scope == kmsg.Disk && ev.Device != "" {
		devices = p.disksOf(ev.Device) // sysfs, outside the lock
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.records++
	p.lost = lost
	if !ok {
		return
	}
	if devices == nil {
		devices = []string{ev.Device}
	}
	for _, d := range devices {
		k := errorKey{scope: ev.Scope, device: d, fs: ev.FSType, kind: ev.Kind}
		if _, seen := p.counts[k]; !seen && len(p.counts) >= maxErrorSeries {
			p.capped += ev.Count
			continue
		}
		p.counts[k] += ev.Count
	}
}

var scsiAddressRE = regexp.MustCompile(`^\d+:\d+:\d+:\d+$`)

// disksOf names the disks a driver's name for a device stands for, so
// that every disk error joins diskcanary_disk_info: an NVMe controller
// (nvme0) is its namespaces (nvme0n1), an ATA port (ata1) the disks behind
// it, a SCSI address (0:0:0:0) its sd disk. A block name is itself; a name
// sysfs does not know is kept as the kernel printed it.
func (p *errorsCollector) disksOf(name string) []string {
	if _, err := os.Stat(p.paths.Sys("class/block", name)); err == nil {
		return []string{name}
	}
	var disks []string
	switch {
	case strings.HasPrefix(name, "nvme"):
		entries, _ := os.ReadDir(p.paths.Sys("class/nvme", name))
		for _, e := range entries {
			if n := e.Name(); strings.HasPrefix(n, name+"n") {
				disks = append(disks, n)
			}
		}
	case strings.HasPrefix(name, "ata"):
		entries, _ := os.ReadDir(p.paths.Sys("block"))
		for _, e := range entries {
			if link, err := os.Readlink(p.paths.Sys("block", e.Name())); err == nil && strings.Contains(link, "/"+name+"/") {
				disks = append(disks, e.Name())
			}
		}
	case scsiAddressRE.MatchString(name):
		entries, _ := os.ReadDir(p.paths.Sys("class/scsi_device", name, "device/block"))
		for _, e := range entries {
			disks = append(disks, e.Name())
		}
	}
	if len(disks) == 0 {
		return []string{name}
	}
	sort.Strings(disks)
	return disks
}

func (p *errorsCollector) Update(ch chan<- prometheus.Metric) error {
	p.updateLog(ch)
	p.updateSCSI(ch)
	p.updateFilesystems(ch)
	if err := p.updateReadonly(ch); err != nil && !p.noMounts.Swap(true) {
		// The read-only state is one part of three; the rest stands.
		p.logger.Warn("no mount table: diskcanary_filesystem_readonly is not exported (check --path.procfs)", "err", err)
	}
	return nil
}

func (p *errorsCollector) updateLog(ch chan<- prometheus.Metric) {
	if p.reader == nil {
		ch <- prometheus.MustNewConstMetric(kmsgAvailableDesc, prometheus.GaugeValue, 0)
		ch <- prometheus.MustNewConstMetric(kmsgUnavailableDesc, prometheus.GaugeValue, 1, p.reason)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(kmsgAvailableDesc, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(kmsgRecordsDesc, prometheus.CounterValue, float64(p.records))
	ch <- prometheus.MustNewConstMetric(kmsgLostDesc, prometheus.CounterValue, float64(p.lost), "overwritten")
	ch <- prometheus.MustNewConstMetric(kmsgLostDesc, prometheus.CounterValue, float64(p.capped), "series_limit")
	var hung uint64
	for k, n := range p.counts {
		switch k.scope {
		case kmsg.Disk:
			if k.device == "" || p.included(k.device) {
				ch <- prometheus.MustNewConstMetric(diskErrorsDesc, prometheus.CounterValue, float64(n), k.device, k.kind)
			}
		case kmsg.Filesystem:
			ch <- prometheus.MustNewConstMetric(filesystemErrorsDesc, prometheus.CounterValue, float64(n), k.device, k.fs, k.kind)
		case kmsg.HungTask:
			hung += n
		case kmsg.Suppressed:
			ch <- prometheus.MustNewConstMetric(kmsgSuppressedDesc, prometheus.CounterValue, float64(n), k.kind)
		}
	}
	ch <- prometheus.MustNewConstMetric(hungTasksDesc, prometheus.CounterValue, float64(hung))
}

// readHex reads a sysfs counter printed as 0x%x (the SCSI ones).
func readHex(path string) (float64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 64)
	return float64(v), err == nil
}

func readUint(path string) (float64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return float64(v), err == nil
}

// scsiCounters are the SCSI midlayer's per-device counter files.
var scsiCounters = []struct {
	file string
	desc *prometheus.Desc
}{{"ioerr_cnt", scsiIOErrorsDesc}, {"iotmo_cnt", scsiTimeoutsDesc}, {"iodone_cnt", scsiDoneDesc}}

// updateSCSI exports the SCSI midlayer's per-device command counters
// (drivers/scsi/scsi_sysfs.c: iodone_cnt, ioerr_cnt, iotmo_cnt).
func (p *errorsCollector) updateSCSI(ch chan<- prometheus.Metric) {
	entries, _ := os.ReadDir(p.paths.Sys("block"))
	for _, e := range entries {
		name := e.Name()
		if !p.included(name) {
			continue
		}
		dev := p.paths.Sys("block", name, "device")
		for i, c := range scsiCounters {
			v, ok := readHex(filepath.Join(dev, c.file))
			if !ok {
				if i == 0 {
					break // not a SCSI device: it has none of the three
				}
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, v, name)
		}
	}
}

// btrfsStats are the names in a btrfs device's error_stats file
// (fs/btrfs/sysfs.c btrfs_devinfo_error_stats_show, v5.14+) and their kinds.
var btrfsStats = map[string]string{
	"write_errs": "write", "read_errs": "read", "flush_errs": "flush",
	"corruption_errs": "corruption", "generation_errs": "generation",
}

// updateFilesystems exports what ext4 and btrfs record of their own errors.
func (p *errorsCollector) updateFilesystems(ch chan<- prometheus.Metric) {
	ext4, _ := os.ReadDir(p.paths.Sys("fs/ext4"))
	for _, e := range ext4 {
		dir := p.paths.Sys("fs/ext4", e.Name())
		n, ok := readUint(filepath.Join(dir, "errors_count"))
		if !ok {
			continue // "features" and other non-device entries
		}
		ch <- prometheus.MustNewConstMetric(fsRecordedErrorsDesc, prometheus.GaugeValue, n, e.Name(), "ext4", "error")
		if t, ok := readUint(filepath.Join(dir, "first_error_time")); ok {
			ch <- prometheus.MustNewConstMetric(fsFirstErrorDesc, prometheus.GaugeValue, t, e.Name(), "ext4")
		}
		if t, ok := readUint(filepath.Join(dir, "last_error_time")); ok {
			ch <- prometheus.MustNewConstMetric(fsLastErrorDesc, prometheus.GaugeValue, t, e.Name(), "ext4")
		}
	}
	// /sys/fs/btrfs/<fsid>/devinfo/<devid>/error_stats.
	fsids, _ := os.ReadDir(p.paths.Sys("fs/btrfs"))
	for _, f := range fsids {
		name, devinfo, ok := btrfsSingleDevice(p.paths.Sys("fs/btrfs", f.Name()))
		if !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(devinfo, "error_stats"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, " ")
			kind, known := btrfsStats[k]
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if ok && known && err == nil {
				ch <- prometheus.MustNewConstMetric(fsRecordedErrorsDesc, prometheus.GaugeValue, float64(n), name, "btrfs", kind)
			}
		}
	}
}

// btrfsSingleDevice names a btrfs filesystem's one device and its devinfo
// directory. sysfs links devices/<name> to each device but says nothing of
// which devinfo/<devid> is which, so only a single-device filesystem (the
// usual etcd or container volume) is named; a multi-device one is left
// out rather than guessed (docs/faults.md).
func btrfsSingleDevice(base string) (name, devinfo string, ok bool) {
	devs, _ := os.ReadDir(filepath.Join(base, "devices"))
	devids, _ := os.ReadDir(filepath.Join(base, "devinfo"))
	if len(devs) != 1 || len(devids) != 1 {
		return "", "", false
	}
	return devs[0].Name(), filepath.Join(base, "devinfo", devids[0].Name()), true
}

// updateReadonly exports, per block device with a mounted filesystem,
// whether the kernel made it read-only under a read-write mount: one series
// per device (a superblock's state), named by its shortest mountpoint, so
// bind mounts add none. The mount table is this process's, as the probes
// see their directories.
func (p *errorsCollector) updateReadonly(ch chan<- prometheus.Metric) error {
	mounts, err := blockdev.Mounts(p.paths.Proc())
	if err != nil {
		return err
	}
	type fsState struct {
		mountpoint string
		held       bool // the kernel holds it read-only under a rw mount
	}
	byDevice := map[string]*fsState{}
	names := map[[2]uint32]string{} // one sysfs lookup per device, however many mounts
	var order []string
	for _, m := range mounts {
		dev, seen := names[[2]uint32{m.Major, m.Minor}]
		if !seen {
			dev = blockdev.KernelName(p.paths.Sys(), m.Major, m.Minor)
			names[[2]uint32{m.Major, m.Minor}] = dev
		}
		if dev == "" {
			// btrfs's anonymous st_dev: the source names the device. A
			// source that is no block device (a FUSE filesystem's fsname)
			// names nothing: device-less filesystems are not exported.
			dev = blockdev.SourceDevice(p.paths.Sys(), m.Source)
		}
		if dev == "" {
			continue
		}
		st := byDevice[dev]
		if st == nil {
			st = &fsState{mountpoint: m.Mountpoint}
			byDevice[dev] = st
			order = append(order, dev)
		} else if len(m.Mountpoint) < len(st.mountpoint) {
			st.mountpoint = m.Mountpoint
		}
		if m.SuperReadOnly && !m.ReadOnly {
			st.held = true
		}
	}
	for _, dev := range order {
		v := 0.0
		if byDevice[dev].held {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(fsReadonlyDesc, prometheus.GaugeValue, v, dev, byDevice[dev].mountpoint)
	}
	return nil
}
