package read

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// ScrapeHistogram asks url for /metrics in protobuf (the only format that
// carries native buckets) and returns the one native histogram named name
// whose labels include want.
func ScrapeHistogram(url, name string, want map[string]string) (*Histogram, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return DecodeHistogram(resp.Body, expfmt.ResponseFormat(resp.Header), name, want)
}

// DecodeHistogram finds the native histogram name{want...} in an
// exposition of the given format.
func DecodeHistogram(r io.Reader, format expfmt.Format, name string, want map[string]string) (*Histogram, error) {
	dec := expfmt.NewDecoder(r, format)
	var found *dto.Histogram
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, want) {
				continue
			}
			if found != nil {
				return nil, fmt.Errorf("%s%v matches more than one series", name, want)
			}
			found = m.GetHistogram()
		}
	}
	if found == nil {
		return nil, fmt.Errorf("no %s%v", name, want)
	}
	if found.Schema == nil {
		return nil, fmt.Errorf("%s%v has no native buckets", name, want)
	}
	return native(found), nil
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// Histogram is a native histogram's counts: what the daemon's
// fdatasync and read histograms expose.
type Histogram struct {
	// Schema sets the bucket width: bucket i spans (b^(i-1), b^i], b =
	// 2^(2^-Schema).
	Schema    int32
	ZeroCount float64 // observations at or below the zero threshold
	Count     float64
	Buckets   map[int32]float64 // positive buckets by index
}

// native converts the exposition's counts (deltas between consecutive
// buckets, along spans of consecutive indexes).
func native(h *dto.Histogram) *Histogram {
	out := &Histogram{Schema: h.GetSchema(), ZeroCount: float64(h.GetZeroCount()), Count: float64(h.GetSampleCount()), Buckets: map[int32]float64{}}
	var idx int32
	var n int64
	d := 0
	for i, span := range h.GetPositiveSpan() {
		if i == 0 {
			idx = span.GetOffset()
		} else {
			idx += span.GetOffset() // the gap after the previous span
		}
		for range span.GetLength() {
			n += h.GetPositiveDelta()[d]
			d++
			out.Buckets[idx] = float64(n)
			idx++
		}
	}
	return out
}

// Since is what h counted after before was scraped, as increase() over the
// window gives PromQL.
func (h *Histogram) Since(before *Histogram) (*Histogram, error) {
	if before.Schema != h.Schema {
		return nil, fmt.Errorf("schema changed from %d to %d between scrapes", before.Schema, h.Schema)
	}
	w := &Histogram{Schema: h.Schema, ZeroCount: h.ZeroCount - before.ZeroCount, Count: h.Count - before.Count, Buckets: map[int32]float64{}}
	for i, n := range h.Buckets {
		w.Buckets[i] = n - before.Buckets[i]
	}
	return w, nil
}

// Quantile is what histogram_quantile(q, h) gives for a native histogram
// of positive observations: the bucket holding rank q·Count, interpolated
// exponentially inside it (on a log scale, where native buckets are all
// the same width), a rank in the zero bucket 0. A bench reads the daemon's
// histogram the way its alerts do; at the daemon's schema (3: buckets
// ×1.09 wide) the error is within half a bucket. NaN for an empty one.
func (h *Histogram) Quantile(q float64) float64 {
	if h.Count <= 0 {
		return math.NaN()
	}
	rank := q * h.Count
	seen := h.ZeroCount
	if rank <= seen {
		return 0
	}
	base := math.Exp2(math.Exp2(-float64(h.Schema)))
	idx := slices.Sorted(maps.Keys(h.Buckets))
	last := 0.0
	for _, i := range idx {
		n := h.Buckets[i]
		if n <= 0 {
			continue
		}
		lo, hi := math.Pow(base, float64(i-1)), math.Pow(base, float64(i))
		if seen+n >= rank {
			return lo * math.Pow(hi/lo, (rank-seen)/n)
		}
		seen += n
		last = hi
	}
	return last // float error left rank just above the total
}

// Add pools h and o (windows of one histogram): their counts added, as
// sum(increase(...)) over the windows would give.
func (h *Histogram) Add(o *Histogram) (*Histogram, error) {
	if o.Schema != h.Schema {
		return nil, fmt.Errorf("pooling schema %d with schema %d", h.Schema, o.Schema)
	}
	s := &Histogram{Schema: h.Schema, ZeroCount: h.ZeroCount + o.ZeroCount, Count: h.Count + o.Count, Buckets: maps.Clone(h.Buckets)}
	for i, n := range o.Buckets {
		s.Buckets[i] += n
	}
	return s, nil
}
