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
	Devices  []Device
}

// Read takes a snapshot from procfs (the host's /proc). Like iostat it reads
// the uptime first, then /proc/diskstats.
func Read(fs blockdevice.FS, procfs string) (Snapshot, error) {
	up, err := ReadUptime(procfs)
	if err != nil {
		return Snapshot{}, err
	}
	stats, err := fs.ProcDiskstats()
	if err != nil {
		return Snapshot{}, fmt.Errorf("read diskstats: %w", err)
	}
	s := Snapshot{UptimeCS: up, Devices: make([]Device, len(stats))}
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

// delta is curr-prev. A counter that went backwards means the device was
// re-created (or, on 32-bit kernels, wrapped); counting from zero gives the
// activity since then instead of sysstat's unsigned wrap-around.
func delta(prev, curr uint64) float64 {
	if curr < prev {
		return float64(curr)
	}
	return float64(curr - prev)
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
// prev is the zero Counters and itvCS the uptime, as in iostat.
func Compute(prev, curr Counters, itvCS uint64) Ext {
	if itvCS == 0 {
		// iostat never divides by a zero interval: get_interval returns 1.
		itvCS = 1
	}
	rIOs, wIOs, dIOs, fIOs := delta(prev.RdIOs, curr.RdIOs), delta(prev.WrIOs, curr.WrIOs),
		delta(prev.DcIOs, curr.DcIOs), delta(prev.FlIOs, curr.FlIOs)
	rMrg, wMrg, dMrg := delta(prev.RdMerges, curr.RdMerges), delta(prev.WrMerges, curr.WrMerges),
		delta(prev.DcMerges, curr.DcMerges)
	rSec, wSec, dSec := delta(prev.RdSectors, curr.RdSectors), delta(prev.WrSectors, curr.WrSectors),
		delta(prev.DcSectors, curr.DcSectors)
	return Ext{
		RPS:     perSecond(rIOs, itvCS),
		RkBPS:   perSecond(rSec, itvCS) / 2, // 512-byte sectors → kB
		RrqmPS:  perSecond(rMrg, itvCS),
		RrqmPct: ratio(rMrg, rMrg+rIOs) * 100,
		RAwait:  ratio(delta(prev.RdTicks, curr.RdTicks), rIOs),
		RareqSz: ratio(rSec, rIOs) / 2,

		WPS:     perSecond(wIOs, itvCS),
		WkBPS:   perSecond(wSec, itvCS) / 2,
		WrqmPS:  perSecond(wMrg, itvCS),
		WrqmPct: ratio(wMrg, wMrg+wIOs) * 100,
		WAwait:  ratio(delta(prev.WrTicks, curr.WrTicks), wIOs),
		WareqSz: ratio(wSec, wIOs) / 2,

		DPS:     perSecond(dIOs, itvCS),
		DkBPS:   perSecond(dSec, itvCS) / 2,
		DrqmPS:  perSecond(dMrg, itvCS),
		DrqmPct: ratio(dMrg, dMrg+dIOs) * 100,
		DAwait:  ratio(delta(prev.DcTicks, curr.DcTicks), dIOs),
		DareqSz: ratio(dSec, dIOs) / 2,

		FPS:    perSecond(fIOs, itvCS),
		FAwait: ratio(delta(prev.FlTicks, curr.FlTicks), fIOs),

		// time_in_queue is in ms: per second of interval that is the
		// average number of requests in flight.
		AquSz: perSecond(delta(prev.RqTicks, curr.RqTicks), itvCS) / 1000,
		// io_ticks is in ms: ms busy per second of interval, /10 is percent.
		Util: perSecond(delta(prev.TotTicks, curr.TotTicks), itvCS) / 10,
	}
}

// Interval is sysstat's get_interval: the uptime difference, and 1 when the
// clock did not move, so that no division is by zero.
func Interval(prevCS, currCS uint64) uint64 {
	if currCS <= prevCS {
		return 1
	}
	return currCS - prevCS
}
