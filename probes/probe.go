package probes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs/blockdevice"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/blockdev"
	"github.com/diskcanary/diskcanary/internal/config"
)

// probe is one configured probe and its state. Only its own goroutine
// touches the fields below `mu-free`; the scrape reads fl and metrics.
type probe struct {
	cfg    config.Probe
	log    *slog.Logger
	m      *Metrics
	procfs string
	sysfs  string
	fl     *inflight
	stop   atomic.Bool
	budget func(dev uint64) *budget
	gate   func(dev uint64) chan struct{}

	// set by loop, owned by the probe goroutine
	done   <-chan struct{} // closed at shutdown
	tid    int             // the loop's thread
	raised bool            // at raised priority (priority.go)

	// set up by setup(), owned by the probe goroutine
	ready        bool
	dir          *probeDir
	target       blockdev.Target
	devID        uint64
	fd           int // randread: working set or device; overwrite: the WAL file
	buf          []byte
	picker       *blockPicker
	bud          *budget
	devGate      chan struct{} // held for a whole cycle: probes never time each other
	overOff      int64
	obsWrite     prometheus.Observer
	obsSync      prometheus.Observer
	obsRead      prometheus.Observer
	syncs        []time.Duration // this cycle's fdatasync latencies, for the flush check
	stalled      bool            // watchdog's last verdict, for logging transitions
	flushFlagged bool
}

func (p *probe) recordWAL(w, s time.Duration) {
	p.obsWrite.Observe(w.Seconds())
	p.obsSync.Observe(s.Seconds())
	if len(p.syncs) < cap(p.syncs) {
		p.syncs = append(p.syncs, s)
	}
}

func (p *probe) recordRead(d time.Duration) { p.obsRead.Observe(d.Seconds()) }

func (p *probe) walFile() string       { return filePrefix + p.cfg.Name + "-wal" }
func (p *probe) overwriteFile() string { return filePrefix + p.cfg.Name + "-overwrite" }
func (p *probe) readsetFile() string   { return filePrefix + p.cfg.Name + "-readset" }

// loop runs cycles until ctx is done. Setup is retried every interval, so a
// directory that appears later, or a remount read-write, recovers by itself.
func (p *probe) loop(ctx context.Context) {
	p.done = ctx.Done()
	// Raised once for the loop's life (priority.go); setup drops back.
	tid, raised, err := raisePriority()
	defer lowerPriority(tid, raised)
	p.tid, p.raised = tid, raised
	if err != nil {
		p.log.Info("probe measures at normal CPU priority: when the CPUs are saturated its latencies include scheduling delay; grant CAP_SYS_NICE (or LimitNICE=-10 under systemd)",
			"probe", p.cfg.Name, "err", err)
	}
	defer p.teardown()
	// A random first delay within the jitter window spreads a fleet's
	// probes, but metrics appear soon after start.
	wait := time.Duration(rand.Float64() * p.cfg.Jitter * float64(p.cfg.Interval))
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		p.runCycle()
		j := 1 + p.cfg.Jitter*(2*rand.Float64()-1)
		wait = time.Duration(float64(p.cfg.Interval) * j)
	}
}

func (p *probe) runCycle() {
	err := p.cycle()
	name := p.cfg.Name
	p.m.runs.WithLabelValues(name).Inc()
	p.m.lastRun.WithLabelValues(name).Set(float64(time.Now().UnixNano()) / 1e9)
	if err != nil {
		reason := reasonOf(err)
		p.m.failures.WithLabelValues(name, reason).Inc()
		p.m.success.WithLabelValues(name).Set(0)
		if reason != reasonInterrupted {
			p.log.Warn("probe cycle failed", "probe", name, "reason", reason, "err", err)
		}
		// Re-resolve the target next time: the disk may have been remounted.
		if !errors.Is(err, errBudget) && !errors.Is(err, errLowSpace) {
			p.teardown()
		}
		return
	}
	p.m.success.WithLabelValues(name).Set(1)
}

func (p *probe) cycle() error {
	if !p.ready {
		if err := atNormalPriority(p.tid, p.raised, p.setup); err != nil {
			return err
		}
	}
	select {
	case p.devGate <- struct{}{}:
		defer func() { <-p.devGate }()
	case <-p.done:
		return errInterrupted
	}
	switch {
	case p.cfg.Kind == config.KindRandRead:
		n, err := runReads(p.fd, p.buf, p.picker, p.cfg.Ops, p, p.fl, &p.stop, p.cfg.Dir+p.cfg.Device, false)
		p.m.readBytes.WithLabelValues(p.cfg.Name).Add(float64(n))
		return err
	case p.cfg.Layout == config.LayoutOverwrite:
		return p.walCycle(false)
	default:
		return p.walCycle(true)
	}
}

// walCycle is one burst of WAL-pattern writes. fresh: a new fallocated file
// each cycle, as etcd's new WAL segments and first-run fio see it.
func (p *probe) walCycle(fresh bool) error {
	size := int64(p.cfg.Ops) * int64(p.cfg.BlockSize)
	if !p.bud.allow() {
		return errBudget
	}
	fd, off := p.fd, p.overOff
	if fresh {
		if err := p.dir.checkFree(size, int64(p.cfg.MinFree)); err != nil {
			return err
		}
		var err error
		fd, err = p.dir.create(p.walFile(), 0)
		if err != nil {
			return err
		}
		defer func() {
			unix.Close(fd)
			_ = p.dir.remove(p.walFile())
		}()
		if err := unix.Fallocate(fd, 0, 0, size); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
			return &opError{"fallocate", filepath.Join(p.dir.path, p.walFile()), err}
		}
		off = 0
	}
	flushesBefore, flushOK := p.deviceFlushes()
	p.syncs = p.syncs[:0]
	next, dirtied, err := runWAL(fd, p.buf, off, p.cfg.Ops, p, p.fl, &p.stop, filepath.Join(p.dir.path, p.walFile()), false)
	p.m.written.WithLabelValues(p.cfg.Name).Add(float64(dirtied))
	p.bud.spend(dirtied + int64(len(p.syncs))*journalPerSync)
	if !fresh {
		p.overOff = next % (int64(p.cfg.Ops) * int64(p.cfg.BlockSize))
	}
	if err != nil {
		return err
	}
	flushesAfter, _ := p.deviceFlushes()
	p.checkFlush(flushOK && flushesAfter == flushesBefore)
	return nil
}

// checkFlush flags a flush that never reaches a device: fdatasync that is
// faster than any real device could persist (p50 < 10 µs) while the block
// device saw no flush request (or there is no block device at all).
func (p *probe) checkFlush(noFlushSeen bool) {
	if len(p.syncs) == 0 {
		return
	}
	slices.Sort(p.syncs)
	p50 := p.syncs[len(p.syncs)/2]
	lying := p50 < 10*time.Microsecond && (noFlushSeen || p.target.Device == "")
	v := 0.0
	if lying {
		v = 1
	}
	if lying && !p.flushFlagged {
		p.log.Warn("fdatasync is not reaching the device: results describe a cache, not the disk",
			"probe", p.cfg.Name, "path", p.cfg.Dir, "device", p.target.Device, "fdatasync_p50", p50)
	}
	p.flushFlagged = lying
	p.m.warning.WithLabelValues(p.cfg.Name, "flush_not_reaching_device").Set(v)
}

// deviceFlushes reads the completed-flush count of the probe's device from
// /proc/diskstats; ok is false when the kernel (< 5.5) or device has none.
func (p *probe) deviceFlushes() (uint64, bool) {
	if p.target.Device == "" {
		return 0, false
	}
	fs, err := blockdevice.NewFS(p.procfs, p.sysfs)
	if err != nil {
		return 0, false
	}
	stats, err := fs.ProcDiskstats()
	if err != nil {
		return 0, false
	}
	for _, s := range stats {
		if s.DeviceName == p.target.Device {
			return s.FlushRequestsCompleted, s.IoStatsCount >= 20
		}
	}
	return 0, false
}

// setup opens and checks the target. It is redone after any failure.
func (p *probe) setup() error {
	p.teardown()
	var err error
	if p.cfg.Device != "" {
		err = p.setupDevice()
	} else {
		err = p.setupDir()
	}
	if err != nil {
		p.teardown()
		return err
	}
	// Bursts on one block device never overlap, whichever probes and
	// directories they come from: a probe must not measure another's I/O.
	// Keyed by the block device under the target, or the filesystem's
	// st_dev when that is unknown.
	dev := p.devID
	if p.target.Major != 0 || p.target.Minor != 0 {
		dev = unix.Mkdev(p.target.Major, p.target.Minor)
	}
	p.devGate = p.gate(dev)
	p.ready = true
	return nil
}

func (p *probe) setupDir() error {
	d, err := openProbeDir(p.cfg.Dir)
	if err != nil {
		return err
	}
	p.dir = d
	t, err := blockdev.Resolve(p.cfg.Dir, p.procfs, p.sysfs)
	if err != nil {
		p.log.Warn("cannot resolve the device under the probe directory", "probe", p.cfg.Name, "err", err)
		t.Path = p.cfg.Dir
	}
	p.target = t
	var st unix.Stat_t
	if unix.Fstat(d.fd, &st) == nil {
		p.devID = st.Dev
	}
	if p.cfg.Kind == config.KindWAL {
		// Only WAL bursts spend the budget; the read working set is
		// written once and then only read.
		p.bud = p.budget(p.devID)
	}
	p.publishTarget()
	p.checkODirect()

	if p.cfg.Kind == config.KindWAL {
		buf, err := alignedBuffer(int(p.cfg.BlockSize))
		if err != nil {
			return err
		}
		// Non-zero, incompressible payload: some devices and filesystems
		// short-cut zeros.
		fillRandom(buf)
		p.buf = buf
		p.syncs = make([]time.Duration, 0, p.cfg.Ops)
		p.obsWrite = p.m.write.WithLabelValues(p.cfg.Name, t.Path, t.Device)
		p.obsSync = p.m.fdatasync.WithLabelValues(p.cfg.Name, t.Path, t.Device)
		if p.cfg.Layout == config.LayoutOverwrite {
			return p.prepareOverwrite()
		}
		return nil
	}
	return p.prepareReadset()
}

// prepareOverwrite writes the overwrite-layout file once, fully, so every
// later cycle overwrites allocated, written blocks.
func (p *probe) prepareOverwrite() error {
	size := int64(p.cfg.Ops) * int64(p.cfg.BlockSize)
	name := p.overwriteFile()
	if fd, err := p.dir.open(name, unix.O_RDWR); err == nil {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Size == size && st.Blocks*512 >= size {
			p.fd = fd
			return nil
		}
		unix.Close(fd)
	}
	if err := p.dir.checkFree(size, int64(p.cfg.MinFree)); err != nil {
		return err
	}
	fd, err := p.dir.create(name, 0)
	if err != nil {
		return err
	}
	chunk := make([]byte, size)
	fillRandom(chunk)
	if _, err := unix.Pwrite(fd, chunk, 0); err != nil {
		unix.Close(fd)
		return &opError{"write", name, err}
	}
	if err := unix.Fdatasync(fd); err != nil {
		unix.Close(fd)
		return &opError{"fdatasync", name, err}
	}
	p.m.written.WithLabelValues(p.cfg.Name).Add(float64(pagesDirtied(0, size)))
	p.fd = fd
	return nil
}

func (p *probe) prepareReadset() error {
	size := int64(p.cfg.WorkingSet)
	name := p.readsetFile()
	if !p.dir.readsetValid(name, size) {
		if err := p.dir.checkFree(size, int64(p.cfg.MinFree)); err != nil {
			return err
		}
		p.log.Info("writing the read working set once (kept across restarts)", "probe", p.cfg.Name,
			"path", filepath.Join(p.dir.path, name), "bytes", size)
		n, err := p.dir.writeReadset(name, size, p.fl)
		p.m.written.WithLabelValues(p.cfg.Name).Add(float64(n))
		if err != nil {
			return err
		}
	}
	fd, err := p.dir.open(name, unix.O_RDONLY|unix.O_DIRECT)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("%s: %w", p.cfg.Dir, errNoODirect)
		}
		return err
	}
	return p.useReadFD(fd, size, readsetHeader)
}

// setupDevice opens a block device read-only with O_DIRECT. It is never
// opened for writing.
func (p *probe) setupDevice() error {
	fd, err := unix.Open(p.cfg.Device, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("%s: %w", p.cfg.Device, errNoODirect)
		}
		return &opError{"open", p.cfg.Device, err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		unix.Close(fd)
		return fmt.Errorf("%s: %w: not a block device", p.cfg.Device, errUnsafe)
	}
	var size uint64
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&size))); e != 0 {
		unix.Close(fd)
		return &opError{"ioctl BLKGETSIZE64", p.cfg.Device, e}
	}
	lbs, err := unix.IoctlGetInt(fd, unix.BLKSSZGET)
	if err == nil && lbs > 0 && int64(p.cfg.BlockSize)%int64(lbs) != 0 {
		unix.Close(fd)
		return fmt.Errorf("%s: block_size %d is not a multiple of the logical block size %d", p.cfg.Device, p.cfg.BlockSize, lbs)
	}
	p.target = blockdev.Target{Path: p.cfg.Device, Major: unix.Major(st.Rdev), Minor: unix.Minor(st.Rdev),
		Device: deviceName(p.sysfs, unix.Major(st.Rdev), unix.Minor(st.Rdev))}
	p.devID = st.Rdev
	p.publishTarget()
	return p.useReadFD(fd, int64(size), 0)
}

func (p *probe) useReadFD(fd int, size, skip int64) error {
	bs := int64(p.cfg.BlockSize)
	lo := (skip + bs - 1) / bs
	hi := size / bs
	if hi-lo < 1 {
		unix.Close(fd)
		return fmt.Errorf("%s: working set of %d bytes holds no %d-byte block", p.cfg.Name, size, bs)
	}
	buf, err := alignedBuffer(int(bs))
	if err != nil {
		unix.Close(fd)
		return err
	}
	p.fd, p.buf = fd, buf
	p.picker = newBlockPicker(lo, hi)
	p.obsRead = p.m.read.WithLabelValues(p.cfg.Name, p.target.Path, p.target.Device)
	return nil
}

// checkODirect reports a filesystem that refuses O_DIRECT (tmpfs, some
// FUSE): reads there would come from the page cache.
func (p *probe) checkODirect() {
	name := filePrefix + p.cfg.Name + "-odirect-check"
	fd, err := p.dir.create(name, unix.O_DIRECT)
	refused := errors.Is(err, unix.EINVAL)
	if err == nil {
		unix.Close(fd)
	}
	_ = p.dir.remove(name)
	v := 0.0
	if refused {
		v = 1
		p.log.Warn("filesystem refuses O_DIRECT: reads cannot bypass the page cache", "probe", p.cfg.Name, "path", p.cfg.Dir)
	}
	p.m.warning.WithLabelValues(p.cfg.Name, "odirect_refused").Set(v)
}

// publishTarget exports target_info and the untrusted-filesystem warning.
func (p *probe) publishTarget() {
	t := p.target
	p.m.targetInfo.DeletePartialMatch(prometheus.Labels{"probe": p.cfg.Name})
	p.m.targetInfo.WithLabelValues(p.cfg.Name, p.cfg.Kind, p.cfg.Layout, t.Path, t.Device, t.FSType, t.Mountpoint).Set(1)
	if p.dir == nil {
		return
	}
	for _, w := range []string{"tmpfs", "overlayfs", "fuse", "zfs", "nfs"} {
		p.m.warning.WithLabelValues(p.cfg.Name, w).Set(0)
	}
	if w := p.dir.fsWarning(); w != "" {
		p.m.warning.WithLabelValues(p.cfg.Name, w).Set(1)
		p.log.Warn("probe directory is on a filesystem that does not tell the truth about disk latency",
			"probe", p.cfg.Name, "path", t.Path, "fstype", t.FSType, "warning", w)
	}
}

func (p *probe) teardown() {
	if p.fd > 0 {
		unix.Close(p.fd)
	}
	p.fd = -1
	freeBuffer(p.buf)
	p.buf = nil
	p.dir.close()
	p.dir = nil
	p.ready = false
}

// deviceName maps MAJ:MIN to the kernel name through sysfs.
func deviceName(sysfs string, major, minor uint32) string {
	link, err := os.Readlink(filepath.Join(sysfs, "dev/block", fmt.Sprintf("%d:%d", major, minor)))
	if err != nil {
		return ""
	}
	return filepath.Base(link)
}

func fillRandom(b []byte) {
	var seed [32]byte
	for i := range seed {
		seed[i] = byte(rand.Uint32())
	}
	_, _ = rand.NewChaCha8(seed).Read(b)
}
