package cgroupio

import (
	"bytes"
	"strconv"
)

// DevStat is one device's line (or lines) of a cgroup's stat file.
type DevStat struct {
	Dev Dev
	Counts
}

// find returns the entry for dev in stats, appending a zero one if there is none.
func find(stats []DevStat, dev Dev) ([]DevStat, *DevStat) {
	for i := range stats {
		if stats[i].Dev == dev {
			return stats, &stats[i]
		}
	}
	stats = append(stats, DevStat{Dev: dev})
	return stats, &stats[len(stats)-1]
}

// parseDev reads "MAJ:MIN".
func parseDev(b []byte) (Dev, bool) {
	i := bytes.IndexByte(b, ':')
	if i <= 0 {
		return Dev{}, false
	}
	maj, err1 := strconv.ParseUint(string(b[:i]), 10, 32)
	min, err2 := strconv.ParseUint(string(b[i+1:]), 10, 32)
	if err1 != nil || err2 != nil {
		return Dev{}, false
	}
	return Dev{uint32(maj), uint32(min)}, true
}

// parseV2Stat reads a cgroup v2 io.stat: one line per device,
// "MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N", then any
// keys a controller adds (iocost's cost.*, io.latency's depth=, avg_lat=),
// of which cost.wait (microseconds) is kept and the rest skipped
// (Documentation/admin-guide/cgroup-v2.rst, "IO Interface Files"). It
// appends to stats and returns the lines it could not read.
func parseV2Stat(b []byte, stats []DevStat) ([]DevStat, int) {
	bad := 0
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var (
			dev   Dev
			c     Counts
			ok    = true
			first = true
		)
		for f := range bytes.FieldsSeq(line) {
			if first {
				dev, ok = parseDev(f)
				first = false
				if !ok {
					break
				}
				continue
			}
			eq := bytes.IndexByte(f, '=')
			if eq <= 0 {
				ok = false
				break
			}
			var dst *uint64
			switch string(f[:eq]) {
			case "rbytes":
				dst = &c.ReadBytes
			case "wbytes":
				dst = &c.WriteBytes
			case "dbytes":
				dst = &c.DiscardBytes
			case "rios":
				dst = &c.ReadOps
			case "wios":
				dst = &c.WriteOps
			case "dios":
				dst = &c.DiscardOps
			case "cost.wait":
				dst, c.HasWait = &c.WaitUsec, true
			default:
				continue
			}
			v, err := strconv.ParseUint(string(f[eq+1:]), 10, 64)
			if err != nil {
				ok = false
				break
			}
			*dst = v
		}
		if !ok {
			bad++
			continue
		}
		var s *DevStat
		stats, s = find(stats, dev)
		s.Counts = c
	}
	return stats, bad
}

// v1Zero is the whole of a v1 blkio stat file for a cgroup that did no I/O.
var v1Zero = []byte("Total 0\n")

// parseV1 reads a cgroup v1 blkio.throttle.io_service_bytes (ops false) or
// blkio.throttle.io_serviced (ops true): lines "MAJ:MIN OP N" with OP one of
// Read, Write, Sync, Async, Discard (newer kernels) and Total, then one
// "Total N" over every device (Documentation/admin-guide/cgroup-v1/blkio-
// controller.rst). Read, Write and Discard are kept: Sync, Async and Total
// count the same I/O again. It adds to stats and returns the lines it could
// not read.
func parseV1(b []byte, stats []DevStat, ops bool) ([]DevStat, int) {
	bad := 0
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		var f [4][]byte
		n := 0
		for w := range bytes.FieldsSeq(line) {
			if n == len(f) {
				n++
				break
			}
			f[n] = w
			n++
		}
		switch {
		case n == 0:
			continue
		case n == 2 && string(f[0]) == "Total":
			if _, err := strconv.ParseUint(string(f[1]), 10, 64); err != nil {
				bad++
			}
			continue
		case n != 3:
			bad++
			continue
		}
		dev, ok := parseDev(f[0])
		v, err := strconv.ParseUint(string(f[2]), 10, 64)
		if !ok || err != nil {
			bad++
			continue
		}
		var s *DevStat
		var dst *uint64
		switch string(f[1]) {
		case "Read":
			stats, s = find(stats, dev)
			dst = pick(ops, &s.ReadOps, &s.ReadBytes)
		case "Write":
			stats, s = find(stats, dev)
			dst = pick(ops, &s.WriteOps, &s.WriteBytes)
		case "Discard":
			stats, s = find(stats, dev)
			dst = pick(ops, &s.DiscardOps, &s.DiscardBytes)
		case "Sync", "Async", "Total":
			continue
		default:
			bad++
			continue
		}
		*dst = v
	}
	return stats, bad
}

func pick(first bool, a, b *uint64) *uint64 {
	if first {
		return a
	}
	return b
}

// parsePressure reads a PSI file's "some" and "full" totals (microseconds):
// lines "some avg10=… avg60=… avg300=… total=N" and "full …"
// (Documentation/accounting/psi.rst).
func parsePressure(b []byte) (some, full uint64, ok bool) {
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		var kind []byte
		for f := range bytes.FieldsSeq(line) {
			if kind == nil {
				kind = f
				continue
			}
			v, found := bytes.CutPrefix(f, []byte("total="))
			if !found {
				continue
			}
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return 0, 0, false
			}
			switch string(kind) {
			case "some":
				some, ok = n, true
			case "full":
				full = n
			}
		}
	}
	return some, full, ok
}
