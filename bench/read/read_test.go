package read

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

func open(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", name))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// fio 3.33: the etcd recipe (300 writes of 2300 bytes, fdatasync after
// each, 1 ms thinktime) on ext4 over a virtio disk.
func TestFIOWriteAndSync(t *testing.T) {
	j, err := ParseFIO(open(t, "fio-wal.json"))
	require.NoError(t, err)
	require.Equal(t, 300, j.Write.TotalIOs)
	require.Equal(t, 299, j.Sync.Lat.N)
	require.Equal(t, 1166.0, j.RuntimeMS)
	require.InDelta(t, 16755.533333, j.Write.Lat.Mean, 1e-6)
	p50, err := j.Sync.Lat.P(50)
	require.NoError(t, err)
	require.Equal(t, 2211840*time.Nanosecond, p50)
	p99, err := j.Sync.Lat.P(99)
	require.NoError(t, err)
	require.Equal(t, 13565952*time.Nanosecond, p99)
	p999, err := j.Sync.Lat.P(99.9)
	require.NoError(t, err)
	require.Equal(t, 94896128*time.Nanosecond, p999)
	_, err = j.Sync.Lat.P(42)
	require.ErrorContains(t, err, "no 42 th percentile")
}

// fio 3.33: 300 O_DIRECT 4k random reads, paced 10 ms per 100.
func TestFIORandRead(t *testing.T) {
	j, err := ParseFIO(open(t, "fio-randread.json"))
	require.NoError(t, err)
	require.Equal(t, "rr", j.Name)
	require.Equal(t, 300, j.Read.TotalIOs)
	require.Equal(t, 300, j.Read.Clat.N)
	p50, _ := j.Read.Clat.P(50)
	p99, _ := j.Read.Clat.P(99)
	require.Equal(t, 168960*time.Nanosecond, p50)
	require.Equal(t, 2441216*time.Nanosecond, p99)
}

// fio 3.33, --output-format=json+: the etcd recipe (300 writes, 1 ms
// thinktime) on ext4 over a virtio disk. Pooled alone, the bins give
// back fio's own percentiles.
func TestFIOPoolOfOneRunIsFIOsOwnPercentiles(t *testing.T) {
	j, err := ParseFIO(open(t, "fio-wal-jsonplus.json"))
	require.NoError(t, err)
	p := Pool{}
	require.NoError(t, p.AddFIO(j.Sync.Lat))
	require.Equal(t, int64(299), p.Count())
	require.Equal(t, 321536*time.Nanosecond, p.P(50))
	require.Equal(t, 440320*time.Nanosecond, p.P(90))
	require.Equal(t, 1302528*time.Nanosecond, p.P(99))
	require.Equal(t, 2244608*time.Nanosecond, p.P(99.9))
	for _, q := range []float64{50, 90, 99, 99.9} {
		own, err := j.Sync.Lat.P(q)
		require.NoError(t, err)
		require.Equal(t, own, p.P(q), "p%g", q)
	}
}

func TestPoolAddsRuns(t *testing.T) {
	p := Pool{}
	require.NoError(t, p.AddFIO(FIOLatency{Bins: map[string]int64{"100": 1, "200": 1}}))
	require.NoError(t, p.AddFIO(FIOLatency{Bins: map[string]int64{"300": 1, "200": 1}}))
	require.Equal(t, int64(4), p.Count())
	require.Equal(t, 100*time.Nanosecond, p.P(25))
	require.Equal(t, 200*time.Nanosecond, p.P(50))
	require.Equal(t, 200*time.Nanosecond, p.P(75))
	require.Equal(t, 300*time.Nanosecond, p.P(99))
	require.ErrorContains(t, Pool{}.AddFIO(FIOLatency{N: 3}), "no latency bins")
	require.ErrorContains(t, p.AddFIO(FIOLatency{Bins: map[string]int64{"1e3": 1}}), `bin "1e3"`)
	require.Equal(t, time.Duration(0), Pool{}.P(50))
	q := Pool{}
	q.Add(250 * time.Nanosecond)
	q.AddPool(p)
	require.Equal(t, int64(5), q.Count())
	require.Equal(t, 200*time.Nanosecond, q.P(40))
	require.Equal(t, 250*time.Nanosecond, q.P(80))
}

// check's --lat-log, two jobs of 3 ops: pooled, its nearest-rank
// percentiles are check's own (6 ops: p50 is the 3rd, p99 the 6th).
func TestPoolOfCheckLatLog(t *testing.T) {
	p := Pool{}
	require.NoError(t, p.AddLatLog(strings.NewReader("profile,job,op,latency_ns\netcd,1,1,300\netcd,1,2,100\netcd,1,3,500\netcd,2,1,200\netcd,2,2,400\netcd,2,3,600\n")))
	require.Equal(t, int64(6), p.Count())
	require.Equal(t, 300*time.Nanosecond, p.P(50))
	require.Equal(t, 600*time.Nanosecond, p.P(99))
	require.ErrorContains(t, Pool{}.AddLatLog(strings.NewReader("etcd,1,1,300\n")), "no header line")
	require.ErrorContains(t, Pool{}.AddLatLog(strings.NewReader("profile,job,op,latency_ns\netcd,1,1\n")), "line 2: 3 fields, want 4")
	require.ErrorContains(t, Pool{}.AddLatLog(strings.NewReader("profile,job,op,latency_ns\netcd,1,1,x\n")), "line 2: ")
}

func TestFIOWantsOneJob(t *testing.T) {
	_, err := ParseFIO(strings.NewReader(`{"fio version": "fio-3.33", "jobs": []}`))
	require.ErrorContains(t, err, "0 jobs, want 1")
}

func TestCheck(t *testing.T) {
	c, err := ParseCheck(open(t, "check-etcd.json"))
	require.NoError(t, err)
	require.Equal(t, "etcd", c.Profile)
	require.Equal(t, 300, c.Samples)
	require.Equal(t, 613965*time.Nanosecond, Seconds(c.Latency.P50))
	require.Equal(t, 1476553*time.Nanosecond, Seconds(c.Latency.P90))
	require.Equal(t, 5570473*time.Nanosecond, Seconds(c.Latency.P99))
	_, err = ParseCheck(strings.NewReader(`{"samples": 0, "verdict": "error"}`))
	require.ErrorContains(t, err, `no samples (verdict "error")`)
}

// hey 0.1.4 scraping a daemon: 78 responses, too few for its 99th
// percentile (it prints "0% in 0.0000 secs" there).
func TestHey(t *testing.T) {
	h, err := ParseHey(open(t, "hey.txt"))
	require.NoError(t, err)
	require.Equal(t, 38.4822, h.RequestsPerSec)
	require.Equal(t, map[int]int{200: 78}, h.Statuses)
	require.Empty(t, h.Errors)
	require.Equal(t, map[int]time.Duration{
		10: 5300 * time.Microsecond, 25: 6300 * time.Microsecond, 50: 8700 * time.Microsecond,
		75: 14500 * time.Microsecond, 90: 28400 * time.Microsecond, 95: 83900 * time.Microsecond,
	}, h.Latency)
}

func TestHeyTransportErrors(t *testing.T) {
	h, err := ParseHey(open(t, "hey-refused.txt"))
	require.NoError(t, err)
	require.Empty(t, h.Statuses)
	require.Equal(t, map[string]int{`Get "http://127.0.0.1:1/metrics": dial tcp 127.0.0.1:1: connect: connection refused`: 3}, h.Errors)
}

// sysstat 12.6.1's iostat -dxy 1 2 vda and diskcanary iostat -y vda 1 2,
// run at the same moment: the same two reports.
func TestIostat(t *testing.T) {
	sys, err := ParseIostat(open(t, "iostat-sysstat.txt"))
	require.NoError(t, err)
	require.Len(t, sys, 2)
	require.Equal(t, []string{"r/s", "rkB/s", "rrqm/s", "%rrqm", "r_await", "rareq-sz", "w/s", "wkB/s", "wrqm/s", "%wrqm",
		"w_await", "wareq-sz", "d/s", "dkB/s", "drqm/s", "%drqm", "d_await", "dareq-sz", "f/s", "f_await", "aqu-sz", "%util"}, sys[0].Columns)
	require.Equal(t, []float64{61, 244, 0, 0, 0.15, 4, 77, 256, 13, 14.44, 0.45, 3.32, 30, 7260, 0, 0, 0.4, 242, 26, 0.92, 0.08, 5.2}, sys[0].Devices["vda"])
	require.Equal(t, 2192.0, sys[1].Devices["vda"][1])

	dc, err := ParseIostat(open(t, "iostat-diskcanary.txt"))
	require.NoError(t, err)
	require.Equal(t, sys, dc)
}

func TestIostatColumnCountMismatch(t *testing.T) {
	_, err := ParseIostat(strings.NewReader("Device r/s w/s\nvda 1.00\n"))
	require.ErrorContains(t, err, "1 values for 2 columns")
}

// A daemon's /metrics in protobuf, its WAL probe's fdatasync histogram
// (schema 3, 750 observations). Its first span starts at bucket -92 with
// deltas 1, 2, 4: counts 1, 3, 7.
func TestDecodeHistogram(t *testing.T) {
	h, err := DecodeHistogram(open(t, "daemon-metrics.pb"), expfmt.NewFormat(expfmt.TypeProtoDelim),
		"diskcanary_fdatasync_duration_seconds", map[string]string{"probe": "wal"})
	require.NoError(t, err)
	require.Equal(t, int32(3), h.Schema)
	require.Equal(t, 750.0, h.Count)
	require.Equal(t, 1.0, h.Buckets[-92])
	require.Equal(t, 3.0, h.Buckets[-91])
	require.Equal(t, 7.0, h.Buckets[-90])
	var sum float64
	for _, n := range h.Buckets {
		sum += n
	}
	require.Equal(t, 750.0, sum+h.ZeroCount)

	_, err = DecodeHistogram(open(t, "daemon-metrics.pb"), expfmt.NewFormat(expfmt.TypeProtoDelim),
		"diskcanary_fdatasync_duration_seconds", map[string]string{"probe": "nope"})
	require.ErrorContains(t, err, "no diskcanary_fdatasync_duration_seconds")
}

// Schema 0 (base 2): bucket 1 is (1, 2], bucket 3 is (4, 8]. Two spans,
// deltas running across them: 10 observations in bucket 1, 30 in bucket 3.
func TestQuantile(t *testing.T) {
	h := native(&dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(40),
		ZeroCount:     proto.Uint64(0),
		PositiveSpan:  []*dto.BucketSpan{{Offset: proto.Int32(1), Length: proto.Uint32(1)}, {Offset: proto.Int32(1), Length: proto.Uint32(1)}},
		PositiveDelta: []int64{10, 20},
	})
	require.Equal(t, map[int32]float64{1: 10, 3: 30}, h.Buckets)
	// Rank 5 of 10 in (1, 2]: halfway on a log scale, √2.
	require.InDelta(t, math.Sqrt2, h.Quantile(0.125), 1e-9)
	// Rank 25: 15 of 30 into (4, 8]: 4·√2.
	require.InDelta(t, 4*math.Sqrt2, h.Quantile(0.625), 1e-9)
	require.InDelta(t, 8.0, h.Quantile(1), 1e-9)
	require.True(t, math.IsNaN((&Histogram{}).Quantile(0.5)))
}

func TestQuantileInTheZeroBucket(t *testing.T) {
	h := &Histogram{Schema: 0, ZeroCount: 6, Count: 10, Buckets: map[int32]float64{2: 4}}
	require.Equal(t, 0.0, h.Quantile(0.5))
	// Rank 8: 2 of 4 into (2, 4]: 2·√2.
	require.InDelta(t, 2*math.Sqrt2, h.Quantile(0.8), 1e-9)
}

// A window: the later scrape minus the earlier. Before: 10 in (1, 2].
// After: 12 in (1, 2], 30 in (4, 8]. The window's 32: its median is rank
// 16, 14 of 30 into (4, 8]: 4·2^(14/30).
func TestSince(t *testing.T) {
	before := &Histogram{Schema: 0, Count: 10, Buckets: map[int32]float64{1: 10}}
	after := &Histogram{Schema: 0, Count: 42, Buckets: map[int32]float64{1: 12, 3: 30}}
	w, err := after.Since(before)
	require.NoError(t, err)
	require.Equal(t, 32.0, w.Count)
	require.Equal(t, map[int32]float64{1: 2, 3: 30}, w.Buckets)
	require.InDelta(t, 4*math.Pow(2, 14.0/30), w.Quantile(0.5), 1e-9)
	require.Equal(t, 42.0, after.Count, "Since leaves its receiver alone")

	_, err = after.Since(&Histogram{Schema: 3})
	require.ErrorContains(t, err, "schema changed from 3 to 0")
}

// Two windows pooled: one in the zero bucket, (1, 2] holds 2 + 8, (4, 8]
// 30 + 0; the pool's median is rank 20.5, 9.5 of 30 into (4, 8]:
// 4·2^(9.5/30).
func TestAdd(t *testing.T) {
	a := &Histogram{Schema: 0, Count: 32, Buckets: map[int32]float64{1: 2, 3: 30}}
	b := &Histogram{Schema: 0, ZeroCount: 1, Count: 9, Buckets: map[int32]float64{1: 8}}
	s, err := a.Add(b)
	require.NoError(t, err)
	require.Equal(t, 41.0, s.Count)
	require.Equal(t, 1.0, s.ZeroCount)
	require.Equal(t, map[int32]float64{1: 10, 3: 30}, s.Buckets)
	require.InDelta(t, 4*math.Pow(2, 9.5/30), s.Quantile(0.5), 1e-9)
	require.Equal(t, map[int32]float64{1: 2, 3: 30}, a.Buckets, "Add leaves its receiver alone")
	_, err = a.Add(&Histogram{Schema: 3})
	require.ErrorContains(t, err, "pooling schema 0 with schema 3")
}

// go test -bench of probes' BenchmarkWALOp and BenchmarkWALOpCheck, 2,000
// ops each on /dev/shm: the custom units beside ns/op.
func TestGoBench(t *testing.T) {
	bs, err := ParseGoBench(open(t, "gobench-walop.txt"))
	require.NoError(t, err)
	require.Len(t, bs, 2)
	require.Equal(t, "BenchmarkWALOp-2", bs[0].Name)
	require.Equal(t, 2000, bs[0].N)
	require.Equal(t, map[string]float64{"ns/op": 39668, "ns/op-overhead": 2980, "ns/op-timed": 35590, "ns/op-wall": 38570, "B/op": 4, "allocs/op": 0}, bs[0].Values)
	require.Equal(t, "BenchmarkWALOpCheck-2", bs[1].Name)
	require.Equal(t, 4129.0, bs[1].Values["ns/op-overhead"])
}

// A daemon's /metrics (one wal probe, 12 runs) and node_exporter 1.5.0's
// (diskstats only), in the text format.
func TestMetricsText(t *testing.T) {
	m, err := ParseText(open(t, "daemon-metrics.txt"))
	require.NoError(t, err)
	v, n := m.Sum("diskcanary_collector_duration_seconds", map[string]string{"collector": "diskstats"})
	require.Equal(t, 1, n)
	require.Equal(t, 0.118805394, v)
	v, _ = m.Sum("diskcanary_probe_written_bytes_total", nil)
	require.Equal(t, 380928.0, v)
	v, _ = m.Sum("go_goroutines", nil)
	require.Equal(t, 23.0, v)
	_, n = m.Sum("diskcanary_probe_runs_total", map[string]string{"probe": "rr"})
	require.Zero(t, n)
	ne, err := ParseText(open(t, "node-exporter-metrics.txt"))
	require.NoError(t, err)
	v, _ = ne.Sum("node_scrape_collector_duration_seconds", map[string]string{"collector": "diskstats"})
	require.Equal(t, 0.001130786, v)
	_, n = ne.Sum("node_disk_reads_completed_total", nil)
	require.Equal(t, 2, n)
}

// bpftrace 0.17 timing fio's etcd recipe (20 writes, 19 fdatasyncs) on
// ext4: one duration a line, and an empty line where bpftrace stopped.
func TestNanoseconds(t *testing.T) {
	ds, err := ParseNanoseconds(open(t, "bpftrace-fdatasync.txt"))
	require.NoError(t, err)
	require.Len(t, ds, 19)
	require.Equal(t, 1074429*time.Nanosecond, ds[0])
	require.Equal(t, 27451836*time.Nanosecond, ds[18])
	_, err = ParseNanoseconds(strings.NewReader("12\nAttaching 2 probes...\n"))
	require.ErrorContains(t, err, `"Attaching 2 probes..."`)
}
