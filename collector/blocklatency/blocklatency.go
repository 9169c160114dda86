// Package blocklatency owns the eBPF program that measures block request
// latency in the kernel: from the block_rq_issue tracepoint (the driver is
// handed the request) to block_rq_complete, per device and per operation,
// counted into histogram slots in a BPF map. No event per I/O crosses to
// user space; Read walks the map, one entry per device and operation.
//
// The slots are the union of the probe histograms' classic bucket edges and
// the schema-3 native bucket edges, so both histograms built from them are
// exact: a device's requests and a probe's operations can be compared bucket
// by bucket.
package blocklatency

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/diskcanary/diskcanary/internal/buckets"
)

// Ops are the operation label values, indexed by the op the BPF program
// records (OP_READ.. in bpf/blocklatency.c).
var Ops = [...]string{"read", "write", "flush", "discard"}

// NativeSchema is the native-histogram schema of the slots: 2^(1/8) ≈ 1.09
// per bucket, what client_golang picks for the probe histograms'
// NativeHistogramBucketFactor of 1.1.
const NativeSchema = 3

// The native buckets the slots resolve: index k is (2^((k-1)/8), 2^(k/8)]
// seconds. nativeMin's upper edge, 2^-20 s (954 ns), is also the zero
// bucket's threshold; the last slot (above 2^7 = 128 s, beyond any block
// layer timeout) is counted in nativeMax+1.
const (
	nativeMin = -20 << NativeSchema
	nativeMax = 7 << NativeSchema
)

// ZeroThreshold is the native histogram's zero-bucket width in seconds.
var ZeroThreshold = math.Exp2(nativeMin / float64(1<<NativeSchema))

// Edges are the slots' inclusive upper edges in nanoseconds, ascending: slot
// i counts latencies d with Edges[i-1] < d <= Edges[i], slot len(Edges) those
// above the last edge. A native edge 2^(k/8) s is irrational, so it is
// floored to whole nanoseconds: for an integer d, d <= floor(x) iff d <= x,
// which keeps the native buckets exact too.
var Edges = edges()

// SlotClassic[i] is the index in buckets.Latency of the classic bucket
// slot i falls into (len(buckets.Latency) for +Inf); SlotNative[i] is
// its native bucket index, or NativeZero for the zero bucket.
var SlotClassic, SlotNative = slotBuckets()

// NativeZero marks a slot counted in the native zero bucket.
const NativeZero = math.MinInt32

func edges() []uint64 {
	var e []uint64
	for _, b := range buckets.Latency {
		e = append(e, uint64(math.Round(b*1e9)))
	}
	for k := nativeMin; k <= nativeMax; k++ {
		e = append(e, nativeEdgeNS(k))
	}
	slices.Sort(e)
	return slices.Compact(e)
}

func nativeEdgeNS(k int) uint64 {
	return uint64(math.Floor(math.Exp2(float64(k)/(1<<NativeSchema)) * 1e9))
}

func slotBuckets() (classic, native []int) {
	for i := 0; i <= len(Edges); i++ {
		if i == len(Edges) {
			classic = append(classic, len(buckets.Latency))
			native = append(native, nativeMax+1)
			break
		}
		up := Edges[i]
		c := len(buckets.Latency)
		for j, b := range buckets.Latency {
			if up <= uint64(math.Round(b*1e9)) {
				c = j
				break
			}
		}
		classic = append(classic, c)
		n := NativeZero
		if i > 0 {
			for k := nativeMin + 1; k <= nativeMax; k++ {
				if up <= nativeEdgeNS(k) {
					n = k
					break
				}
			}
		}
		native = append(native, n)
	}
	return classic, native
}

// Key is one histogram: a whole disk (the request queue's gendisk: requests
// are issued to disks, never to partitions) and an operation.
type Key struct {
	Major, Minor uint32
	Op           string
}

// Hist is a histogram as counted in the kernel.
type Hist struct {
	Slots []uint64 // len(Edges)+1
	SumNS uint64
}

// Reason says why the collector cannot run; it is a bounded label value.
type Reason string

const (
	// ReasonPermission: neither root nor CAP_BPF with CAP_PERFMON.
	ReasonPermission Reason = "permission"
	// ReasonNoBTF: the kernel has no BTF (/sys/kernel/btf/vmlinux,
	// CONFIG_DEBUG_INFO_BTF), so the program cannot be relocated.
	ReasonNoBTF Reason = "no_btf"
	// ReasonUnsupported: the kernel refused to load or attach the program
	// (BTF-typed tracepoints need Linux 5.5; the disk field 5.15).
	ReasonUnsupported Reason = "unsupported"
)

// UnavailableError is why Open failed.
type UnavailableError struct {
	Reason Reason
	Err    error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("block latency tracing unavailable (%s): %v", e.Reason, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Tracer is the loaded and attached program.
type Tracer struct {
	objs  blocklatencyObjects
	links []link.Link

	mu sync.Mutex // concurrent scrapes share value; Close waits for a Read
	// value is reused by Read: one kernel value is 1.8 KiB.
	value  blocklatencyHist
	closed bool
}

// Open loads the program, checks it against this build's slot edges, and
// attaches it to the two block tracepoints. BTF-typed tracepoints (tp_btf)
// attach through the bpf syscall alone: tracefs need not be mounted.
func Open() (*Tracer, error) { return open(0, 0) }

// open is Open with the in-flight and histogram maps cut to maxInFlight and
// maxHists entries (0: as built), so a test can fill them.
func open(maxInFlight, maxHists uint32) (*Tracer, error) {
	spec, err := loadSpec()
	if err != nil {
		return nil, &UnavailableError{ReasonUnsupported, err}
	}
	if maxInFlight > 0 {
		spec.Maps["start"].MaxEntries = maxInFlight
	}
	if maxHists > 0 {
		spec.Maps["hists"].MaxEntries = maxHists
	}
	if _, err := btf.LoadKernelSpec(); err != nil {
		return nil, &UnavailableError{ReasonNoBTF, err}
	}
	t := &Tracer{}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		return nil, classify(fmt.Errorf("load: %w", err))
	}
	for _, p := range []*ebpf.Program{t.objs.BlockRqIssue, t.objs.BlockRqComplete} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			t.Close()
			return nil, classify(fmt.Errorf("attach %s: %w", p, err))
		}
		t.links = append(t.links, l)
	}
	return t, nil
}

// loadSpec parses the embedded object and fills in the slot edges.
func loadSpec() (*ebpf.CollectionSpec, error) {
	spec, err := loadBlocklatency()
	if err != nil {
		return nil, err
	}
	v := spec.Variables["edges"]
	if v == nil || int(v.Size()) != 8*len(Edges) {
		return nil, fmt.Errorf("blocklatency: the BPF object's edges do not match this build's %d slot edges: run go generate -tags bpf2go ./collector/blocklatency", len(Edges))
	}
	if err := v.Set(Edges); err != nil {
		return nil, fmt.Errorf("blocklatency: set edges: %w", err)
	}
	return spec, nil
}

func classify(err error) error {
	switch {
	case errors.Is(err, os.ErrPermission):
		return &UnavailableError{ReasonPermission, err}
	default:
		return &UnavailableError{ReasonUnsupported, err}
	}
}

// Read calls fn with every histogram the kernel holds. h is only valid
// during the call. After Close (the daemon shutting down while a scrape
// comes in) there are none.
func (t *Tracer) Read(fn func(k Key, h Hist)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	var key blocklatencyHistKey
	it := t.objs.Hists.Iterate()
	for it.Next(&key, &t.value) {
		if int(key.Op) >= len(Ops) {
			continue
		}
		fn(Key{Major: key.Major, Minor: key.Minor, Op: Ops[key.Op]}, Hist{Slots: t.value.Slots[:], SumNS: t.value.SumNs})
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("blocklatency: read histograms: %w", err)
	}
	return nil
}

// Dropped are the requests the program could not time, by reason (the
// label values of diskcanary_blocklatency_dropped_requests_total).
type Dropped struct {
	// InFlight: issued while the in-flight map was full (16,384 requests).
	InFlight uint64
	// Devices: completed on a disk that found the histogram map full
	// (256 disks x 4 operations).
	Devices uint64
}

// Dropped sums the per-CPU drop counters.
func (t *Tracer) Dropped() (Dropped, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var d Dropped
	if t.closed {
		return d, nil
	}
	var perCPU []uint64
	for i, into := range []*uint64{&d.InFlight, &d.Devices} {
		if err := t.objs.Dropped.Lookup(uint32(i), &perCPU); err != nil {
			return d, fmt.Errorf("blocklatency: read drop counters: %w", err)
		}
		for _, n := range perCPU {
			*into += n
		}
	}
	return d, nil
}

// Seed stores a histogram as if the kernel had counted it, so a benchmark
// can scrape many disks on a machine that has few.
func (t *Tracer) Seed(k Key, h Hist) error {
	op := slices.Index(Ops[:], k.Op)
	if op < 0 || len(h.Slots) != len(Edges)+1 {
		return fmt.Errorf("blocklatency: seed %v: bad op or slot count", k)
	}
	var v blocklatencyHist
	copy(v.Slots[:], h.Slots)
	v.SumNs = h.SumNS
	return t.objs.Hists.Put(blocklatencyHistKey{Major: k.Major, Minor: k.Minor, Op: uint32(op)}, &v)
}

// Forget drops a device's histograms (it is gone; a new device with the
// same numbers starts from zero).
func (t *Tracer) Forget(major, minor uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	for op := range Ops {
		_ = t.objs.Hists.Delete(blocklatencyHistKey{Major: major, Minor: minor, Op: uint32(op)})
	}
}

// Close detaches the program and frees its maps.
func (t *Tracer) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	var errs []error
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	errs = append(errs, t.objs.Close())
	return errors.Join(errs...)
}

// Quantile is the q-quantile (0 < q < 1), in seconds, of the requests
// counted in the slots curr and not in prev (nil prev: all of curr), found
// by linear interpolation inside the slot that holds it, as
// histogram_quantile does inside a bucket; the slots are at most 9 % wide
// (a schema-3 native bucket). A quantile past the last edge is that edge.
// NaN when no request was counted.
func Quantile(q float64, prev, curr []uint64) float64 {
	delta := func(i int) float64 {
		if i < len(prev) {
			return float64(curr[i] - prev[i])
		}
		return float64(curr[i])
	}
	var total float64
	for i := range curr {
		total += delta(i)
	}
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	var cum float64
	for i := range curr {
		n := delta(i)
		if n > 0 && cum+n >= rank {
			if i >= len(Edges) {
				break
			}
			lo := 0.0
			if i > 0 {
				lo = float64(Edges[i-1])
			}
			return (lo + (float64(Edges[i])-lo)*(rank-cum)/n) / 1e9
		}
		cum += n
	}
	return float64(Edges[len(Edges)-1]) / 1e9
}
