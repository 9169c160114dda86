package probes

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/config"
)

// readProbe is the 4 KiB O_DIRECT random read: uniform random aligned
// offsets over a working set pre-written with random data (never-written
// regions return zeros fast and flatter the disk), or over a block device
// opened read-only.
type readProbe struct {
	name       string
	bs         int64
	workingSet int64
	minFree    int64
	device     string // a block device instead of a working-set file
	file       string // the working set's name in the directory

	s      *site
	fd     int
	buf    []byte
	picker *blockPicker
	times  readTimes
	// odirectRefused: the directory's filesystem refuses O_DIRECT, so
	// reads there would come from the page cache.
	odirectRefused bool
	// buffered reads without O_DIRECT: check's explicit opt-in only.
	buffered bool
}

func newReadProbe(c config.Probe, file string) *readProbe {
	return &readProbe{name: c.Name, bs: int64(c.BlockSize), workingSet: int64(c.WorkingSet),
		minFree: int64(c.MinFree), device: c.Device, file: file, fd: -1}
}

func (r *readProbe) open(s *site) error {
	r.s = s
	if r.device != "" {
		return nil
	}
	r.odirectRefused = s.dir.refusesODirect(filePrefix + r.name + "-odirect-check")
	return nil
}

// prepare writes the working set if it is not there yet (setup I/O, under
// the device's gate) and opens it, or opens the block device.
func (r *readProbe) prepare(fl *inflight, stop *atomic.Bool) (int64, error) {
	if r.device != "" {
		return 0, r.useReadFD(r.s.devFD, r.s.devSize, 0)
	}
	var written int64
	if !r.s.dir.readsetValid(r.file, r.workingSet) {
		if err := r.s.dir.checkFree(r.workingSet, r.minFree); err != nil {
			return 0, err
		}
		// The first start's one long silence (a minute or more for the
		// default 1 GiB on a slow disk) is explained as it starts, and its
		// end gives the sequential write rate as a first sign of the disk.
		file := filepath.Join(r.s.dir.path, r.file)
		r.s.log.Info(fmt.Sprintf("laying out the read working set: %s in %s", config.ByteSize(r.workingSet).Show(), r.s.dir.path),
			"probe", r.name, "file", file, "note", "written once and kept across restarts; to remove it, stop diskcanary and delete "+file)
		start := time.Now()
		n, err := r.s.dir.writeReadset(r.file, r.workingSet, fl, stop)
		written = n
		if err != nil {
			return written, err
		}
		took := time.Since(start)
		r.s.log.Info(fmt.Sprintf("laying out the read working set: done (%s s, %.0f MB/s)",
			strconv.FormatFloat(took.Seconds(), 'f', secondsDecimals(took), 64), float64(n)/1e6/took.Seconds()),
			"probe", r.name, "file", file, "bytes", n)
	}
	flags := unix.O_RDONLY | unix.O_DIRECT
	if r.buffered {
		flags = unix.O_RDONLY
	}
	fd, err := r.s.dir.open(r.file, flags)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return written, fmt.Errorf("%s: %w", r.s.dir.path, errNoODirect)
		}
		return written, err
	}
	return written, r.useReadFD(fd, r.workingSet, readsetHeader)
}

func (r *readProbe) useReadFD(fd int, size, skip int64) error {
	lo := (skip + r.bs - 1) / r.bs
	hi := size / r.bs
	if hi-lo < 1 {
		if fd != r.s.devFD {
			unix.Close(fd)
		}
		return fmt.Errorf("%s: working set of %d bytes holds no %d-byte block", r.name, size, r.bs)
	}
	buf, err := alignedBuffer(int(r.bs))
	if err != nil {
		if fd != r.s.devFD {
			unix.Close(fd)
		}
		return err
	}
	r.fd, r.buf = fd, buf
	r.picker = newBlockPicker(lo, hi)
	return nil
}

func (r *readProbe) burst(run *runner, ops int) (burstResult, error) {
	n, err := runReads(r.fd, r.buf, r.picker, &r.times, ops, run, r.s.where())
	return burstResult{read: n}, err
}

func (r *readProbe) close() {
	// A block device's fd belongs to the site.
	if r.fd >= 0 && (r.s == nil || r.fd != r.s.devFD) {
		unix.Close(r.fd)
	}
	r.fd = -1
	freeBuffer(r.buf)
	r.buf = nil
}

// secondsDecimals gives a duration enough decimals to read as more than 0
// (a small working set takes milliseconds) without false precision for
// the default's seconds.
func secondsDecimals(d time.Duration) int {
	switch {
	case d >= 10*time.Second:
		return 0
	case d >= time.Second:
		return 1
	}
	return 3
}
