package collector

import (
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/collector/blocklatency"
)

// histOf counts latencies (ns) into slots as the BPF program does.
func histOf(ns ...uint64) blocklatency.Hist {
	h := blocklatency.Hist{Slots: make([]uint64, len(blocklatency.Edges)+1)}
	for _, d := range ns {
		h.Slots[sort.Search(len(blocklatency.Edges), func(i int) bool { return d <= blocklatency.Edges[i] })]++
		h.SumNS += d
	}
	return h
}

type oneMetric struct{ m prometheus.Metric }

func (o oneMetric) Describe(chan<- *prometheus.Desc)    {}
func (o oneMetric) Collect(ch chan<- prometheus.Metric) { ch <- o.m }

// One request at 1 ms and three at 20 ms: the classic buckets are those of
// the probe histograms, and the native buckets are schema 3 with the
// requests in -79 (1 ms) and -45 (20 ms).
func TestRequestHistogramClassicAndNative(t *testing.T) {
	m := newRequestHistogram(histOf(1_000_000, 20_000_000, 20_000_000, 20_000_000, 500), "loop3", "read")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(oneMetric{m})
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`# HELP diskcanary_disk_request_duration_seconds Block request latency from issue to the driver to completion, per disk and operation (flush: REQ_OP_FLUSH or a write with REQ_PREFLUSH), histogrammed in the kernel by eBPF; buckets are the probe histograms'.
# TYPE diskcanary_disk_request_duration_seconds histogram
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="5e-05"} 1
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="0.0001"} 1
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="0.00025"} 1
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="0.0005"} 1
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="0.001"} 2
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="0.0025"} 2
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="0.005"} 2
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="0.01"} 2
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="0.025"} 5
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="0.05"} 5
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="0.1"} 5
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="0.25"} 5
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="0.5"} 5
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="1"} 5
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="2.5"} 5
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="5"} 5
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="10"} 5
diskcanary_disk_request_duration_seconds_bucket{device="loop3",op="read",le="+Inf"} 5
diskcanary_disk_request_duration_seconds_sum{device="loop3",op="read"} 0.0610005
diskcanary_disk_request_duration_seconds_count{device="loop3",op="read"} 5
`)))

	var out dto.Metric
	require.NoError(t, m.Write(&out))
	h := out.Histogram
	require.Equal(t, int32(3), h.GetSchema())
	require.Equal(t, uint64(1), h.GetZeroCount(), "500 ns is under the 954 ns zero threshold")
	require.InDelta(t, 9.5367431640625e-07, h.GetZeroThreshold(), 1e-20)
	require.Len(t, h.PositiveSpan, 1)
	require.Equal(t, int32(-79), h.PositiveSpan[0].GetOffset())
	require.Equal(t, uint32(35), h.PositiveSpan[0].GetLength(), "-79 .. -45")
	deltas := h.PositiveDelta
	require.Len(t, deltas, 35)
	require.Equal(t, int64(1), deltas[0])
	require.Equal(t, int64(-1), deltas[1])
	require.Equal(t, int64(3), deltas[34])
	require.Equal(t, make([]int64, 32), deltas[2:34], "the empty buckets between the two populated ones")
}
