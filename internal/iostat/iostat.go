// Package iostat computes sysstat's `iostat -dx` extended device statistics
// from two /proc/diskstats samples. The formulas are sysstat 12.x's
// (iostat.c and rd_stats.c compute_ext_disk_stats), including the interval:
// the difference of two /proc/uptime readings in hundredths of a second, so
// that diskcanary iostat and iostat agree to the printed digit.
package iostat

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs/blockdevice"
)

// Counters are one device's /proc/diskstats counters in kernel units:
// requests, 512-byte sectors and milliseconds.
type Counters struct {
	RdIOs, RdMerges, RdSectors, RdTicks uint64
	WrIOs, WrMerges, WrSectors, WrTicks uint64
	InFlight                            uint64
	TotTicks                            uint64 // io_ticks: ms with at least one request in flight
	RqTicks                             uint64 // time_in_queue: ms weighted by requests in flight
	DcIOs, DcMerges, DcSectors, DcTicks uint64 // Linux 4.18+
	FlIOs, FlTicks                      uint64 // Linux 5.5+
}

// Device is one /proc/diskstats line.
type Device struct {
	Name         string
	Major, Minor uint32
	// Fields is the line's field count including major, minor and name:
	// 14, 18 (discards) or 20 (flushes).
	Fields int
	Counters
}

// HasDiscard and HasFlush say whether the kernel provides those columns.
func (d Device) HasDiscard() bool { return d.Fields >= 18 }
func (d Device) HasFlush() bool   { return d.Fields >= 20 }

// Snapshot is one reading of the system: uptime then every device.
type Snapshot struct {
	// UptimeCS is /proc/uptime in hundredths of a second, the unit sysstat
	// keeps its interval in.
	UptimeCS uint64
	// Taken is when the uptime was read, with Go's monotonic clock
	// reading: the interval when /proc/uptime did not move forward (see
	// Interval). Zero for the "since boot" snapshot.
	Taken   time.Time
	Devices []Device
}

// Read takes a snapshot from procfs (the host's /proc). Like iostat it reads
// the uptime first, then /proc/diskstats.
func Read(fs blockdevice.FS, procfs string) (Snapshot, error) {
	up, err := ReadUptime(procfs)
	if err != nil {
		return Snapshot{}, err
	}
	taken := time.Now()
	stats, err := fs.ProcDiskstats()
	if err != nil {
		return Snapshot{}, fmt.Errorf("read diskstats: %w", err)
	}
	s := Snapshot{UptimeCS: up, Taken: taken, Devices: make([]Device, len(stats))}
	for i, d := range stats {
		s.Devices[i] = Device{
			Name: d.DeviceName, Major: d.MajorNumber, Minor: d.MinorNumber, Fields: d.IoStatsCount,
			Counters: Counters{
				RdIOs: d.ReadIOs, RdMerges: d.ReadMerges, RdSectors: d.ReadSectors, RdTicks: d.ReadTicks,
				WrIOs: d.WriteIOs, WrMerges: d.WriteMerges, WrSectors: d.WriteSectors, WrTicks: d.WriteTicks,
				InFlight: d.IOsInProgress, TotTicks: d.IOsTotalTicks, RqTicks: d.WeightedIOTicks,
				DcIOs: d.DiscardIOs, DcMerges: d.DiscardMerges, DcSectors: d.DiscardSectors, DcTicks: d.DiscardTicks,
				FlIOs: d.FlushRequestsCompleted, FlTicks: d.TimeSpentFlushing,
			},
		}
	}
	return s, nil
}

// ReadUptime reads /proc/uptime as sysstat does: "SEC.CC" → SEC*100 + CC.
func ReadUptime(procfs string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(procfs, "uptime"))
	if err != nil {
		return 0, fmt.Errorf("read uptime: %w", err)
	}
	return ParseUptime(string(b))
}

// ParseUptime parses the first field of /proc/uptime into hundredths.
func ParseUptime(s string) (uint64, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return 0, fmt.Errorf("parse uptime %q: empty", s)
	}
	secs, cents, _ := strings.Cut(fields[0], ".")
	sec, err := strconv.ParseUint(secs, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse uptime %q: %w", s, err)
	}
	var cent uint64
	if cents != "" {
		// The kernel prints exactly two decimals; sysstat's %lu.%lu takes
		// the digits as hundredths.
		if cent, err = strconv.ParseUint(cents, 10, 64); err != nil {
			return 0, fmt.Errorf("parse uptime %q: %w", s, err)
		}
	}
	return sec*100 + cent, nil
}

// Ext is one row of `iostat -dx`: sysstat 12.x's columns, in its units
// (kB = 1024 bytes, awaits in ms, request sizes in kB, percentages 0-100).
type Ext struct {
	RPS, RkBPS, RrqmPS, RrqmPct, RAwait, RareqSz float64
	WPS, WkBPS, WrqmPS, WrqmPct, WAwait, WareqSz float64
	DPS, DkBPS, DrqmPS, DrqmPct, DAwait, DareqSz float64
	FPS, FAwait                                  float64
	AquSz, Util                                  float64
}

// Restarted reports whether the device was removed and re-created between
// the two samples: its requests, summed, went backwards and so did each of
// its sector counters that had moved at all. That is sysstat 12.x's test;
// it then computes the whole row against zero counters (the activity since
// the device came back), never some fields since the restart and others as
// deltas.
func Restarted(prev, curr Counters) bool {
	ios := func(c Counters) uint64 { return c.RdIOs + c.WrIOs + c.DcIOs + c.FlIOs }
	back := func(p, c uint64) bool { return p == 0 || c < p }
	return ios(curr) < ios(prev) &&
		back(prev.RdSectors, curr.RdSectors) &&
		back(prev.WrSectors, curr.WrSectors) &&
		back(prev.DcSectors, curr.DcSectors)
}

// countDelta is curr-prev for the fields the kernel prints as unsigned
// long: requests, merges, sectors. 64 bits do not wrap, and a device that
// restarted is handled by Restarted, so a count that went backwards on its
// own has no delta to trust: it counts as no activity, where sysstat's
// unsigned subtraction would print about 2^64 per second.
func countDelta(prev, curr uint64) float64 {
	if curr < prev {
		return 0
	}
	return float64(curr - prev)
}

// msDelta is curr-prev for the millisecond fields (read/write/discard/
// flush ticks, io_ticks, time_in_queue). The kernel prints them as
// unsigned int on every architecture (block/genhd.c diskstats_show, "%u"),
// so they wrap at 2^32 ms, about 49.7 days of summed request time: a busy
// disk wraps rd_ticks within weeks. As sysstat 12.6 keeps these fields in
// unsigned int and subtracts them there, a value that went backwards has
// wrapped once and the difference is curr + 2^32 - prev.
func msDelta(prev, curr uint64) float64 {
	if curr >= prev {
		return float64(curr - prev)
	}
	if prev-curr > 1<<32 {
		return 0 // not a 32-bit field: no reading of the kernel gives this
	}
	return float64(curr + 1<<32 - prev)
}

// perSecond is sysstat's S_VALUE(m, n, p): a delta over an interval in
// hundredths of a second, times 100.
func perSecond(d float64, itvCS uint64) float64 {
	return d / float64(itvCS) * 100
}

// ratio is sysstat's "x ? a / x : 0.0".
func ratio(num, den float64) float64 {
	if den == 0 {
		return 0
	}
	return num / den
}

// Compute returns the extended statistics between two samples of one device
// taken itvCS hundredths of a second apart. For the first report since boot
// prev is the zero Counters and itvCS the uptime, as in iostat; a device
// re-created in between (Restarted) is computed since it came back.
func Compute(prev, curr Counters, itvCS uint64) Ext {
	if itvCS == 0 {
		// iostat never divides by a zero interval: get_interval returns 1.
		itvCS = 1
	}
	if Restarted(prev, curr) {
		prev = Counters{}
	}
	rIOs, wIOs, dIOs, fIOs := countDelta(prev.RdIOs, curr.RdIOs), countDelta(prev.WrIOs, curr.WrIOs),
		countDelta(prev.DcIOs, curr.DcIOs), countDelta(prev.FlIOs, curr.FlIOs)
	rMrg, wMrg, dMrg := countDelta(prev.RdMerges, curr.RdMerges), countDelta(prev.WrMerges, curr.WrMerges),
		countDelta(prev.DcMerges, curr.DcMerges)
	rSec, wSec, dSec := countDelta(prev.RdSectors, curr.RdSectors), countDelta(prev.WrSectors, curr.WrSectors),
		countDelta(prev.DcSectors, curr.DcSectors)
	return Ext{
		RPS:     perSecond(rIOs, itvCS),
		RkBPS:   perSecond(rSec, itvCS) / 2, // 512-byte sectors → kB
		RrqmPS:  perSecond(rMrg, itvCS),
		RrqmPct: ratio(rMrg, rMrg+rIOs) * 100,
		RAwait:  ratio(msDelta(prev.RdTicks, curr.RdTicks), rIOs),
		RareqSz: ratio(rSec, rIOs) / 2,

		WPS:     perSecond(wIOs, itvCS),
		WkBPS:   perSecond(wSec, itvCS) / 2,
		WrqmPS:  perSecond(wMrg, itvCS),
		WrqmPct: ratio(wMrg, wMrg+wIOs) * 100,
		WAwait:  ratio(msDelta(prev.WrTicks, curr.WrTicks), wIOs),
		WareqSz: ratio(wSec, wIOs) / 2,

		DPS:     perSecond(dIOs, itvCS),
		DkBPS:   perSecond(dSec, itvCS) / 2,
		DrqmPS:  perSecond(dMrg, itvCS),
		DrqmPct: ratio(dMrg, dMrg+dIOs) * 100,
		DAwait:  ratio(msDelta(prev.DcTicks, curr.DcTicks), dIOs),
		DareqSz: ratio(dSec, dIOs) / 2,

		FPS:    perSecond(fIOs, itvCS),
		FAwait: ratio(msDelta(prev.FlTicks, curr.FlTicks), fIOs),

		// time_in_queue is in ms: per second of interval that is the
		// average number of requests in flight.
		AquSz: perSecond(msDelta(prev.RqTicks, curr.RqTicks), itvCS) / 1000,
		// io_ticks is in ms: ms busy per second of interval, /10 is percent.
		Util: perSecond(msDelta(prev.TotTicks, curr.TotTicks), itvCS) / 10,
	}
}

// Interval is the time between two snapshots in hundredths of a second:
// the /proc/uptime difference as sysstat's get_interval takes it, while
// uptime moved forward. When it did not (a restored VM, a time namespace,
// two reads in one hundredth) sysstat's rates read 200× high or 0; the
// elapsed monotonic time between the reads is used instead, and only
// without it (or under 5 ms) sysstat's guard of 1.
func Interval(prev, curr Snapshot) uint64 {
	if curr.UptimeCS > prev.UptimeCS {
		return curr.UptimeCS - prev.UptimeCS
	}
	if !prev.Taken.IsZero() && !curr.Taken.IsZero() {
		if cs := curr.Taken.Sub(prev.Taken).Round(10*time.Millisecond) / (10 * time.Millisecond); cs > 0 {
			return uint64(cs)
		}
	}
	return 1
}
