// Package cgroupio reads who did I/O on each block device from the kernel's
// cgroup accounting: cgroup v2's io.stat (and io.pressure), or, where v2's io
// controller is not in use, the cgroup v1 blkio controller's throttle
// counters. It owns the walk of the cgroup tree (bounded in count and time),
// the parsers, the names people use for a cgroup (Kubernetes pod and
// container, systemd unit) and the per-device ranking with its counters.
// The contention collector and `diskcanary top` share all of it.
package cgroupio

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/diskcanary/diskcanary/internal/hostpath"
)

// Dev is a block device number, as io.stat and blkio name devices.
type Dev struct{ Major, Minor uint32 }

func (d Dev) String() string { return fmt.Sprintf("%d:%d", d.Major, d.Minor) }

// Counts is what one cgroup did on one device. WaitUsec is iocost's
// cost.wait (v2 with CONFIG_BLK_CGROUP_IOCOST on): the time the cgroup's
// I/O was held back by the controller; HasWait says the kernel has it.
type Counts struct {
	ReadBytes, WriteBytes, DiscardBytes uint64
	ReadOps, WriteOps, DiscardOps       uint64
	WaitUsec                            uint64
	HasWait                             bool
}

// Bytes is the bytes moved in any direction, the ranking's measure.
func (c Counts) Bytes() uint64 { return c.ReadBytes + c.WriteBytes + c.DiscardBytes }

// Ops is the operations of any kind, the ranking's tie-break.
func (c Counts) Ops() uint64 { return c.ReadOps + c.WriteOps + c.DiscardOps }

func (c Counts) zero() bool { return c.Bytes() == 0 && c.Ops() == 0 && c.WaitUsec == 0 }

// add adds d to c, field by field.
func (c *Counts) add(d Counts) {
	c.ReadBytes += d.ReadBytes
	c.WriteBytes += d.WriteBytes
	c.DiscardBytes += d.DiscardBytes
	c.ReadOps += d.ReadOps
	c.WriteOps += d.WriteOps
	c.DiscardOps += d.DiscardOps
	c.WaitUsec += d.WaitUsec
	c.HasWait = c.HasWait || d.HasWait
}

// since is c - prev field by field, a field that went backwards (a reset:
// blkio.reset_stats, a re-created cgroup) counting 0: a counter never
// goes down and a reset is not I/O.
func (c Counts) since(prev Counts) Counts {
	d := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	return Counts{
		ReadBytes: d(c.ReadBytes, prev.ReadBytes), WriteBytes: d(c.WriteBytes, prev.WriteBytes), DiscardBytes: d(c.DiscardBytes, prev.DiscardBytes),
		ReadOps: d(c.ReadOps, prev.ReadOps), WriteOps: d(c.WriteOps, prev.WriteOps), DiscardOps: d(c.DiscardOps, prev.DiscardOps),
		WaitUsec: d(c.WaitUsec, prev.WaitUsec), HasWait: c.HasWait,
	}
}

// Source is a cgroup hierarchy that accounts block I/O.
type Source struct {
	// Version is 1 (the blkio controller) or 2 (the io controller).
	Version int
	// Root is the hierarchy's mountpoint (or any directory laid out like it).
	Root string
}

// Files that say which kind of hierarchy a directory is.
const (
	v1BytesFile = "blkio.throttle.io_service_bytes"
	v1OpsFile   = "blkio.throttle.io_serviced"
	v2StatFile  = "io.stat"
	v2PSIFile   = "io.pressure"
)

// ErrNoAccounting is Detect's error when no hierarchy accounts block I/O.
var ErrNoAccounting = errors.New("no cgroup accounts block I/O: neither cgroup v2 with the io controller nor the cgroup v1 blkio controller is mounted")

// Detect finds the hierarchy that accounts block I/O. With root set, root is
// that hierarchy (v1 when it has blkio's files, else v2). Otherwise, under
// sysfs's fs/cgroup: v2 at the top (the unified layout) or at unified/ (the
// hybrid layout) when its io controller is enabled there, else v1's blkio/.
// v2 wins where both exist: once io is on in v2 the kernel accounts there.
func Detect(paths hostpath.Paths, root string) (Source, error) {
	if root != "" {
		if exists(filepath.Join(root, v1BytesFile)) {
			return Source{Version: 1, Root: root}, nil
		}
		if exists(filepath.Join(root, "cgroup.controllers")) {
			if !hasController(root, "io") {
				return Source{}, fmt.Errorf("%s: a cgroup v2 hierarchy without the io controller (cgroup.controllers has no io)", root)
			}
			return Source{Version: 2, Root: root}, nil
		}
		return Source{}, fmt.Errorf("%s: neither a cgroup v1 blkio hierarchy (%s) nor a cgroup v2 one (cgroup.controllers)", root, v1BytesFile)
	}
	base := paths.Sys("fs", "cgroup")
	for _, dir := range []string{base, filepath.Join(base, "unified")} {
		if hasController(dir, "io") {
			return Source{Version: 2, Root: dir}, nil
		}
	}
	if dir := filepath.Join(base, "blkio"); exists(filepath.Join(dir, v1BytesFile)) {
		return Source{Version: 1, Root: dir}, nil
	}
	return Source{}, ErrNoAccounting
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func hasController(dir, name string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return false
	}
	for _, c := range strings.Fields(string(b)) {
		if c == name {
			return true
		}
	}
	return false
}

// SelfCgroup is the cgroup of the process reading procfs's self/cgroup, in
// the source's hierarchy ("/" for the root); "" when it cannot be told.
// v2's line is "0::PATH"; v1's is "ID:CONTROLLERS:PATH" with blkio among
// the controllers (proc(5), cgroups(7)).
func SelfCgroup(paths hostpath.Paths, version int) string {
	b, err := os.ReadFile(paths.Proc("self", "cgroup"))
	if err != nil {
		return ""
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		parts := strings.SplitN(string(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case version == 2 && parts[0] == "0" && parts[1] == "":
			return parts[2]
		case version == 1:
			for _, c := range strings.Split(parts[1], ",") {
				if c == "blkio" {
					return parts[2]
				}
			}
		}
	}
	return ""
}

// DeviceNames maps device numbers to the kernel names /proc/diskstats
// gives them (the diskstats collector's device label), reusing into.
// active reports the devices that did I/O since boot.
func DeviceNames(paths hostpath.Paths, into map[Dev]DeviceName) (map[Dev]DeviceName, error) {
	b, err := os.ReadFile(paths.Proc("diskstats"))
	if err != nil {
		return into, err
	}
	if into == nil {
		into = map[Dev]DeviceName{}
	}
	clear(into)
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		f := bytes.Fields(line)
		if len(f) < 14 {
			continue
		}
		maj, err1 := strconv.ParseUint(string(f[0]), 10, 32)
		min, err2 := strconv.ParseUint(string(f[1]), 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		// Fields 4 and 8 are reads and writes completed (iostats.rst).
		active := string(f[3]) != "0" || string(f[7]) != "0"
		into[Dev{uint32(maj), uint32(min)}] = DeviceName{Name: string(f[2]), Active: active}
	}
	return into, nil
}

// DeviceName is a device's kernel name and whether it did any I/O since boot.
type DeviceName struct {
	Name   string
	Active bool
}

// Defaults shared by the contention collector and `diskcanary top`.
const (
	// DefaultTop is how many cgroups per device are named.
	DefaultTop = 10
	// DefaultMaxCgroups bounds one walk: a busy Kubernetes node has a
	// few hundred cgroups, so this is a hostile or broken tree.
	DefaultMaxCgroups = 20000
	// DefaultBudget bounds one walk's time.
	DefaultBudget = time.Second
)
