package cgroupio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Limits bound one walk of the cgroup tree: a host with a hundred thousand
// cgroups, or a cgroupfs that answers slowly, gives a partial pass
// (Pass.Truncated), never an unbounded one.
type Limits struct {
	// MaxCgroups is the most cgroup directories one pass visits.
	MaxCgroups int
	// Budget is the longest one pass may take.
	Budget time.Duration
}

// Truncation reasons.
const (
	TruncatedCount = "max_cgroups"
	TruncatedTime  = "time_budget"
)

// Cgroup is one cgroup that did I/O, with its path under the hierarchy's
// root ("/" is the root) and each device's counters as the kernel has them.
type Cgroup struct {
	Path  string
	Stats []DevStat
}

// Pass is one walk's result. Cgroups are in walk order, each after its
// parent.
type Pass struct {
	Cgroups []Cgroup
	// Walked is the cgroup directories visited; Malformed the stat lines
	// that could not be read; Vanished the cgroups removed mid-walk.
	Walked, Malformed, Vanished int
	// Truncated is why the walk stopped early ("" when it did not).
	Truncated string
	Duration  time.Duration
}

// Reader walks a Source. It keeps its buffers between passes; one Reader
// serves one goroutine.
type Reader struct {
	Source
	Limits
	now   func() time.Time
	buf   []byte
	dents []byte
	stack []string
	path  []byte
	// visited, when set, is called after each directory is read (tests).
	visited func(rel string)
}

// NewReader returns a reader of src within lim.
func NewReader(src Source, lim Limits) *Reader {
	src.Root = filepath.Clean(src.Root)
	if src.Root == "/" {
		src.Root = "" // rel paths start with "/"
	}
	return &Reader{Source: src, Limits: lim, now: time.Now}
}

// Read walks the tree into p, reusing p's slices. A cgroup that vanishes
// mid-walk is counted and skipped, as is a line the parser cannot read;
// only an unreadable root is an error.
func (r *Reader) Read(p *Pass) error {
	start := r.now()
	for i := range p.Cgroups {
		p.Cgroups[i].Stats = p.Cgroups[i].Stats[:0]
	}
	p.Cgroups = p.Cgroups[:0]
	p.Walked, p.Malformed, p.Vanished, p.Truncated = 0, 0, 0, ""
	if r.dents == nil {
		r.dents = make([]byte, 32<<10)
		r.buf = make([]byte, 8<<10)
	}
	r.stack = append(r.stack[:0], "/")
	for len(r.stack) > 0 {
		if r.MaxCgroups > 0 && p.Walked >= r.MaxCgroups {
			p.Truncated = TruncatedCount
			break
		}
		// The clock is read once per 32 directories: a directory costs
		// microseconds, a clock read is not free at a hundred thousand.
		if r.Budget > 0 && p.Walked%32 == 31 && r.now().Sub(start) > r.Budget {
			p.Truncated = TruncatedTime
			break
		}
		rel := r.stack[len(r.stack)-1]
		r.stack = r.stack[:len(r.stack)-1]
		err := r.visit(p, rel)
		if r.visited != nil {
			r.visited(rel)
		}
		switch {
		case err == nil:
			p.Walked++
		case rel == "/":
			return err
		case isGone(err):
			p.Vanished++
		default:
			// A directory that cannot be read (permissions): its subtree
			// is left out, like one that vanished.
			p.Vanished++
		}
	}
	p.Duration = r.now().Sub(start)
	return nil
}

// errNoController is a live v2 cgroup without io.stat: the io controller
// is not enabled for it (its parent's cgroup.subtree_control lacks io).
var errNoController = errors.New("no io controller")

// isGone is an error of a cgroup removed while it was read: its directory
// or files are gone (ENOENT) or its files no longer answer (ENODEV).
func isGone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV)
}

// visit reads one cgroup directory: its stat files, and its subdirectories
// onto the stack.
func (r *Reader) visit(p *Pass, rel string) error {
	fd, err := r.openDir(rel)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	switch err := r.readStats(fd, p, rel); {
	case errors.Is(err, errNoController) && rel != "/":
		// Controllers are enabled top down: no descendant has it either.
		return nil
	case errors.Is(err, errNoController):
		// A root without io.stat (kernels before it had one there):
		// its children may have theirs.
	case err != nil:
		return err
	}
	// Subdirectories, from the kernel's dirents: only directories are
	// cgroups, and d_type says which without a stat per entry.
	for {
		n, err := unix.Getdents(fd, r.dents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		for b := r.dents[:n]; len(b) >= 19; {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				break
			}
			typ := b[18]
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if typ != unix.DT_DIR || string(name) == "." || string(name) == ".." {
				continue
			}
			if rel == "/" {
				r.stack = append(r.stack, "/"+string(name))
			} else {
				r.stack = append(r.stack, rel+"/"+string(name))
			}
		}
	}
}

// readStats reads the cgroup's stat files into a new entry of p when it did
// any I/O.
func (r *Reader) readStats(dirFD int, p *Pass, rel string) error {
	var stats []DevStat
	if n := len(p.Cgroups); n < cap(p.Cgroups) {
		stats = p.Cgroups[:n+1][n].Stats[:0]
	}
	var bad int
	switch r.Version {
	case 2:
		b, err := r.read(dirFD, v2StatFile)
		if errors.Is(err, unix.ENOENT) && unix.Faccessat(dirFD, "cgroup.controllers", unix.F_OK, 0) == nil {
			return errNoController
		}
		if err != nil {
			return err
		}
		stats, bad = parseV2Stat(b, stats)
	default:
		b, err := r.read(dirFD, v1BytesFile)
		if err != nil {
			return err
		}
		if bytes.Equal(b, v1Zero) {
			return nil
		}
		stats, bad = parseV1(b, stats, false)
		p.Malformed += bad
		if b, err = r.read(dirFD, v1OpsFile); err != nil {
			return err
		}
		stats, bad = parseV1(b, stats, true)
	}
	p.Malformed += bad
	if len(stats) == 0 {
		return nil
	}
	p.Cgroups = append(p.Cgroups, Cgroup{Path: rel, Stats: stats})
	return nil
}

// read returns a file under dirFD whole, valid until the next read. A
// cgroup stat file is generated at open and read sequentially; the buffer
// grows for a host with many devices and is kept.
func (r *Reader) read(dirFD int, name string) ([]byte, error) {
	fd, err := r.openat(dirFD, name, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	n := 0
	for {
		if n == len(r.buf) {
			if len(r.buf) >= 4<<20 {
				return r.buf[:n], nil // a stat file past 4 MiB is not one the kernel wrote
			}
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
		m, err := unix.Read(fd, r.buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return r.buf[:n], nil
		}
		n += m
	}
}

// Pressure reads a v2 cgroup's io.pressure totals in microseconds ("some":
// at least one task waited for I/O; "full": every task did). ok is false on
// v1, or when the kernel has no PSI for it.
func (r *Reader) Pressure(rel string) (some, full uint64, ok bool) {
	if r.Version != 2 {
		return 0, 0, false
	}
	fd, err := r.openDir(rel)
	if err != nil {
		return 0, 0, false
	}
	defer unix.Close(fd)
	if r.buf == nil {
		r.buf = make([]byte, 8<<10)
	}
	b, err := r.read(fd, v2PSIFile)
	if err != nil {
		return 0, 0, false
	}
	return parsePressure(b)
}

// openDir opens the directory of the cgroup at rel.
func (r *Reader) openDir(rel string) (int, error) {
	name := r.Root
	switch {
	case rel != "/":
		r.path = append(append(r.path[:0], r.Root...), rel...)
		return r.openat(unix.AT_FDCWD, "", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	case name == "":
		name = "/"
	}
	return r.openat(unix.AT_FDCWD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
}

// openat is openat(2) with the name built in a buffer the reader keeps
// (name, or r.path when name is ""): x/sys/unix copies every path into a
// new NUL-terminated slice, two allocations per cgroup a pass.
func (r *Reader) openat(dirFD int, name string, flags int) (int, error) {
	if name != "" {
		r.path = append(r.path[:0], name...)
	}
	if bytes.IndexByte(r.path, 0) >= 0 {
		return -1, unix.EINVAL
	}
	r.path = append(r.path, 0)
	for {
		fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirFD), uintptr(unsafe.Pointer(&r.path[0])), uintptr(flags), 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return -1, errno
		}
		return int(fd), nil
	}
}
