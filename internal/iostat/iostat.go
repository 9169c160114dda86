// Package iostat computes sysstat's `iostat -dx` extended device statistics
// from two /proc/diskstats samples. The formulas are sysstat 12.x's
// (iostat.c and rd_stats.c compute_ext_disk_stats), including the interval:
// the difference of two /proc/uptime readings in hundredths of a second, so
// that diskcanary iostat and iostat agree to the printed digit. Where the
// two samples are not one interval of one device (re-created, new, a
// 32-bit wrap, uptime gone back), Compute's rules decide instead: no row
// ever shows what a disk cannot do.
package iostat

import (
	"errors"
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

// Field widths of /proc/diskstats (Documentation/admin-guide/iostats.rst,
// block/genhd.c diskstats_show): requests, merges and sectors are unsigned
// long, 32 bits on a 32-bit kernel; every millisecond field is unsigned int,
// 32 bits on every kernel. A field that fell can only have wrapped at 2^32.
const wrap32 = 1 << 32

// tickSlackMS is how far a time may pass what the interval can hold and
// still be that interval read with two clocks: /proc/uptime in hundredths,
// io_ticks in jiffies (10 ms at HZ=100, and one jiffy at each busy
// period's start), the per-op times truncated to ms. Within it busy time is
// clamped to the elapsed time; beyond it the interval is inconsistent.
const tickSlackMS = 30

// Restarted reports whether the device was re-created between the two
// samples: one of its request counts fell. Those counts only grow while the
// device exists. A 32-bit kernel's count passing 2^32 looks the same and,
// read as a re-creation, costs that interval's line, never a wrong number.
func Restarted(prev, curr Counters) bool {
	return curr.RdIOs < prev.RdIOs || curr.WrIOs < prev.WrIOs ||
		curr.DcIOs < prev.DcIOs || curr.FlIOs < prev.FlIOs
}

// longDelta is curr-prev of a merge or sector count while the request
// counts did not fall: a fall is a 32-bit kernel's wrap, undone modulo
// 2^32, and only a value a 32-bit field can hold can have wrapped.
func longDelta(field string, prev, curr uint64) (float64, error) {
	switch {
	case curr >= prev:
		return float64(curr - prev), nil
	case prev < wrap32:
		return float64(curr + wrap32 - prev), nil
	}
	return 0, fmt.Errorf("%s went back from %d to %d while the requests did not, and past 2^32 it cannot have wrapped", field, prev, curr)
}

// msDelta is curr-prev of a millisecond field; limit is the most its
// requests can have added, wrapLimit the most they added within the
// interval. A fall is a wrap at 2^32 ms only where the unwrapped delta fits
// wrapLimit; a delta past its limit is an interval no device can produce.
func msDelta(field string, prev, curr uint64, wrapLimit, limit float64) (float64, error) {
	if curr >= prev {
		if d := float64(curr - prev); d <= limit {
			return d, nil
		}
		return 0, fmt.Errorf("%s grew %d ms, more than the %.0f ms possible over this interval", field, curr-prev, limit)
	}
	if prev < wrap32 {
		if d := float64(curr + wrap32 - prev); d <= wrapLimit {
			return d, nil
		}
	}
	return 0, fmt.Errorf("%s went back from %d to %d ms, and no wrap at 2^32 fits the %.0f ms this interval can hold", field, prev, curr, wrapLimit)
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
// taken itvCS hundredths of a second apart, uptimeCS after boot; for the
// report since boot prev is the zero Counters and itvCS the uptime, as in
// iostat. It returns an error instead of a row when the counters are not
// one interval of one device (see Restarted, longDelta, msDelta and the
// limits below), so that no row breaks what a disk can do: %util ≤ 100,
// aqu-sz no more than the requests could queue, no bytes without requests.
func Compute(prev, curr Counters, itvCS, uptimeCS uint64) (Ext, error) {
	if itvCS == 0 {
		return Ext{}, errors.New("no elapsed time to divide by")
	}
	if Restarted(prev, curr) {
		return Ext{}, fmt.Errorf("re-created since the previous sample: requests went back (reads %d to %d, writes %d to %d, discards %d to %d, flushes %d to %d)",
			prev.RdIOs, curr.RdIOs, prev.WrIOs, curr.WrIOs, prev.DcIOs, curr.DcIOs, prev.FlIOs, curr.FlIOs)
	}
	rIOs, wIOs, dIOs, fIOs := float64(curr.RdIOs-prev.RdIOs), float64(curr.WrIOs-prev.WrIOs),
		float64(curr.DcIOs-prev.DcIOs), float64(curr.FlIOs-prev.FlIOs)
	var err error
	keep := func(d float64, e error) float64 {
		if err == nil {
			err = e
		}
		return d
	}
	rMrg, wMrg, dMrg := keep(longDelta("reads merged", prev.RdMerges, curr.RdMerges)),
		keep(longDelta("writes merged", prev.WrMerges, curr.WrMerges)),
		keep(longDelta("discards merged", prev.DcMerges, curr.DcMerges))
	rSec, wSec, dSec := keep(longDelta("sectors read", prev.RdSectors, curr.RdSectors)),
		keep(longDelta("sectors written", prev.WrSectors, curr.WrSectors)),
		keep(longDelta("sectors discarded", prev.DcSectors, curr.DcSectors))

	// The kernel adds a request's whole time when it completes (and older
	// kernels time_in_queue as it passes, for at most the requests that
	// completed or are in flight at the second sample): no request is older
	// than the uptime, and one that hung before the interval may bring all
	// of it, so that is limit. A wrap is read only where the requests'
	// time inside the interval holds it, as it always does for a real wrap
	// but for a request carried across it (that row is then skipped).
	elapsed, uptime := float64(itvCS)*10, float64(max(uptimeCS, itvCS))*10
	ms := func(field string, p, c uint64, reqs float64) float64 {
		return keep(msDelta(field, p, c, reqs*elapsed+tickSlackMS, reqs*uptime+tickSlackMS))
	}
	rTicks := ms("read ms", prev.RdTicks, curr.RdTicks, rIOs)
	wTicks := ms("write ms", prev.WrTicks, curr.WrTicks, wIOs)
	dTicks := ms("discard ms", prev.DcTicks, curr.DcTicks, dIOs)
	fTicks := ms("flush ms", prev.FlTicks, curr.FlTicks, fIOs)
	queued := ms("time_in_queue", prev.RqTicks, curr.RqTicks, rIOs+wIOs+dIOs+fIOs+float64(curr.InFlight))
	// No more busy time than elapsed time: %util ≤ 100.
	busyLimit := elapsed + tickSlackMS
	busy := min(keep(msDelta("io_ticks", prev.TotTicks, curr.TotTicks, busyLimit, busyLimit)), elapsed)
	if err != nil {
		return Ext{}, err
	}
	for _, op := range []struct {
		name      string
		ios, secs float64
	}{{"read", rIOs, rSec}, {"written", wIOs, wSec}, {"discarded", dIOs, dSec}} {
		if op.secs > 0 && op.ios == 0 {
			return Ext{}, fmt.Errorf("%.0f sectors %s with no request completed", op.secs, op.name)
		}
	}
	return Ext{
		RPS:     perSecond(rIOs, itvCS),
		RkBPS:   perSecond(rSec, itvCS) / 2, // 512-byte sectors → kB
		RrqmPS:  perSecond(rMrg, itvCS),
		RrqmPct: ratio(rMrg, rMrg+rIOs) * 100,
		RAwait:  ratio(rTicks, rIOs),
		RareqSz: ratio(rSec, rIOs) / 2,

		WPS:     perSecond(wIOs, itvCS),
		WkBPS:   perSecond(wSec, itvCS) / 2,
		WrqmPS:  perSecond(wMrg, itvCS),
		WrqmPct: ratio(wMrg, wMrg+wIOs) * 100,
		WAwait:  ratio(wTicks, wIOs),
		WareqSz: ratio(wSec, wIOs) / 2,

		DPS:     perSecond(dIOs, itvCS),
		DkBPS:   perSecond(dSec, itvCS) / 2,
		DrqmPS:  perSecond(dMrg, itvCS),
		DrqmPct: ratio(dMrg, dMrg+dIOs) * 100,
		DAwait:  ratio(dTicks, dIOs),
		DareqSz: ratio(dSec, dIOs) / 2,

		FPS:    perSecond(fIOs, itvCS),
		FAwait: ratio(fTicks, fIOs),

		// time_in_queue is in ms: per second of interval that is the
		// average number of requests in flight.
		AquSz: perSecond(queued, itvCS) / 1000,
		// io_ticks is in ms: ms busy per second of interval, /10 is percent.
		Util: perSecond(busy, itvCS) / 10,
	}, nil
}

// Interval is the time between two snapshots in hundredths of a second:
// sysstat's get_interval, the /proc/uptime difference, while uptime moved
// forward. When it did not (a restored VM, a time namespace, two reads in
// one hundredth) the elapsed monotonic time between the reads is used; when
// that is missing too (snapshots read from files) or under 5 ms, it is 0:
// no elapsed time, so no rates, never sysstat's 1/100 s guard.
func Interval(prev, curr Snapshot) uint64 {
	if curr.UptimeCS > prev.UptimeCS {
		return curr.UptimeCS - prev.UptimeCS
	}
	if !prev.Taken.IsZero() && !curr.Taken.IsZero() {
		if cs := curr.Taken.Sub(prev.Taken).Round(10*time.Millisecond) / (10 * time.Millisecond); cs > 0 {
			return uint64(cs)
		}
	}
	return 0
}
