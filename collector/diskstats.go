package collector

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/procfs/blockdevice"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/blockdev"
)

// The kernel counts /proc/diskstats sectors in 512-byte units whatever the
// device's logical block size (Documentation/admin-guide/iostats.rst).
const diskSectorSize = 512

// Field counts of a /proc/diskstats line, including major, minor and name:
// 14 before Linux 4.18, 18 with the discard fields (4.18), 20 with the flush
// fields (5.5).
const (
	diskstatsFieldsDiscard = 18
	diskstatsFieldsFlush   = 20
)

// staticRefresh is how long a device's sysfs attributes (model, serial,
// block sizes, topology) are trusted. They are read once, not per scrape
// (node_exporter issue #3282: reading sysfs per scrape made its diskstats
// collector 10x slower); the refresh catches a dm table reload or a loop
// device re-attached with another block size. A jitter of up to a quarter
// spreads the re-reads of a thousand devices over several scrapes.
const staticRefresh = 5 * time.Minute

// diskstatsCollector exports /proc/diskstats with node_exporter's semantics
// in base units, one diskcanary_disk_info series per device from sysfs, and
// diskcanary_disk_parent_info, the device → physical disk join.
type diskstatsCollector struct {
	diskstats string // procfs/diskstats
	sysfs     string
	deviceFilter
	logger *slog.Logger
	now    func() time.Time

	// families are the per-device counters and gauges, by name.
	families         []diskFamily
	info, parentInfo *prometheus.Desc

	mu     sync.Mutex
	static map[string]*deviceStatic
}

// deviceStatic is what sysfs says about a device that does not change
// between scrapes.
type deviceStatic struct {
	major, minor uint32
	infoValues   []string // label values of diskcanary_disk_info after device
	disks        []string // physical disks under the device
	// included is the device filter's verdict; infoLabels are
	// diskcanary_disk_info's label values (device first, valid UTF-8) and
	// joinDisks the disks of its exported parent_info series.
	included   bool
	infoLabels []string
	joinDisks  []string
	// metrics are the same as client_golang metrics, for protobuf scrapes
	// only: built on the first one, so a text-scraped daemon never holds
	// them (a kilobyte a device).
	metrics *deviceMetrics
	dir     string // the device's sysfs directory, "" when sysfs does not know it
	expires time.Time
	// ios is reads+writes completed at the last scrape: a decrease means
	// the device was torn down and re-created under the same name.
	ios uint64
}

// deviceMetrics is a device's series that never change between refreshes,
// built once and sent as they are.
type deviceMetrics struct {
	info  prometheus.Metric
	joins []prometheus.Metric
	// device is the {device="NAME"} label pair every counter shares, so a
	// scrape of a thousand disks does not sort and allocate twenty
	// thousand label sets.
	device []*dto.LabelPair
}

var diskInfoLabels = []string{"device", "major", "minor", "model", "serial", "wwn", "revision",
	"rotational", "logical_block_size", "physical_block_size", "dm_name", "dm_uuid", "md_level"}

var diskParentInfoLabels = []string{"device", "disk"}

const (
	diskInfoName       = namespace + "_disk_info"
	diskInfoHelp       = "Identity of a block device from sysfs; rotational and block sizes in bytes as the kernel reports them. Partitions carry their disk's identity."
	diskParentInfoName = namespace + "_disk_parent_info"
	diskParentInfoHelp = "Maps a block device to each physical disk under it (partition -> disk, dm/md -> slaves, recursively; a whole disk maps to itself). Join a probe's device label to disk-level series with it."
)

func newDiskstatsCollector(o Options) (Collector, error) {
	c := o.Config
	filter, err := newDeviceFilter(c)
	if err != nil {
		return nil, err
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &diskstatsCollector{
		diskstats: filepath.Join(o.Paths.Proc(), "diskstats"), sysfs: o.Paths.Sys(), deviceFilter: filter, logger: logger, now: time.Now,
		families:   newDiskFamilies(),
		info:       prometheus.NewDesc(diskInfoName, diskInfoHelp, diskInfoLabels, nil),
		parentInfo: prometheus.NewDesc(diskParentInfoName, diskParentInfoHelp, diskParentInfoLabels, nil),

		static: map[string]*deviceStatic{},
	}, nil
}

func (c *diskstatsCollector) Update(ch chan<- prometheus.Metric) error {
	snap, err := c.snapshot(true)
	if err != nil {
		return err
	}
	for i := range snap.stats {
		st := snap.static[i].metrics
		// The join series exists for every device whose disk is exported,
		// even when the device itself is filtered out (a partition under
		// the default filter), so a probe on sda1 still reaches sda.
		for _, m := range st.joins {
			ch <- m
		}
		if !snap.static[i].included {
			continue
		}
		s := &snap.stats[i]
		for f := range c.families {
			fam := &c.families[f]
			if s.IoStatsCount < fam.fields {
				continue
			}
			if fam.gauge {
				ch <- &diskGauge{desc: fam.desc, labels: st.device, value: fam.value(s)}
			} else {
				ch <- &diskCounter{desc: fam.desc, labels: st.device, value: fam.value(s)}
			}
		}
		ch <- st.info
	}
	return nil
}

// diskSnapshot is one scrape's /proc/diskstats: each line and its device's
// cached sysfs attributes, in the file's order.
type diskSnapshot struct {
	stats  []blockdevice.Diskstats
	static []*deviceStatic
}

// snapshot reads /proc/diskstats and the sysfs attributes of devices new
// to the cache, and drops the cache entries of devices that are gone; with
// metrics, every device's deviceMetrics are built.
func (c *diskstatsCollector) snapshot(metrics bool) (*diskSnapshot, error) {
	b, err := os.ReadFile(c.diskstats)
	if err != nil {
		return nil, fmt.Errorf("diskstats: %w", err)
	}
	stats, err := parseDiskstats(b)
	if err != nil {
		return nil, fmt.Errorf("diskstats: %s: %w", c.diskstats, err)
	}
	snap := &diskSnapshot{stats: stats, static: make([]*deviceStatic, len(stats))}
	// The static cache is shared by concurrent scrapes.
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	seen := make(map[string]struct{}, len(stats))
	// One topology for the pass, made on the first device whose sysfs
	// attributes are (re)read: a device's disk and slaves are then looked
	// up once, not once per device that names them.
	var sysfs *sysfsPass
	for i := range stats {
		seen[stats[i].DeviceName] = struct{}{}
		st := c.staticFor(&stats[i], now, &sysfs)
		if metrics && st.metrics == nil {
			st.metrics = c.metricsOf(st)
		}
		snap.static[i] = st
	}
	for name := range c.static {
		if _, ok := seen[name]; !ok {
			delete(c.static, name)
		}
	}
	return snap, nil
}

// Warm reads the sysfs attributes of every device in /proc/diskstats into
// the cache, so the first scrape costs what a steady one does (go run
// ./bench diskstats-10000: start-up and first scrape against node_exporter).
// An error here is the first scrape's to report.
func (c *diskstatsCollector) Warm() {
	_, _ = c.snapshot(false)
}

// staticFor returns the cached sysfs attributes of a device, reading them
// when the device is new, was re-created (another MAJ:MIN, or counters that
// went backwards) or its entry expired.
func (c *diskstatsCollector) staticFor(s *blockdevice.Diskstats, now time.Time, pass **sysfsPass) *deviceStatic {
	ios := s.ReadIOs + s.WriteIOs
	st, ok := c.static[s.DeviceName]
	if ok && st.major == s.MajorNumber && st.minor == s.MinorNumber && ios >= st.ios && now.Before(st.expires) {
		st.ios = ios
		return st
	}
	if *pass == nil {
		*pass = &sysfsPass{topo: blockdev.NewTopology(c.sysfs)}
	}
	st = (*pass).readStatic(s.DeviceName, s.MajorNumber, s.MinorNumber)
	if st.dir == "" {
		c.logger.Debug("diskstats: device not in sysfs", "device", s.DeviceName)
	}
	st.included = c.included(s.DeviceName)
	for _, disk := range st.disks {
		if c.included(disk) {
			st.joinDisks = append(st.joinDisks, disk)
		}
	}
	values := make([]string, 0, len(diskInfoLabels))
	values = append(values, s.DeviceName)
	for _, v := range st.infoValues {
		// sysfs strings come from device firmware: a byte that is not
		// UTF-8 would make a const metric panic mid-scrape.
		values = append(values, strings.ToValidUTF8(v, "\uFFFD"))
	}
	st.infoLabels, st.infoValues = values, nil
	st.ios = ios
	st.expires = now.Add(staticRefresh + rand.N(staticRefresh/4))
	c.static[s.DeviceName] = st
	return st
}

// metricsOf builds a device's constant series.
func (c *diskstatsCollector) metricsOf(st *deviceStatic) *deviceMetrics {
	name := st.infoLabels[0]
	m := &deviceMetrics{device: labelPairs("device", name),
		info: prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, st.infoLabels...)}
	for _, disk := range st.joinDisks {
		m.joins = append(m.joins, prometheus.MustNewConstMetric(c.parentInfo, prometheus.GaugeValue, 1, name, disk))
	}
	return m
}

// sysfsPass reads the sysfs attributes of the devices new to a scrape:
// one topology and one read buffer for them all.
type sysfsPass struct {
	topo *blockdev.Topology
	buf  []byte
}

func (p *sysfsPass) readStatic(name string, major, minor uint32) *deviceStatic {
	dir := p.topo.SysfsDir(name)
	// A partition has no queue/ or device/ of its own: identity and block
	// sizes are its disk's.
	attrDir := dir
	if disk, isPart := p.topo.WholeDisk(name); isPart {
		attrDir = p.topo.SysfsDir(disk)
	}
	st := &deviceStatic{major: major, minor: minor, disks: p.topo.PhysicalDisks(name), dir: dir}
	if dir == "" {
		st.infoValues = []string{u32(major), u32(minor), "", "", "", "", "", "", "", "", "", ""}
		return st
	}
	// Attributes are opened relative to the device's directory, so each
	// open walks two or three path components rather than the whole path.
	attrFD := p.openDir(attrDir)
	defer p.closeDir(attrFD)
	devFD := attrFD
	if attrDir != dir {
		devFD = p.openDir(dir)
		defer p.closeDir(devFD)
	}
	attr := func(fd int, rel string) string { return strings.TrimSpace(string(p.read(fd, rel))) }
	first := func(fd int, rels ...string) string {
		for _, r := range rels {
			if v := attr(fd, r); v != "" {
				return v
			}
		}
		return ""
	}
	serial := first(attrFD, "device/serial", "serial") // NVMe, virtio-blk
	if serial == "" {
		serial = vpdSerial(p.read(attrFD, "device/vpd_pg80")) // SCSI / SATA behind libata
	}
	// The kernel names every device-mapper disk dm-N and every md array
	// mdN or md_dN (drivers/md/dm.c, md.c): only they have dm/ or md/,
	// and no other device is asked for them.
	var dmName, dmUUID, mdLevel string
	switch {
	case strings.HasPrefix(name, "dm-"):
		dmName, dmUUID = attr(devFD, "dm/name"), attr(devFD, "dm/uuid")
	case strings.HasPrefix(name, "md"):
		mdLevel = attr(devFD, "md/level")
	}
	st.infoValues = []string{
		u32(major), u32(minor),
		first(attrFD, "device/model"),
		serial,
		first(attrFD, "wwid", "device/wwid"),
		first(attrFD, "device/rev", "device/firmware_rev"),
		attr(attrFD, "queue/rotational"),
		attr(attrFD, "queue/logical_block_size"),
		attr(attrFD, "queue/physical_block_size"),
		dmName, dmUUID, mdLevel,
	}
	return st
}

// openDir opens a device's sysfs directory for openat; -1 when it cannot.
func (p *sysfsPass) openDir(dir string) int {
	if dir == "" {
		return -1
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

func (p *sysfsPass) closeDir(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// read returns the content of a sysfs attribute rel under the directory
// dirFD, nil when it cannot be read, valid until the next read. Open,
// read, close: a sysfs attribute comes whole in one read (its show() fills
// at most a page), so a short read is its end, where os.ReadFile adds a
// stat, a second read and a new buffer per file.
func (p *sysfsPass) read(dirFD int, rel string) []byte {
	if dirFD < 0 {
		return nil
	}
	fd, err := unix.Openat(dirFD, rel, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	if p.buf == nil {
		p.buf = make([]byte, 8192)
	}
	n := 0
	for {
		m, err := unix.Read(fd, p.buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil
		}
		n += m
		if n < len(p.buf) {
			return p.buf[:n]
		}
		p.buf = append(p.buf, make([]byte, len(p.buf))...)
	}
}

// vpdSerial reads the unit serial number from a SCSI VPD page 0x80: a 4-byte
// header whose byte 3 is the length, then the serial in ASCII.
func vpdSerial(b []byte) string {
	if len(b) < 4 || b[1] != 0x80 {
		return ""
	}
	n := int(b[3])
	if 4+n > len(b) {
		n = len(b) - 4
	}
	return strings.TrimSpace(strings.Trim(string(b[4:4+n]), "\x00"))
}

// parseDiskstats reads /proc/diskstats as procfs's parser does (lines of
// fewer than 14 fields left out, fields past the 20th ignored, a field
// that is not a number an error), splitting fields by hand: its Sscanf per
// line was a third of a steady scrape's CPU at 10,000 devices (go run
// ./bench diskstats-10000).
func parseDiskstats(b []byte) ([]blockdevice.Diskstats, error) {
	out := make([]blockdevice.Diskstats, 0, bytes.Count(b, []byte{'\n'})+1)
	// One line's fields, parsed into d, which is copied out whole.
	var d blockdevice.Diskstats
	counters := [...]*uint64{&d.ReadIOs, &d.ReadMerges, &d.ReadSectors, &d.ReadTicks, &d.WriteIOs, &d.WriteMerges,
		&d.WriteSectors, &d.WriteTicks, &d.IOsInProgress, &d.IOsTotalTicks, &d.WeightedIOTicks, &d.DiscardIOs,
		&d.DiscardMerges, &d.DiscardSectors, &d.DiscardTicks, &d.FlushRequestsCompleted, &d.TimeSpentFlushing}
	for n := 1; len(b) > 0; n++ {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		d = blockdevice.Diskstats{}
		fields := 0
		for f := range bytes.FieldsSeq(line) {
			if fields == diskstatsFieldsFlush {
				break
			}
			var err error
			switch fields {
			case 0, 1:
				var v uint64
				v, err = strconv.ParseUint(string(f), 10, 32)
				if fields == 0 {
					d.MajorNumber = uint32(v)
				} else {
					d.MinorNumber = uint32(v)
				}
			case 2:
				d.DeviceName = string(f)
			default:
				*counters[fields-3], err = strconv.ParseUint(string(f), 10, 64)
			}
			if err != nil {
				return nil, fmt.Errorf("line %d, field %d: %q is not a counter", n, fields+1, f)
			}
			fields++
		}
		if fields >= 14 {
			d.IoStatsCount = fields
			out = append(out, d)
		}
	}
	return out, nil
}

// labelPairs is the single-label set {name="value"}.
func labelPairs(name, value string) []*dto.LabelPair {
	return []*dto.LabelPair{{Name: &name, Value: &value}}
}

// diskCounter and diskGauge are const metrics whose label pairs are shared
// and never modified, with the dto value inside them, so emitting one costs
// a single small allocation (a thousand-disk scrape emits twenty thousand).
type diskCounter struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	value  float64
	dto    dto.Counter
}

func (m *diskCounter) Desc() *prometheus.Desc { return m.desc }

func (m *diskCounter) Write(out *dto.Metric) error {
	out.Label = m.labels
	m.dto.Value = &m.value
	out.Counter = &m.dto
	return nil
}

type diskGauge struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	value  float64
	dto    dto.Gauge
}

func (m *diskGauge) Desc() *prometheus.Desc { return m.desc }

func (m *diskGauge) Write(out *dto.Metric) error {
	out.Label = m.labels
	m.dto.Value = &m.value
	out.Gauge = &m.dto
	return nil
}

func u32(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
