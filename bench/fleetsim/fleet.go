package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	dto "github.com/prometheus/client_model/go"

	"github.com/diskcanary/diskcanary/internal/config"
)

// diskModel is a cohort: one disk model's typical latencies. The cohort
// rules group targets by the model in diskcanary_disk_info and
// diskcanary_smart_device_info, which the simulation sets from this.
type diskModel struct {
	name  string
	fsync float64 // median fdatasync after a 2300-byte append, seconds
	read  float64 // median 4 KiB O_DIRECT random read, seconds
}

// The fleet's disks: two NVMe with power-loss protection, a SATA SSD and two
// network volumes, as a Kubernetes fleet across bare metal and clouds has.
var defaultModels = []diskModel{
	{"SAMSUNG MZQL2960HCJR-00A07", 90e-6, 85e-6},
	{"INTEL SSDPE2KX020T8", 140e-6, 95e-6},
	{"Micron_5300_MTFDDAK960TDS", 450e-6, 180e-6},
	{"Amazon Elastic Block Store", 1.1e-3, 550e-6},
	{"PersistentDisk", 1.6e-3, 900e-6},
}

// latency: a log-normal around a median with a rare slow tail (1 % of ops
// ten times slower), so p99 sits on the tail as a disk's does.
type latency struct{ median float64 }

const (
	latSigma    = 0.45
	tailShare   = 0.01
	tailFactor  = 10.0
	writeMedian = 20e-6 // write() of 2300 bytes into the page cache
)

func (l latency) cdf(x float64) float64 {
	if x <= 0 {
		return 0
	}
	phi := func(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }
	return (1-tailShare)*phi(math.Log(x/l.median)/latSigma) + tailShare*phi(math.Log(x/(l.median*tailFactor))/latSigma)
}

func (l latency) mean() float64 {
	return l.median * math.Exp(latSigma*latSigma/2) * (1 - tailShare + tailShare*tailFactor)
}

func (l latency) draw(r *rand.Rand) float64 {
	x := l.median * math.Exp(latSigma*r.NormFloat64())
	if r.Float64() < tailShare {
		x *= tailFactor
	}
	return x
}

// latencyFamilies are the histograms whose values the simulation moves.
var latencyFamilies = map[string]bool{
	"diskcanary_fdatasync_duration_seconds":     true,
	"diskcanary_write_duration_seconds":         true,
	"diskcanary_read_duration_seconds":          true,
	"diskcanary_disk_request_duration_seconds":  true,
	"etcd_disk_wal_fsync_duration_seconds":      true,
	"etcd_disk_backend_commit_duration_seconds": true,
	"etcd_network_peer_round_trip_time_seconds": true,
}

// counterRates: the counters that grow at a node's own rate (per second).
var counterRates = map[string]func(n *node) float64{
	"diskcanary_disk_reads_completed_total":             func(n *node) float64 { return n.io.reads },
	"diskcanary_disk_reads_merged_total":                func(n *node) float64 { return 0.1 * n.io.reads },
	"diskcanary_disk_read_bytes_total":                  func(n *node) float64 { return n.io.reads * 16384 },
	"diskcanary_disk_read_time_seconds_total":           func(n *node) float64 { return n.io.reads * n.op("read").mean() },
	"diskcanary_disk_writes_completed_total":            func(n *node) float64 { return n.io.writes },
	"diskcanary_disk_writes_merged_total":               func(n *node) float64 { return 0.3 * n.io.writes },
	"diskcanary_disk_written_bytes_total":               func(n *node) float64 { return n.io.writes * 24576 },
	"diskcanary_disk_write_time_seconds_total":          func(n *node) float64 { return n.io.writes * n.op("write").mean() },
	"diskcanary_disk_discards_completed_total":          func(n *node) float64 { return n.io.discards },
	"diskcanary_disk_discarded_bytes_total":             func(n *node) float64 { return n.io.discards * (1 << 20) },
	"diskcanary_disk_discard_time_seconds_total":        func(n *node) float64 { return n.io.discards * n.op("discard").mean() },
	"diskcanary_disk_flush_requests_total":              func(n *node) float64 { return n.io.flushes },
	"diskcanary_disk_flush_requests_time_seconds_total": func(n *node) float64 { return n.io.flushes * n.op("flush").mean() },
	"diskcanary_disk_io_time_seconds_total":             func(n *node) float64 { return n.util() },
	"diskcanary_disk_io_time_weighted_seconds_total":    func(n *node) float64 { return n.queue() },
	"diskcanary_pressure_cpu_waiting_seconds_total":     func(n *node) float64 { return 0.02 },
	"diskcanary_pressure_io_waiting_seconds_total":      func(n *node) float64 { return 0.01 * n.devSlow },
	"diskcanary_pressure_io_stalled_seconds_total":      func(n *node) float64 { return 0.004 * n.devSlow },
	"diskcanary_smart_power_on_seconds_total":           func(n *node) float64 { return 1 },
	"diskcanary_smart_read_bytes_total":                 func(n *node) float64 { return n.io.reads * 16384 },
	"diskcanary_smart_written_bytes_total":              func(n *node) float64 { return n.io.writes * 24576 },
}

// ioProfile: a node's block-layer load (requests per second).
type ioProfile struct{ reads, writes, flushes, discards float64 }

// node is one simulated machine: its disk, its load, its identity.
type node struct {
	id, cluster  int
	member       int // its place in the cluster: the first etcdMembers run an etcd member
	name, serial string
	model        *diskModel
	speed        float64 // this disk against its model's median
	slow         float64 // > 1: the probes' path is slow (the drift rules' work)
	devSlow      float64 // > 1: the device itself is (the block layer sees it)
	busy         bool    // makeBusy: slow probes from load, not a fault
	tempOffset   float64
	io           ioProfile
	uptime       float64 // seconds the daemon has run when the simulation starts
}

// makeBusy gives the node a disk kept 90 % busy by its own workload (a
// hundred times the requests), and probes that queue behind them (8×
// slower), as a loaded healthy disk's do.
func (n *node) makeBusy() {
	n.io.reads *= 100
	n.io.writes *= 100
	n.io.flushes *= 100
	n.slow = 8
	n.busy = true
}

// op is the block layer's latency for one request kind.
func (n *node) op(op string) latency {
	m := n.model.fsync * n.speed * n.devSlow
	switch op {
	case "read":
		return latency{n.model.read * 0.9 * n.speed * n.devSlow}
	case "write":
		return latency{m * 0.5}
	case "flush":
		return latency{m * 0.4}
	}
	return latency{m * 2} // discard
}

func (n *node) util() float64 {
	if n.busy {
		return 0.9
	}
	busy := n.io.reads*n.op("read").mean() + n.io.writes*n.op("write").mean() + n.io.flushes*n.op("flush").mean()
	return math.Min(0.95, busy*0.8)
}

func (n *node) queue() float64 {
	return n.io.reads*n.op("read").mean() + n.io.writes*n.op("write").mean() + n.io.flushes*n.op("flush").mean()
}

// latencyOf: the distribution behind one histogram series on this node, and
// how many observations per second it takes when it is observed continuously.
func (n *node) latencyOf(s *series) (latency, float64) {
	switch s.fam.name {
	case "diskcanary_fdatasync_duration_seconds":
		return latency{n.model.fsync * n.speed * n.slow}, 0
	case "diskcanary_write_duration_seconds":
		return latency{writeMedian * n.speed}, 0
	case "diskcanary_read_duration_seconds":
		return latency{n.model.read * n.speed * n.slow}, 0
	case "diskcanary_disk_request_duration_seconds":
		op := ""
		for _, l := range s.labels {
			if l.name == "op" {
				op = l.value
			}
		}
		rate := map[string]float64{"read": n.io.reads, "write": n.io.writes, "flush": n.io.flushes, "discard": n.io.discards}[op]
		return n.op(op), rate
	case "etcd_disk_wal_fsync_duration_seconds":
		return latency{n.model.fsync * 1.3 * n.speed * n.slow}, 20
	case "etcd_disk_backend_commit_duration_seconds":
		return latency{n.model.fsync * 4 * n.speed * n.slow}, 10
	case "etcd_network_peer_round_trip_time_seconds":
		return latency{400e-6 * n.speed}, 0.5
	}
	return latency{1e-3}, 0
}

type fleetOptions struct {
	nodes, perCluster int
	slowShare         float64
	seed              uint64
	models            []diskModel
}

// newNodes lays out the fleet: clusters of perCluster nodes, each cluster
// mostly on one disk model with a fifth of its nodes on the next one, and
// round(slowShare × nodes) slow nodes spread evenly, every other one slow at
// the device too.
func newNodes(o fleetOptions) []*node {
	r := rand.New(rand.NewPCG(o.seed, 0x5eed))
	slowCount := int(math.Round(o.slowShare * float64(o.nodes)))
	if o.slowShare > 0 && slowCount == 0 {
		slowCount = 1
	}
	nodes := make([]*node, o.nodes)
	slowSeen := 0
	for i := range nodes {
		c := i / o.perCluster
		m := c % len(o.models)
		if r.Float64() < 0.2 {
			m = (m + 1) % len(o.models)
		}
		n := &node{
			id: i, cluster: c, member: i % o.perCluster,
			name:       fmt.Sprintf("ip-10-%d-%d-%d.compute.internal", c%250, (i/250)%250, i%250+1),
			serial:     fmt.Sprintf("S%03dX%07d", m, 1000003*i%9999991),
			model:      &o.models[m],
			speed:      math.Exp(0.15 * r.NormFloat64()),
			slow:       1,
			devSlow:    1,
			tempOffset: math.Round(r.NormFloat64() * 4),
			uptime:     86400 * (1 + 29*r.Float64()),
			io: ioProfile{
				reads:    30 * math.Exp(0.6*r.NormFloat64()),
				writes:   80 * math.Exp(0.6*r.NormFloat64()),
				flushes:  8 * math.Exp(0.4*r.NormFloat64()),
				discards: 0.1,
			},
		}
		if slowCount > 0 && (i+1)*slowCount/o.nodes != i*slowCount/o.nodes {
			n.slow = 8
			if slowSeen%2 == 1 {
				n.devSlow = 6
			}
			slowSeen++
		}
		nodes[i] = n
	}
	return nodes
}

// target is one scrape target: a template's series on one node.
type target struct {
	tpl  *template
	node *node
	mu   sync.Mutex
	rng  *rand.Rand
	t0   float64 // simulation start
	last float64 // last advance
	vals []float64
	next map[string]float64 // probe → its next cycle
	pre  map[*series][][]byte
}

func newTarget(tpl *template, n *node, seed uint64, now float64) *target {
	t := &target{tpl: tpl, node: n, rng: rand.New(rand.NewPCG(seed, uint64(n.id))), t0: now, last: now,
		vals: make([]float64, tpl.width), next: map[string]float64{}, pre: map[*series][][]byte{}}
	for _, fam := range tpl.families {
		for _, s := range fam.series {
			if s.perNode {
				t.pre[s] = linePrefixes(s, s.labelsFor(n))
			}
			v := t.vals[s.slot : s.slot+s.width]
			switch s.drv {
			case drvRate:
				v[0] = t.rate(s) * n.uptime
			case drvHistRate:
				lat, rate := n.latencyOf(s)
				fill(v, s.upper, lat, rate*n.uptime)
			}
		}
	}
	for p, c := range tpl.probes {
		cycles := math.Floor(n.uptime / c.interval)
		phase := t.rng.Float64() * c.interval
		t.next[p] = now + phase
		for _, s := range tpl.byProbe[p] {
			v := t.vals[s.slot : s.slot+s.width]
			switch s.drv {
			case drvRuns:
				v[0] = cycles
			case drvProbeBytes:
				v[0] = cycles * float64(c.ops) * c.opBytes
			case drvLastRun:
				v[0] = now + phase - c.interval
			case drvHistBurst:
				lat, _ := n.latencyOf(s)
				fill(v, s.upper, lat, cycles*float64(c.ops))
			}
		}
	}
	return t
}

func (t *target) rate(s *series) float64 {
	if f, ok := counterRates[s.fam.name]; ok {
		return f(t.node)
	}
	return s.base * 1e-3 // the exporter's own runtime counters
}

// fill sets a histogram to the expected counts of n observations.
func fill(v []float64, upper []float64, lat latency, n float64) {
	prev := 0.0
	total := 0.0
	for i, u := range upper {
		c := lat.cdf(u)
		v[i] = math.Round(n * (c - prev))
		total += v[i]
		prev = c
	}
	v[len(upper)] = math.Round(n * (1 - prev))
	total += v[len(upper)]
	v[len(upper)+1] = total * lat.mean()
}

// observe adds n observations: drawn one by one for a probe cycle's few
// dozen, per bucket (a Poisson count around the expected one) for the
// thousands of block requests between two scrapes.
func observe(v []float64, upper []float64, lat latency, n int, r *rand.Rand) {
	if n <= 0 {
		return
	}
	if n <= 128 {
		for range n {
			x := lat.draw(r)
			i, _ := slices.BinarySearch(upper, x)
			v[i]++
			v[len(upper)+1] += x
		}
		return
	}
	prev, total := 0.0, 0.0
	for i := 0; i <= len(upper); i++ {
		c := 1.0
		if i < len(upper) {
			c = lat.cdf(upper[i])
		}
		k := poisson(float64(n)*(c-prev), r)
		v[i] += k
		total += k
		prev = c
	}
	v[len(upper)+1] += total * lat.mean()
}

// poisson: exact below a mean of 30, its normal approximation above.
func poisson(mean float64, r *rand.Rand) float64 {
	if mean <= 0 {
		return 0
	}
	if mean < 30 {
		l, k, p := math.Exp(-mean), 0.0, 1.0
		for {
			p *= r.Float64()
			if p <= l {
				return k
			}
			k++
		}
	}
	return math.Max(0, math.Round(mean+math.Sqrt(mean)*r.NormFloat64()))
}

// advance moves the target's values to now: counters by their rates, block
// requests by a Poisson count, and every probe cycle that came due.
func (t *target) advance(now float64) {
	dt := now - t.last
	if dt <= 0 {
		return
	}
	t.last = now
	for _, s := range t.tpl.rates {
		grow := t.rate(s) * dt * (1 + 0.05*t.rng.NormFloat64())
		if s.fam.name == "diskcanary_disk_io_time_seconds_total" {
			grow = math.Min(grow, dt)
		}
		t.vals[s.slot] += math.Max(0, grow)
	}
	for _, s := range t.tpl.histRates {
		lat, rate := t.node.latencyOf(s)
		observe(t.vals[s.slot:s.slot+s.width], s.upper, lat, int(poisson(rate*dt, t.rng)), t.rng)
	}
	for p, c := range t.tpl.probes {
		for t.next[p] <= now {
			at := t.next[p]
			for _, s := range t.tpl.byProbe[p] {
				v := t.vals[s.slot : s.slot+s.width]
				switch s.drv {
				case drvRuns:
					v[0]++
				case drvProbeBytes:
					v[0] += float64(c.ops) * c.opBytes
				case drvLastRun:
					v[0] = at
				case drvHistBurst:
					lat, _ := t.node.latencyOf(s)
					observe(v, s.upper, lat, c.ops, t.rng)
				}
			}
			t.next[p] = at + c.interval*(1+config.DefaultJitter*(2*t.rng.Float64()-1))
		}
	}
}

// render writes the target's exposition at now.
func (t *target) render(b []byte, now float64) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(now)
	for _, fam := range t.tpl.families {
		b = append(b, fam.header...)
		for _, s := range fam.series {
			pre := s.prefix
			if s.perNode {
				pre = t.pre[s]
			}
			switch s.typ {
			case dto.MetricType_HISTOGRAM, dto.MetricType_SUMMARY:
				b = t.renderMulti(b, s, pre)
			default:
				b = append(b, pre[0]...)
				b = appendFloat(b, t.value(s, now))
				b = append(b, '\n')
			}
		}
	}
	return b
}

func (t *target) renderMulti(b []byte, s *series, pre [][]byte) []byte {
	if s.drv == drvStatic || s.typ == dto.MetricType_SUMMARY {
		for i, p := range pre {
			b = append(b, p...)
			b = appendFloat(b, s.static[i])
			b = append(b, '\n')
		}
		return b
	}
	v := t.vals[s.slot : s.slot+s.width]
	cum := 0.0
	for i := 0; i <= len(s.upper); i++ {
		cum += v[i]
		b = append(b, pre[i]...)
		b = appendFloat(b, cum)
		b = append(b, '\n')
	}
	b = append(b, pre[len(s.upper)+1]...)
	b = appendFloat(b, v[len(s.upper)+1])
	b = append(b, '\n')
	b = append(b, pre[len(s.upper)+2]...)
	b = appendFloat(b, cum)
	return append(b, '\n')
}

func (t *target) value(s *series, now float64) float64 {
	switch s.drv {
	case drvRate:
		// At the resolution the kernel counts in (integers; diskstats
		// times in ms, pressure in µs): integers compress better in the
		// TSDB than arbitrary floats would.
		v := t.vals[s.slot]
		switch {
		case !strings.Contains(s.fam.name, "_seconds"):
			return math.Floor(v)
		case strings.HasPrefix(s.fam.name, "diskcanary_disk_"):
			return math.Floor(v*1e3) / 1e3
		}
		return math.Floor(v*1e6) / 1e6
	case drvRuns, drvProbeBytes, drvLastRun:
		return t.vals[s.slot]
	case drvJitter:
		v := math.Max(0, s.base*(1+0.05*t.rng.NormFloat64()))
		if s.base == math.Trunc(s.base) {
			v = math.Round(v)
		}
		return v
	case drvShift:
		return s.base + now - t.tpl.captured
	case drvStart:
		return math.Floor(t.t0 - t.node.uptime)
	case drvTemperature:
		return s.base + t.node.tempOffset + math.Round(0.7*t.rng.NormFloat64())
	case drvIONow:
		return float64(t.rng.IntN(3))
	}
	return s.base
}
