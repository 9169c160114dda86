package collector

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/diskcanary/diskcanary/collector/blocklatency"
	"github.com/diskcanary/diskcanary/internal/blockdev"
	"github.com/diskcanary/diskcanary/internal/buckets"
)

var (
	requestDurationDesc = prometheus.NewDesc(namespace+"_disk_request_duration_seconds",
		"Block request latency from issue to the driver to completion, per disk and operation (flush: REQ_OP_FLUSH or a write with REQ_PREFLUSH), histogrammed in the kernel by eBPF; buckets are the probe histograms'.",
		[]string{"device", "op"}, nil)
	blocklatencyAvailableDesc = prometheus.NewDesc(namespace+"_blocklatency_available",
		"Whether the eBPF block-latency collector is running (0: see diskcanary_blocklatency_unavailable_info).", nil, nil)
	blocklatencyDroppedDesc = prometheus.NewDesc(namespace+"_blocklatency_dropped_requests_total",
		"Block requests the eBPF collector could not time: in_flight_full (more requests in flight than its map holds, 16384) or devices_full (more than 256 disks).",
		[]string{"reason"}, nil)
	blocklatencyUnavailableDesc = prometheus.NewDesc(namespace+"_blocklatency_unavailable_info",
		"Why the eBPF block-latency collector is off: permission (needs root or CAP_BPF and CAP_PERFMON), no_btf (kernel without CONFIG_DEBUG_INFO_BTF) or unsupported (the kernel refused the program; Linux 5.15+ needed); always 1.",
		[]string{"reason"}, nil)
)

// blocklatencyCollector exports the kernel's own view of each disk's request
// latency. The eBPF program counts in the kernel; a scrape reads one map
// entry per disk and operation.
type blocklatencyCollector struct {
	tracer *blocklatency.Tracer // nil when the kernel or privileges do not allow it
	reason blocklatency.Reason

	sysfs string
	deviceFilter
}

// blocklatencyHint says what to do about each reason, in the one log line.
var blocklatencyHint = map[blocklatency.Reason]string{
	blocklatency.ReasonPermission:  "loading eBPF needs root or CAP_BPF and CAP_PERFMON (the systemd unit and the Kubernetes SMART overlay grant them)",
	blocklatency.ReasonNoBTF:       "the kernel has no BTF (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF)",
	blocklatency.ReasonUnsupported: "the kernel refused the eBPF program (BTF-typed block tracepoints, Linux 5.15+)",
}

func newBlocklatencyCollector(o Options) (Collector, error) {
	filter, err := newDeviceFilter(o.Config)
	if err != nil {
		return nil, err
	}
	p := &blocklatencyCollector{sysfs: o.Paths.Sys(), deviceFilter: filter}
	t, err := blocklatency.Open()
	if err != nil {
		p.reason = blocklatency.ReasonUnsupported
		var ue *blocklatency.UnavailableError
		if errors.As(err, &ue) {
			p.reason = ue.Reason
		}
		o.Logger.Warn("blocklatency collector off: "+blocklatencyHint[p.reason]+"; the other collectors run (--no-collector.blocklatency silences this)",
			"reason", p.reason, "err", err)
		return p, nil
	}
	p.tracer = t
	return p, nil
}

// Run holds the program attached until ctx ends.
func (p *blocklatencyCollector) Run(ctx context.Context) {
	if p.tracer == nil {
		return
	}
	<-ctx.Done()
	_ = p.tracer.Close()
}

func (p *blocklatencyCollector) Update(ch chan<- prometheus.Metric) error {
	if p.tracer == nil {
		ch <- prometheus.MustNewConstMetric(blocklatencyAvailableDesc, prometheus.GaugeValue, 0)
		ch <- prometheus.MustNewConstMetric(blocklatencyUnavailableDesc, prometheus.GaugeValue, 1, string(p.reason))
		return nil
	}
	ch <- prometheus.MustNewConstMetric(blocklatencyAvailableDesc, prometheus.GaugeValue, 1)
	dropped, err := p.tracer.Dropped()
	if err != nil {
		return err
	}
	ch <- prometheus.MustNewConstMetric(blocklatencyDroppedDesc, prometheus.CounterValue, float64(dropped.InFlight), "in_flight_full")
	ch <- prometheus.MustNewConstMetric(blocklatencyDroppedDesc, prometheus.CounterValue, float64(dropped.Devices), "devices_full")
	type dev struct{ major, minor uint32 }
	names := map[dev]string{}
	var gone []dev
	err = p.tracer.Read(func(k blocklatency.Key, h blocklatency.Hist) {
		d := dev{k.Major, k.Minor}
		name, ok := names[d]
		if !ok {
			name = blockdev.KernelName(p.sysfs, k.Major, k.Minor)
			names[d] = name
			if name == "" {
				gone = append(gone, d)
			}
		}
		if name == "" || !p.included(name) {
			return
		}
		ch <- newRequestHistogram(h, name, k.Op)
	})
	// A disk that is gone takes its series with it; a new disk that gets
	// its numbers starts from zero.
	for _, d := range gone {
		p.tracer.Forget(d.major, d.minor)
	}
	return err
}

// requestBucketBounds are the classic upper bounds, shared by every
// histogram (dto wants pointers; nothing writes through them).
var requestBucketBounds = func() []*float64 {
	b := make([]*float64, len(buckets.Latency))
	for i := range buckets.Latency {
		b[i] = &buckets.Latency[i]
	}
	return b
}()

// requestHistogram is a const histogram with classic and native buckets
// together, as a live client_golang histogram with both exposes them
// (client_golang's const constructors make one kind or the other).
type requestHistogram struct {
	labels []*dto.LabelPair
	h      dto.Histogram
}

func (m *requestHistogram) Desc() *prometheus.Desc { return requestDurationDesc }

func (m *requestHistogram) Write(out *dto.Metric) error {
	out.Label, out.Histogram = m.labels, &m.h
	return nil
}

// newRequestHistogram turns the kernel's slots into both bucket layouts;
// every slot lies inside one bucket of each (blocklatency.Edges).
func newRequestHistogram(h blocklatency.Hist, device, op string) *requestHistogram {
	classic := make([]uint64, len(buckets.Latency)+1)
	var native []int64 // counts from index lo
	lo := 0
	var count, zero uint64
	for i, n := range h.Slots {
		if n == 0 {
			continue
		}
		count += n
		classic[blocklatency.SlotClassic[i]] += n
		k := blocklatency.SlotNative[i]
		if k == blocklatency.NativeZero {
			zero += n
			continue
		}
		if native == nil {
			lo = k
		}
		// Slots ascend, so k never goes below lo.
		for len(native) <= k-lo {
			native = append(native, 0)
		}
		native[k-lo] += int64(n)
	}
	// One allocation each for the buckets and their counts, and shared
	// upper bounds: a scrape builds one of these per disk and operation.
	classicBuckets := make([]*dto.Bucket, len(buckets.Latency))
	backing := make([]dto.Bucket, len(buckets.Latency))
	cums := make([]uint64, len(buckets.Latency))
	var cum uint64
	for i := range buckets.Latency {
		cum += classic[i]
		cums[i] = cum
		backing[i].CumulativeCount, backing[i].UpperBound = &cums[i], requestBucketBounds[i]
		classicBuckets[i] = &backing[i]
	}
	sum := float64(h.SumNS) / 1e9
	schema := int32(blocklatency.NativeSchema)
	m := &requestHistogram{
		labels: prometheus.MakeLabelPairs(requestDurationDesc, []string{device, op}),
		h: dto.Histogram{
			SampleCount:   &count,
			SampleSum:     &sum,
			Bucket:        classicBuckets,
			Schema:        &schema,
			ZeroThreshold: new(blocklatency.ZeroThreshold),
			ZeroCount:     &zero,
		},
	}
	if len(native) > 0 {
		// One span over the populated range; the empty buckets inside it
		// cost a zero delta each.
		m.h.PositiveSpan = []*dto.BucketSpan{{Offset: new(int32(lo)), Length: new(uint32(len(native)))}}
		deltas := make([]int64, len(native))
		var prev int64
		for i, n := range native {
			deltas[i], prev = n-prev, n
		}
		m.h.PositiveDelta = deltas
	} else {
		// An all-zero-bucket native histogram still needs a span to be
		// told from a classic-only one (client_golang does the same).
		m.h.PositiveSpan = []*dto.BucketSpan{{Offset: new(int32(0)), Length: new(uint32(0))}}
	}
	return m
}
