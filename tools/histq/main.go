// Command histq reads one of the daemon's latency histograms from /metrics
// (native buckets, asked for in protobuf) and prints its quantiles, so
// benchmarks judge the daemon's own histogram, the number every alert
// reads, against fio's and etcd's percentiles.
//
//	histq URL METRIC [label=value ...] [--save FILE] [--since FILE] [--q 0.5,0.9,0.99]
//
// --save writes the histogram's buckets to FILE; --since subtracts the
// buckets saved in FILE first, so a benchmark measures one window. Output:
// "count N p50 X p90 Y p99 Z" in microseconds.
//
// Quantiles interpolate exponentially within a native bucket (factor
// ≤ 1.1, so the error is below ±4.5 % and typically far less), as
// Prometheus's histogram_quantile does for native histograms.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// snapshot is a native histogram's bucket counts by index, plus its zero
// bucket, schema and total count.
type snapshot struct {
	Schema int32           `json:"schema"`
	Zero   uint64          `json:"zero"`
	Count  uint64          `json:"count"`
	Counts map[int32]int64 `json:"counts"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "histq:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("histq", flag.ContinueOnError)
	save := fs.String("save", "", "write the buckets to this file")
	since := fs.String("since", "", "subtract the buckets saved in this file")
	qs := fs.String("q", "0.5,0.9,0.99", "quantiles")
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return err
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	if len(pos) < 2 {
		return errors.New("usage: histq URL METRIC [label=value ...] [--save FILE] [--since FILE] [--q 0.5,0.9,0.99]")
	}
	want := map[string]string{}
	for _, kv := range pos[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("label matcher %q: want label=value", kv)
		}
		want[k] = v
	}
	h, err := scrape(pos[0], pos[1], want)
	if err != nil {
		return err
	}
	cur := toSnapshot(h)
	if *save != "" {
		b, _ := json.Marshal(cur)
		if err := os.WriteFile(*save, b, 0o644); err != nil {
			return err
		}
	}
	if *since != "" {
		b, err := os.ReadFile(*since)
		if err != nil {
			return err
		}
		var old snapshot
		if err := json.Unmarshal(b, &old); err != nil {
			return err
		}
		if old.Schema != cur.Schema {
			return fmt.Errorf("schema changed from %d to %d between snapshots", old.Schema, cur.Schema)
		}
		cur.Zero -= old.Zero
		cur.Count -= old.Count
		for i, n := range old.Counts {
			cur.Counts[i] -= n
		}
	}
	out := []string{"count", strconv.FormatUint(cur.Count, 10)}
	for _, s := range strings.Split(*qs, ",") {
		q, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("--q %q: %w", s, err)
		}
		out = append(out, fmt.Sprintf("p%s", strings.TrimPrefix(strconv.FormatFloat(q*100, 'f', -1, 64), "0")),
			fmt.Sprintf("%.1f", quantile(cur, q)*1e6))
	}
	fmt.Println(strings.Join(out, " "))
	return nil
}

func scrape(url, name string, want map[string]string) (*dto.Histogram, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	var found *dto.Histogram
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			break
		}
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue metrics
				}
			}
			if found != nil {
				return nil, fmt.Errorf("%s%v matches more than one series: add label matchers", name, want)
			}
			found = m.GetHistogram()
		}
	}
	if found == nil {
		return nil, fmt.Errorf("no %s%v on %s", name, want, url)
	}
	if found.Schema == nil {
		return nil, fmt.Errorf("%s has no native buckets", name)
	}
	return found, nil
}

func toSnapshot(h *dto.Histogram) snapshot {
	s := snapshot{Schema: h.GetSchema(), Zero: h.GetZeroCount(), Count: h.GetSampleCount(), Counts: map[int32]int64{}}
	// Positive spans: each span starts Offset after the previous span's
	// end; deltas are differences between consecutive bucket counts.
	var idx int32
	var count int64
	d := 0
	for i, span := range h.GetPositiveSpan() {
		if i == 0 {
			idx = span.GetOffset()
		} else {
			idx += span.GetOffset()
		}
		for j := uint32(0); j < span.GetLength(); j++ {
			count += h.GetPositiveDelta()[d]
			d++
			s.Counts[idx] = count
			idx++
		}
	}
	return s
}

// quantile finds the bucket holding rank q·count and interpolates
// exponentially inside it. Native bucket i spans (base^(i-1), base^i],
// base = 2^(2^-schema).
func quantile(s snapshot, q float64) float64 {
	total := float64(s.Count)
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	seen := float64(s.Zero)
	if rank <= seen {
		return 0
	}
	base := math.Pow(2, math.Pow(2, -float64(s.Schema)))
	idx := make([]int32, 0, len(s.Counts))
	for i := range s.Counts {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		n := float64(s.Counts[i])
		if n <= 0 {
			continue
		}
		if seen+n >= rank {
			lo, hi := math.Pow(base, float64(i-1)), math.Pow(base, float64(i))
			frac := (rank - seen) / n
			return lo * math.Pow(hi/lo, frac)
		}
		seen += n
	}
	return math.Pow(base, float64(idx[len(idx)-1]))
}
