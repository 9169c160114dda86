package probes

import (
	"errors"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/blockdev"
	"github.com/diskcanary/diskcanary/internal/config"
)

// walProbe is the etcd WAL pattern as etcd does it in steady state:
// block-size appends into a segment preallocated with fallocate mode 0, cut
// anew only when full and kept open across bursts, an fdatasync after each
// append, and a gap between one op's end and the next one's start (fio's
// thinktime), because an fdatasync after a gap costs more than one issued
// back to back (go run ./bench daemon-vs-fio, go run ./bench
// etcd-vs-daemon). Each burst starts with one untimed op, so no timed op
// follows the idle time between bursts, which etcd at the paced rate never
// has.
type walProbe struct {
	name    string
	bs      int64
	ops     int // fdatasyncs per burst, the priming one included
	gap     time.Duration
	layout  string
	segment int64 // append: the segment size
	minFree int64
	file    string // the WAL file's name in dir

	s   *site
	run *runner // the running burst's
	bud *budget // shared by the filesystem's WAL probes; nil in check
	fd  int
	off int64 // the next write's offset
	buf []byte
	// this burst's fdatasync latencies, for the flush check
	syncs []time.Duration
	// the device's sysfs stat file, -1 when there is none, and a buffer
	// for its line (17 counters of up to 20 digits)
	statFD  int
	statBuf [512]byte
}

func newWALProbe(c config.Probe, file string) *walProbe {
	seg := int64(c.SegmentSize)
	if c.Layout == config.LayoutOverwrite {
		seg = int64(c.Ops) * int64(c.BlockSize)
	}
	return &walProbe{name: c.Name, bs: int64(c.BlockSize), ops: c.Ops, gap: *c.Gap, layout: c.Layout,
		segment: seg, minFree: int64(c.MinFree), file: file, fd: -1, statFD: -1}
}

func (w *walProbe) path() string { return filepath.Join(w.s.dir.path, w.file) }

// open allocates the write buffer; the segment is laid out by prepare.
func (w *walProbe) open(s *site) error {
	w.s = s
	buf, err := alignedBuffer(int(w.bs))
	if err != nil {
		return err
	}
	// Non-zero, incompressible payload: some devices and filesystems
	// short-cut zeros.
	fillRandom(buf)
	w.buf = buf
	w.syncs = make([]time.Duration, 0, w.ops)
	if s.backing.Device != "" {
		// No stat file (an unusual sysfs): the flush check goes without.
		// (SysfsDir of "" would resolve class/block itself: ask only for a device.)
		if dir := blockdev.SysfsDir(s.sysfs, s.backing.Device); dir != "" {
			if fd, err := unix.Open(filepath.Join(dir, "stat"), unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
				w.statFD = fd
			}
		}
	}
	return nil
}

// prepare lays out the segment (append) or the fully written file
// (overwrite). It is setup I/O: it runs under the device's gate.
func (w *walProbe) prepare(_ *inflight, _ *atomic.Bool) (int64, error) {
	if w.layout == config.LayoutOverwrite {
		return w.prepareOverwrite()
	}
	return 0, w.cutSegment()
}

// cutSegment replaces the segment with a new preallocated one, as etcd
// does when its segment is full.
func (w *walProbe) cutSegment() error {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
	if err := w.s.dir.checkFree(w.segment, w.minFree); err != nil {
		return err
	}
	fd, err := w.s.dir.create(w.file, 0)
	if err != nil {
		return err
	}
	// Mode 0 (extend the file) is what etcd's fileutil.Preallocate does.
	if err := unix.Fallocate(fd, 0, 0, w.segment); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		unix.Close(fd)
		_ = w.s.dir.remove(w.file)
		return &opError{"fallocate", w.path(), err}
	}
	w.fd, w.off = fd, 0
	return nil
}

// prepareOverwrite writes the overwrite-layout file once, fully, so every
// later burst overwrites allocated, written blocks.
func (w *walProbe) prepareOverwrite() (int64, error) {
	if fd, err := w.s.dir.open(w.file, unix.O_RDWR); err == nil {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Size == w.segment && st.Blocks*512 >= w.segment {
			w.fd = fd
			return 0, nil
		}
		unix.Close(fd)
	}
	if err := w.s.dir.checkFree(w.segment, w.minFree); err != nil {
		return 0, err
	}
	fd, err := w.s.dir.create(w.file, 0)
	if err != nil {
		return 0, err
	}
	chunk := make([]byte, w.segment)
	fillRandom(chunk)
	if _, err := unix.Pwrite(fd, chunk, 0); err != nil {
		unix.Close(fd)
		return 0, &opError{"write", w.path(), err}
	}
	if err := unix.Fdatasync(fd); err != nil {
		unix.Close(fd)
		return 0, &opError{"fdatasync", w.path(), err}
	}
	w.fd = fd
	return pagesDirtied(0, w.segment), nil
}

// burst runs one burst of ops: the priming op, then ops-1 timed ones.
func (w *walProbe) burst(r *runner, ops int) (burstResult, error) {
	var res burstResult
	if w.bud != nil && !w.bud.allow() {
		return res, errBudget
	}
	if w.layout != config.LayoutOverwrite && w.off+int64(ops)*w.bs > w.segment {
		if err := w.cutSegment(); err != nil {
			return res, err
		}
	}
	flushesBefore, flushKnown := w.deviceFlushes()
	w.syncs = w.syncs[:0]
	w.run = r
	// The priming op: it follows the idle time since the last burst, which
	// etcd at the paced rate never has, so it is not measured.
	next, dirtied, err := runWAL(w.fd, w.buf, w.off, 1, 0, unrecorded{}, r, w.path())
	if err == nil && ops > 1 {
		var d int64
		next, d, err = runWAL(w.fd, w.buf, next, ops-1, w.gap, w, r, w.path())
		dirtied += d
	}
	res.written = dirtied
	if w.bud != nil {
		w.bud.spend(dirtied + int64(ops)*journalPerSync)
	}
	w.off = next
	if w.layout == config.LayoutOverwrite {
		w.off = next % w.segment
	}
	if err != nil {
		return res, err
	}
	flushesAfter, _ := w.deviceFlushes()
	noFlush := w.s.backing.Device == "" || flushKnown && flushesAfter == flushesBefore
	res.flushLies = flushLies(w.syncs, noFlush)
	return res, nil
}

// recordWAL keeps the burst's fdatasyncs for the flush check, then hands
// the op to the runner's recorder.
func (w *walProbe) recordWAL(write, sync time.Duration) {
	if len(w.syncs) < cap(w.syncs) {
		w.syncs = append(w.syncs, sync)
	}
	w.run.rec.recordWAL(write, sync)
}

// flushLies flags a flush that never reaches a device: fdatasync faster
// than any real device could persist (p50 < 10 µs) while the block device
// saw no flush request (noFlush: or there is no block device at all). It
// sorts syncs.
func flushLies(syncs []time.Duration, noFlush bool) bool {
	if len(syncs) == 0 {
		return false
	}
	slices.Sort(syncs)
	return noFlush && syncs[len(syncs)/2] < 10*time.Microsecond
}

// deviceFlushes reads the completed-flush count of the probe's device from
// its sysfs stat file (the line /proc/diskstats has for it, without the
// names), opened once; ok is false when the kernel (< 5.5) counts no
// flushes or the device is unknown. It runs twice a burst, so it neither
// allocates nor reads every device's line.
func (w *walProbe) deviceFlushes() (uint64, bool) {
	if w.statFD < 0 {
		return 0, false
	}
	n, err := unix.Pread(w.statFD, w.statBuf[:], 0)
	if err != nil {
		return 0, false
	}
	return flushesCompleted(w.statBuf[:n])
}

// flushesCompleted is field 16 of a block device's stat line (flush
// requests completed, Documentation/block/stat.rst); ok is false for a
// line of fewer than 17 fields.
func flushesCompleted(line []byte) (flushes uint64, ok bool) {
	field, inField := 0, false
	var v uint64
	for _, c := range line {
		if c >= '0' && c <= '9' {
			if !inField {
				field++
				inField, v = true, 0
			}
			v = v*10 + uint64(c-'0')
			if field == 16 {
				flushes = v
			}
			continue
		}
		inField = false
	}
	return flushes, field >= 17
}

// close closes the WAL file and removes the append layout's segment; the
// overwrite layout's file is kept for the next start. A segment that cannot
// be removed (a filesystem turned read-only) is logged: it holds its
// segment_size until someone removes it.
func (w *walProbe) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		if w.layout != config.LayoutOverwrite && w.s != nil && w.s.dir != nil {
			if err := w.s.dir.remove(w.file); err != nil && !errors.Is(err, unix.ENOENT) {
				w.s.log.Warn("cannot remove the probe's WAL segment: it is left behind", "probe", w.name, "path", w.path(), "err", err)
			}
		}
	}
	w.fd = -1
	if w.statFD >= 0 {
		unix.Close(w.statFD)
		w.statFD = -1
	}
	freeBuffer(w.buf)
	w.buf = nil
}
