package iostat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs/blockdevice"
	"github.com/stretchr/testify/require"
)

// Two samples 2.00 s apart; every expected value below is worked out by hand
// from sysstat's formulas (S_VALUE = delta / itv * 100, itv in 1/100 s).
var (
	prevC = Counters{RdIOs: 100, RdMerges: 20, RdSectors: 8000, RdTicks: 500,
		WrIOs: 200, WrMerges: 50, WrSectors: 4000, WrTicks: 300,
		TotTicks: 1000, RqTicks: 2000,
		DcIOs: 10, DcSectors: 2048, DcTicks: 5, FlIOs: 40, FlTicks: 8}
	currC = Counters{RdIOs: 300, RdMerges: 70, RdSectors: 24000, RdTicks: 1500,
		WrIOs: 600, WrMerges: 150, WrSectors: 12000, WrTicks: 1100,
		TotTicks: 1500, RqTicks: 3800, InFlight: 2,
		DcIOs: 14, DcMerges: 1, DcSectors: 4096, DcTicks: 13, FlIOs: 140, FlTicks: 58}
)

// compute is Compute for counters that make one interval.
func compute(t *testing.T, prev, curr Counters, itvCS uint64) Ext {
	t.Helper()
	e, err := Compute(prev, curr, itvCS, 100000)
	require.NoError(t, err)
	return e
}

func TestComputeHandWorked(t *testing.T) {
	got := compute(t, prevC, currC, 200)
	want := Ext{
		// 200 reads / 2 s; 16000 sectors = 8000 kB / 2 s; 50 merges / 2 s;
		// 50/(50+200); 1000 ms / 200 reads; 8000 kB / 200 reads.
		RPS: 100, RkBPS: 4000, RrqmPS: 25, RrqmPct: 20, RAwait: 5, RareqSz: 40,
		WPS: 200, WkBPS: 2000, WrqmPS: 50, WrqmPct: 20, WAwait: 2, WareqSz: 10,
		DPS: 2, DkBPS: 512, DrqmPS: 0.5, DrqmPct: 20, DAwait: 2, DareqSz: 256,
		FPS: 50, FAwait: 0.5,
		// 1800 ms of weighted time over 2 s; 500 ms busy of 2000 ms.
		AquSz: 0.9, Util: 25,
	}
	requireExtNear(t, want, got)
}

func TestComputeIdleIsZeroNotNaN(t *testing.T) {
	got := compute(t, currC, currC, 100)
	requireExtNear(t, Ext{}, got)
}

// A device re-created between samples has no row: its requests fell.
func TestComputeCounterReset(t *testing.T) {
	_, err := Compute(currC, Counters{RdIOs: 10, RdSectors: 80, RdTicks: 20}, 100, 100000)
	require.EqualError(t, err, "re-created since the previous sample: requests went back (reads 300 to 10, writes 600 to 0, discards 14 to 0, flushes 140 to 0)")
}

func TestUptime(t *testing.T) {
	cs, err := ParseUptime("2408.15 4382.12\n")
	require.NoError(t, err)
	require.EqualValues(t, 240815, cs)
	cs, err = ParseUptime("17.05 1.00")
	require.NoError(t, err)
	require.EqualValues(t, 1705, cs)
	_, err = ParseUptime("")
	require.Error(t, err)
	require.EqualValues(t, 0, Interval(Snapshot{UptimeCS: 5}, Snapshot{UptimeCS: 5}), "a clock that did not move has no elapsed time")
	require.EqualValues(t, 200, Interval(Snapshot{UptimeCS: 100}, Snapshot{UptimeCS: 300}))
}

func writeProc(t *testing.T, dir, uptime, diskstats string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "uptime"), []byte(uptime), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "diskstats"), []byte(diskstats), 0o644))
}

// The first report is since boot: zero previous counters over the uptime.
func TestReadAndBuildSinceBoot(t *testing.T) {
	proc := t.TempDir()
	writeProc(t, proc, "1000.00 1.00\n", ""+
		"   8       0 sda 5000 0 80000 10000 0 0 0 0 0 20000 30000 0 0 0 0 0 0\n"+
		"   8       1 sda1 5000 0 80000 10000 0 0 0 0 0 20000 30000 0 0 0 0 0 0\n"+
		"   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
	fs, err := blockdevice.NewFS(proc, t.TempDir())
	require.NoError(t, err)
	snap, err := Read(fs, proc)
	require.NoError(t, err)
	require.EqualValues(t, 100000, snap.UptimeCS)

	whole := func(n string) bool { return n == "sda" || n == "loop0" }
	r := Build(Snapshot{}, snap, Selection{WholeDisk: whole}, time.Unix(0, 0))
	// sda1 is a partition and loop0 never did I/O: only sda.
	require.Len(t, r.Rows, 1)
	require.Equal(t, "sda", r.Rows[0].Device)
	require.InDelta(t, 5.0, r.Rows[0].RPS, 1e-9)    // 5000 reads / 1000 s
	require.InDelta(t, 40.0, r.Rows[0].RkBPS, 1e-9) // 40000 kB / 1000 s
	require.InDelta(t, 2.0, r.Rows[0].Util, 1e-9)   // 20 s busy / 1000 s
	require.InDelta(t, 0.03, r.Rows[0].AquSz, 1e-9) // 30 s weighted / 1000 s
	require.True(t, r.Discard)
	require.True(t, r.Flush)

	// Named devices are shown even without I/O, partitions included.
	r = Build(Snapshot{}, snap, Selection{Names: []string{"loop0", "sda1"}, WholeDisk: whole}, time.Unix(0, 0))
	require.Equal(t, []string{"sda1", "loop0"}, []string{r.Rows[0].Device, r.Rows[1].Device})

	// -z drops devices idle during the interval.
	r = Build(snap, snap, Selection{Names: []string{"loop0", "sda"}, OmitIdle: true}, time.Unix(0, 0))
	require.Empty(t, r.Rows)
}

// The table has sysstat 12.x's header and column widths; 14-field kernels
// have no discard or flush columns.
func TestWriteTable(t *testing.T) {
	r := Report{Discard: true, Flush: true, Rows: []Row{{Device: "vda", Ext: compute(t, prevC, currC, 200)}}}
	var b bytes.Buffer
	require.NoError(t, r.WriteTable(&b))
	lines := strings.Split(b.String(), "\n")
	require.Equal(t, "Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s   wrqm/s  %wrqm w_await wareq-sz     d/s     dkB/s   drqm/s  %drqm d_await dareq-sz     f/s f_await  aqu-sz  %util", lines[0])
	require.Equal(t, "vda            100.00   4000.00    25.00  20.00    5.00    40.00  200.00   2000.00    50.00  20.00    2.00    10.00    2.00    512.00     0.50  20.00    2.00   256.00   50.00    0.50    0.90  25.00", lines[1])

	r.Discard, r.Flush = false, false
	require.Equal(t, []string{"r/s", "rkB/s", "rrqm/s", "%rrqm", "r_await", "rareq-sz",
		"w/s", "wkB/s", "wrqm/s", "%wrqm", "w_await", "wareq-sz", "aqu-sz", "%util"}, r.ColumnNames())
}

func TestWriteJSON(t *testing.T) {
	r := Report{Time: time.Unix(0, 0).UTC(), IntervalCS: 200, Discard: true, Flush: true,
		Rows: []Row{{Device: "vda", Ext: compute(t, prevC, currC, 200)}}}
	var b bytes.Buffer
	require.NoError(t, r.WriteJSON(&b))
	var got struct {
		IntervalSeconds float64          `json:"interval_seconds"`
		Disk            []map[string]any `json:"disk"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &got))
	require.InDelta(t, 2.0, got.IntervalSeconds, 1e-9)
	d := got.Disk[0]
	require.Equal(t, "vda", d["disk_device"])
	require.InDelta(t, 25.0, d["util"], 1e-9)
	require.InDelta(t, 20.0, d["rrqm"], 1e-9)
	require.InDelta(t, 0.9, d["aqu-sz"], 1e-9)
	require.InDelta(t, 0.5, d["f_await"], 1e-9)
	require.Len(t, d, 23) // disk_device + 22 columns, like iostat -dx -o JSON
}

func requireExtNear(t *testing.T, want, got Ext) {
	t.Helper()
	w, g := []float64{want.RPS, want.RkBPS, want.RrqmPS, want.RrqmPct, want.RAwait, want.RareqSz,
		want.WPS, want.WkBPS, want.WrqmPS, want.WrqmPct, want.WAwait, want.WareqSz,
		want.DPS, want.DkBPS, want.DrqmPS, want.DrqmPct, want.DAwait, want.DareqSz,
		want.FPS, want.FAwait, want.AquSz, want.Util},
		[]float64{got.RPS, got.RkBPS, got.RrqmPS, got.RrqmPct, got.RAwait, got.RareqSz,
			got.WPS, got.WkBPS, got.WrqmPS, got.WrqmPct, got.WAwait, got.WareqSz,
			got.DPS, got.DkBPS, got.DrqmPS, got.DrqmPct, got.DAwait, got.DareqSz,
			got.FPS, got.FAwait, got.AquSz, got.Util}
	for i := range w {
		require.InDelta(t, w[i], g[i], 1e-9, "column %d", i)
	}
}

// readFixture reads testdata/NAME/prev and testdata/NAME/curr, each a procfs
// with uptime and diskstats, the way diskcanary iostat reads /proc.
func readFixture(t *testing.T, name string) (prev, curr Snapshot) {
	t.Helper()
	var snaps [2]Snapshot
	for i, dir := range []string{"prev", "curr"} {
		proc := filepath.Join("testdata", name, dir)
		fs, err := blockdevice.NewFS(proc, proc)
		require.NoError(t, err)
		snaps[i], err = Read(fs, proc)
		require.NoError(t, err)
	}
	return snaps[0], snaps[1]
}

// onlyRow builds the report of a one-device fixture and returns its row.
func onlyRow(t *testing.T, prev, curr Snapshot) Row {
	t.Helper()
	r := Build(prev, curr, Selection{}, time.Unix(0, 0))
	require.Len(t, r.Rows, 1)
	return r.Rows[0]
}

// At 56220 w/s, 7196160 kB/s written, 12000 d/s (12288000 kB/s) and
// 15000 f/s over 1.00 s (testdata/wide-columns, an NVMe under fio) values no
// longer fit their columns. sysstat prints " %*.2f": the field widens and a
// space always separates it, so `awk '{print $8}'` is still w/s. Every value
// below is the fixture's delta over 1 s: 1000 reads of 8000 sectors (4 kB
// each, 100 ms), 56220 writes of 14392320 sectors (128 kB, 112440 ms),
// 12000 discards of 24576000 sectors (1 MiB, 12000 ms), 15000 flushes
// (7500 ms), 1000 ms busy, 150000 ms of time_in_queue.
func TestWriteTableWideValuesStaySeparated(t *testing.T) {
	prev, curr := readFixture(t, "wide-columns")
	r := Build(prev, curr, Selection{}, time.Unix(0, 0))
	var b bytes.Buffer
	require.NoError(t, r.WriteTable(&b))
	line := strings.Split(b.String(), "\n")[1]
	require.Equal(t, "sdb           1000.00   4000.00     0.00   0.00    0.10     4.00 56220.00 7196160.00"+
		"     0.00   0.00    2.00   128.00 12000.00 12288000.00     0.00   0.00    1.00  1024.00"+
		" 15000.00    0.50  150.00 100.00", line)
	fields := strings.Fields(line)
	require.Len(t, fields, 1+len(r.ColumnNames()))
	require.Equal(t, []string{"4.00", "56220.00", "7196160.00"}, fields[6:9])
	require.Equal(t, []string{"12000.00", "12288000.00"}, fields[13:15])
	require.Equal(t, "15000.00", fields[19])
}

// testdata/recreated-device: loop0 was detached and attached again between
// the samples, 2.00 s apart: its requests and sectors all went backwards,
// while rd_ticks (500 → 590) and time_in_queue (600 → 890) did not. Like a
// device first seen, it has no row this interval, and Skipped says why.
func TestBuildRecreatedDeviceHasNoRow(t *testing.T) {
	prev, curr := readFixture(t, "recreated-device")
	require.True(t, Restarted(prev.Devices[0].Counters, curr.Devices[0].Counters))
	r := Build(prev, curr, Selection{}, time.Unix(0, 0))
	require.Empty(t, r.Rows)
	require.Equal(t, []Skip{{"loop0", "re-created since the previous sample: requests went back (reads 4000 to 200, writes 2000 to 100, discards 0 to 0, flushes 0 to 0)"}}, r.Skipped)
}

// testdata/recreated-sectors-rose (issue 43): loop0 re-attached to a bigger
// file within 1.00 s; reads fell 5000 → 200 while sectors read rose 40000 →
// 140000, and io_ticks 7800 → 809, time_in_queue 17900 → 914. Read as
// deltas that is r/s 0.00 beside rkB/s 50000.00, and as 32-bit wraps
// %util 429496030.50 and aqu-sz 4294950.31. A request count that falls
// means re-creation: no row, whatever the other fields did.
func TestBuildRecreatedSectorsRoseHasNoRow(t *testing.T) {
	prev, curr := readFixture(t, "recreated-sectors-rose")
	r := Build(prev, curr, Selection{}, time.Unix(0, 0))
	require.Empty(t, r.Rows)
	require.Equal(t, []Skip{{"loop0", "re-created since the previous sample: requests went back (reads 5000 to 200, writes 3000 to 0, discards 0 to 0, flushes 0 to 0)"}}, r.Skipped)
}

// A device that only did more work is not a restart; one whose request
// count fell is, whatever its sector counts did.
func TestRestartedIsAnyRequestCountFalling(t *testing.T) {
	require.False(t, Restarted(prevC, currC))
	c := currC
	c.RdSectors = 1 // sectors alone: a 32-bit wrap, not a restart
	require.False(t, Restarted(prevC, c))
	c = currC
	c.FlIOs = 39
	require.True(t, Restarted(prevC, c), "flushes fell")
}

// testdata/sector-wrap (issue 43): a 32-bit kernel prints sectors as a
// 32-bit unsigned long; over 1.00 s sda read 100 requests while sectors
// read went from 2^32-4096 to 4096. Unwrapped that is 8192 sectors: rkB/s
// 4096.00 and rareq-sz 40.96 (a fall read as no activity gives 0.00 for
// both beside r/s 100.00). 200 ms of reads, 150 ms busy.
func TestBuildSectorWrapReadsTrueRate(t *testing.T) {
	prev, curr := readFixture(t, "sector-wrap")
	got := onlyRow(t, prev, curr)
	requireExtNear(t, Ext{RPS: 100, RkBPS: 4096, RAwait: 2, RareqSz: 40.96, AquSz: 0.2, Util: 15}, got.Ext)
	var b bytes.Buffer
	r := Build(prev, curr, Selection{}, time.Unix(0, 0))
	require.NoError(t, r.WriteTable(&b))
	require.Equal(t, "sda            100.00   4096.00     0.00   0.00    2.00    40.96    0.00      0.00     0.00   0.00    0.00     0.00"+
		"    0.00      0.00     0.00   0.00    0.00     0.00    0.00    0.00    0.20  15.00", strings.Split(b.String(), "\n")[1])

	// Past 2^32 a sector count is a 64-bit kernel's and cannot wrap.
	p, c := prev.Devices[0].Counters, curr.Devices[0].Counters
	p.RdSectors = 1 << 33
	_, err := Compute(p, c, 100, 8640100)
	require.EqualError(t, err, "sectors read went back from 8589934592 to 4096 while the requests did not, and past 2^32 it cannot have wrapped")
}

// testdata/uptime-back-new-device (issue 43): /proc/uptime read 7200.00 then
// 7199.50, and sdb appeared with lifetime counters (35817 reads, io_ticks
// 7365500, time_in_queue 19000000). Differenced against zero over 1 s they
// read r/s 35817.00, %util 736550.00, aqu-sz 19000.00. Read from files the two
// snapshots have no monotonic time between them: no elapsed time, no rows.
// With 1.00 s on the monotonic clock sda has its row (100 reads of 400 kB
// in 200 ms, 50 writes, 100 ms busy) and sdb none until the next interval.
func TestBuildUptimeBackNewDevice(t *testing.T) {
	prev, curr := readFixture(t, "uptime-back-new-device")
	r := Build(prev, curr, Selection{}, time.Unix(0, 0))
	require.Empty(t, r.Rows)
	const why = "no elapsed time to divide by: /proc/uptime went from 7200.00 to 7199.50 s"
	require.Equal(t, []Skip{{"sda", why}, {"sdb", why}}, r.Skipped)

	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	prev.Taken, curr.Taken = t0, t0.Add(time.Second)
	r = Build(prev, curr, Selection{}, time.Unix(0, 0))
	require.Len(t, r.Rows, 1)
	require.Equal(t, "sda", r.Rows[0].Device)
	requireExtNear(t, Ext{RPS: 100, RkBPS: 400, RAwait: 2, RareqSz: 4,
		WPS: 50, WkBPS: 200, WAwait: 2, WareqSz: 4, AquSz: 0.3, Util: 10}, r.Rows[0].Ext)
	require.Equal(t, []Skip{{"sdb", "not in the previous sample: its first row is the next interval's"}}, r.Skipped)
}

// The limits a row must fit, each alone: busy time within the clocks' slack
// of the interval is clamped to it; past the slack, or a millisecond field
// that fell further than any 2^32 wrap the interval can hold, or sectors
// without a request, is an error, not a row.
func TestComputeLimits(t *testing.T) {
	p := Counters{RdIOs: 100, RdSectors: 800, RdTicks: 1000, TotTicks: 5000, RqTicks: 1000}
	c := Counters{RdIOs: 200, RdSectors: 1600, RdTicks: 1200, TotTicks: 6020, RqTicks: 1200}
	got := compute(t, p, c, 100) // 1020 ms busy in 1.00 s: jiffies against hundredths
	require.InDelta(t, 100.0, got.Util, 1e-9)

	c.TotTicks = 6031
	_, err := Compute(p, c, 100, 100000)
	require.EqualError(t, err, "io_ticks grew 1031 ms, more than the 1030 ms possible over this interval")

	c.TotTicks = 5500
	c.RqTicks = 100 // read as a wrap: 2^32-900 ms queued by 100 requests in 1 s
	_, err = Compute(p, c, 100, 100000)
	require.EqualError(t, err, "time_in_queue went back from 1000 to 100 ms, and no wrap at 2^32 fits the 100030 ms this interval can hold")

	// A disk back from a 30 s hang: one read, held 30 s before the
	// interval, completes in it. The kernel adds its 30000 ms then: r_await
	// 30000.00 and aqu-sz 30.00 are what it says, not an inconsistency. The
	// same read with more time than the 1000 s uptime is.
	h := Counters{RdIOs: 101, RdSectors: 808, RdTicks: 31000, TotTicks: 6000, RqTicks: 31000}
	got = compute(t, p, h, 100)
	require.InDelta(t, 30000.0, got.RAwait, 1e-9)
	require.InDelta(t, 30.0, got.AquSz, 1e-9)
	require.InDelta(t, 100.0, got.Util, 1e-9)
	h.RdTicks = 1000 + 1000031
	_, err = Compute(p, h, 100, 100000)
	require.EqualError(t, err, "read ms grew 1000031 ms, more than the 1000030 ms possible over this interval")

	c.RqTicks = 1200
	c.WrSectors = 8 // 8 sectors written, no write completed
	_, err = Compute(p, c, 100, 100000)
	require.EqualError(t, err, "8 sectors written with no request completed")

	_, err = Compute(p, p, 0, 100000)
	require.EqualError(t, err, "no elapsed time to divide by")
}

// testdata/ticks-wrap: over 2.00 s sda read 200 requests while rd_ticks
// went from 2^32-600 to 400 and time_in_queue from 2^32-296 to 1704. The
// kernel prints the ms fields as unsigned int, so both wrapped once:
// 1000 ms of reads, r_await 5.00 (not 400/200 = 2.00); 2000 ms in queue,
// aqu-sz 1.00 (not 0.852). Requests and sectors are past 2^32 and did not
// wrap: the kernel prints them as unsigned long.
func TestBuildMillisecondFieldsWrapAt32Bits(t *testing.T) {
	prev, curr := readFixture(t, "ticks-wrap")
	got := onlyRow(t, prev, curr)
	requireExtNear(t, Ext{
		// 200 reads of 1600 sectors; 100 writes of 800 sectors in 200 ms;
		// 150 ms busy over 2 s.
		RPS: 100, RkBPS: 400, RAwait: 5, RareqSz: 4,
		WPS: 50, WkBPS: 200, WAwait: 2, WareqSz: 4,
		AquSz: 1, Util: 7.5,
	}, got.Ext)
}

// testdata/uptime-backwards: /proc/uptime read 86400.00 then 86398.00 (a VM
// restored from a snapshot); the two reads were 2 s apart on the monotonic
// clock. Dividing by the 1/100 s guard gave r/s 20000.00; the monotonic 2 s
// gives 200 reads / 2 s = 100.00. The same when uptime did not move.
func TestBuildUptimeNotForwardUsesMonotonicInterval(t *testing.T) {
	prev, curr := readFixture(t, "uptime-backwards")
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	prev.Taken, curr.Taken = t0, t0.Add(2*time.Second)
	want := Ext{
		// 200 reads of 1600 sectors in 300 ms; 100 writes of 800 sectors
		// in 100 ms; 100 ms busy; 400 ms in queue; over 2 s.
		RPS: 100, RkBPS: 400, RAwait: 1.5, RareqSz: 4,
		WPS: 50, WkBPS: 200, WAwait: 1, WareqSz: 4,
		AquSz: 0.2, Util: 5,
	}
	requireExtNear(t, want, onlyRow(t, prev, curr).Ext)
	require.EqualValues(t, 200, Interval(prev, curr))

	curr.UptimeCS = prev.UptimeCS
	requireExtNear(t, want, onlyRow(t, prev, curr).Ext)
	require.EqualValues(t, 200, Interval(prev, curr))
}

// iostat --latency: a second block with each disk's request latency
// percentiles in ms (0.00 for an op without requests, as an await without
// I/O); partitions, which the kernel issues no requests to, have no line.
// The JSON puts the same keys in the disk's object.
func TestWriteLatency(t *testing.T) {
	nan := math.NaN()
	r := Report{Discard: true, Flush: true, Rows: []Row{
		{Device: "vda", Ext: compute(t, prevC, currC, 200)},
		{Device: "vda1", Ext: compute(t, prevC, currC, 200)},
	}, Latency: map[string]RequestLatency{"vda": {
		"read": {0.000125, 0.0203}, "write": {0.0021, 0.0025}, "discard": {nan, nan}, "flush": {0.0195, 20.5},
	}}}
	var b bytes.Buffer
	require.NoError(t, r.WriteTable(&b))
	lines := strings.Split(b.String(), "\n")
	require.Equal(t, []string{
		"Device           r_p50    r_p99    w_p50    w_p99    d_p50    d_p99    f_p50    f_p99",
		"vda               0.12    20.30     2.10     2.50     0.00     0.00    19.50 20500.00",
		"",
	}, lines[4:7])

	b.Reset()
	require.NoError(t, r.WriteJSON(&b))
	var got struct {
		Disk []map[string]any `json:"disk"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &got))
	require.Equal(t, 0.12, got.Disk[0]["r_p50"])
	require.Equal(t, 20500.0, got.Disk[0]["f_p99"])
	require.Equal(t, 0.0, got.Disk[0]["d_p99"])
	require.NotContains(t, got.Disk[1], "r_p50")
}

// Every fixture pair in testdata, as read, with 1.00 s on the monotonic
// clock, and each snapshot since boot, by default selection and by name:
// no row breaks what a disk can do, and every selected device is a row or
// a skip with its reason, never lost. A row's bounds: %util ≤ 100; aqu-sz
// no more than the requests completed in the interval or in flight at its
// end could have queued since boot; no kB/s without requests in that
// direction; no negative, NaN or infinite value.
func TestFixturesKeepInvariants(t *testing.T) {
	dirs, err := os.ReadDir("testdata")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(dirs), 7)
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, dir := range dirs {
		prev, curr := readFixture(t, dir.Name())
		timed := func(p, c Snapshot) (Snapshot, Snapshot) {
			p.Taken, c.Taken = t0, t0.Add(time.Second)
			return p, c
		}
		tp, tc := timed(prev, curr)
		pairs := [][2]Snapshot{{prev, curr}, {tp, tc}, {{}, prev}, {{}, curr}}
		for i, pair := range pairs {
			p, c := pair[0], pair[1]
			var names []string
			for _, d := range c.Devices {
				names = append(names, d.Name)
			}
			for _, sel := range []Selection{{}, {Names: names}} {
				r := Build(p, c, sel, time.Unix(0, 0))
				where := fmt.Sprintf("%s pair %d names %v", dir.Name(), i, sel.Names)
				accounted := map[string]int{}
				for _, s := range r.Skipped {
					accounted[s.Device]++
					require.NotEmpty(t, s.Reason, where)
				}
				for _, row := range r.Rows {
					accounted[row.Device]++
					checkRowInvariants(t, where, r, row, p, c)
				}
				if sel.Names != nil {
					for _, n := range names {
						require.Equal(t, 1, accounted[n], "%s: %s is neither a row nor a skip", where, n)
					}
				}
			}
		}
	}
}

func checkRowInvariants(t *testing.T, where string, r Report, row Row, prev, curr Snapshot) {
	t.Helper()
	where += " " + row.Device
	var p, c Counters
	for _, d := range prev.Devices {
		if d.Name == row.Device {
			p = d.Counters
		}
	}
	for _, d := range curr.Devices {
		if d.Name == row.Device {
			c = d.Counters
		}
	}
	for i, v := range r.Values(row) {
		require.False(t, math.IsNaN(v) || math.IsInf(v, 0) || v < 0, "%s: %s = %v", where, r.ColumnNames()[i], v)
	}
	e := row.Ext
	require.LessOrEqual(t, e.Util, 100.0, where)
	require.True(t, e.RkBPS == 0 || e.RPS > 0, "%s: rkB/s %v with r/s 0", where, e.RkBPS)
	require.True(t, e.WkBPS == 0 || e.WPS > 0, "%s: wkB/s %v with w/s 0", where, e.WkBPS)
	require.True(t, e.DkBPS == 0 || e.DPS > 0, "%s: dkB/s %v with d/s 0", where, e.DkBPS)
	elapsedMS := float64(r.IntervalCS) * 10
	ios := float64(c.RdIOs + c.WrIOs + c.DcIOs + c.FlIOs - p.RdIOs - p.WrIOs - p.DcIOs - p.FlIOs)
	queueMS := (ios+float64(c.InFlight))*float64(max(curr.UptimeCS, r.IntervalCS))*10 + tickSlackMS
	require.LessOrEqual(t, e.AquSz*elapsedMS, queueMS, "%s: aqu-sz %v", where, e.AquSz)
}

// Under the table, each device without a row is one stderr line.
func TestWriteSkipped(t *testing.T) {
	prev, curr := readFixture(t, "uptime-back-new-device")
	var b bytes.Buffer
	require.NoError(t, Build(prev, curr, Selection{}, time.Unix(0, 0)).WriteSkipped(&b))
	require.Equal(t, "diskcanary iostat: sda: no row this interval: no elapsed time to divide by: /proc/uptime went from 7200.00 to 7199.50 s\n"+
		"diskcanary iostat: sdb: no row this interval: no elapsed time to divide by: /proc/uptime went from 7200.00 to 7199.50 s\n", b.String())
}

// --json carries the same rows and, for a device without one, its reason:
// testdata/recreated-sectors-rose prints no disk and one skip.
func TestWriteJSONSkipped(t *testing.T) {
	prev, curr := readFixture(t, "recreated-sectors-rose")
	r := Build(prev, curr, Selection{}, time.Unix(0, 0).UTC())
	var b bytes.Buffer
	require.NoError(t, r.WriteJSON(&b))
	require.Equal(t, `{"timestamp":"1970-01-01T00:00:00Z","interval_seconds":1,"disk":[],"skipped":[{"disk_device":"loop0",`+
		`"reason":"re-created since the previous sample: requests went back (reads 5000 to 200, writes 3000 to 0, discards 0 to 0, flushes 0 to 0)"}]}`+"\n", b.String())
}
