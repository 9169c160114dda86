package main

import (
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// Schema 0 (base 2): bucket 1 is (1, 2], bucket 3 is (4, 8]. Two spans,
// deltas running across them: counts 10 in bucket 1, 30 in bucket 3.
func TestQuantileAcrossSpans(t *testing.T) {
	h := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(40),
		ZeroCount:     proto.Uint64(0),
		PositiveSpan:  []*dto.BucketSpan{{Offset: proto.Int32(1), Length: proto.Uint32(1)}, {Offset: proto.Int32(1), Length: proto.Uint32(1)}},
		PositiveDelta: []int64{10, 20},
	}
	s := toSnapshot(h)
	require.Equal(t, map[int32]int64{1: 10, 3: 30}, s.Counts)
	// rank 5 of 10 in (1, 2]: halfway, exponentially: √2.
	require.InDelta(t, math.Sqrt2, quantile(s, 0.125), 1e-9)
	// rank 25: 15 of 30 into (4, 8]: 4·√2.
	require.InDelta(t, 4*math.Sqrt2, quantile(s, 0.625), 1e-9)
	require.InDelta(t, 8.0, quantile(s, 1), 1e-9)
}
