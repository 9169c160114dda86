package iostat

import (
	"bytes"
	"encoding/json"
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

func TestComputeHandWorked(t *testing.T) {
	got := Compute(prevC, currC, 200)
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
	got := Compute(currC, currC, 100)
	requireExtNear(t, Ext{}, got)
}

// A device re-created between samples counts from zero instead of wrapping.
func TestComputeCounterReset(t *testing.T) {
	got := Compute(currC, Counters{RdIOs: 10, RdSectors: 80, RdTicks: 20}, 100)
	require.InDelta(t, 10.0, got.RPS, 1e-9)
	require.InDelta(t, 2.0, got.RAwait, 1e-9)
	require.InDelta(t, 4.0, got.RareqSz, 1e-9)
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
	require.EqualValues(t, 1, Interval(5, 5), "a clock that did not move must not divide by zero")
	require.EqualValues(t, 200, Interval(100, 300))
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
	r := Report{Discard: true, Flush: true, Rows: []Row{{Device: "vda", Ext: Compute(prevC, currC, 200)}}}
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
		Rows: []Row{{Device: "vda", Ext: Compute(prevC, currC, 200)}}}
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
