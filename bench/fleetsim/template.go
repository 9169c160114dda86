package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/diskcanary/diskcanary/internal/config"
)

// A template is one real exporter's /metrics, parsed once and rendered for
// every simulated node: the families, label sets and bucket edges are the
// exporter's own; only the values (and a node's identity labels) change.
type template struct {
	families []*family
	captured float64 // unix time of the capture: timestamps in it move from here
	// probe name → its kind and cycle (from diskcanary_probe_target_info{probe,kind})
	kinds  map[string]string
	probes map[string]probeCycle
	// the series that move with time, by how
	rates, histRates []*series
	byProbe          map[string][]*series
	width            int // values per target
}

type family struct {
	name   string
	header []byte // # HELP and # TYPE lines
	series []*series
}

// probeCycle is one probe's schedule, the daemon's defaults for its kind.
type probeCycle struct {
	interval float64 // seconds between cycles
	ops      int     // timed operations per cycle
	opBytes  float64 // bytes per operation (written for wal, read for randread)
}

func cycleFor(kind string) probeCycle {
	if kind == config.KindRandRead {
		return probeCycle{config.DefaultReadInterval.Seconds(), config.DefaultReadOps, config.DefaultReadBlockSize}
	}
	return probeCycle{config.DefaultWALInterval.Seconds(), config.DefaultWALOps, config.DefaultWALBlockSize}
}

// driver says how a series' value moves from scrape to scrape.
type driver int

const (
	drvStatic      driver = iota // the template's value
	drvJitter                    // runtime gauges: ±5 % around the template's value
	drvShift                     // a timestamp: moves with the clock
	drvStart                     // process_start_time_seconds: when the node's daemon started
	drvTemperature               // SMART temperature: the disk's own offset, ±1 °C
	drvIONow                     // requests in flight: a small integer
	drvLastRun                   // the probe's last cycle
	drvRate                      // a counter at the node's rate for it
	drvRuns                      // probe cycles
	drvProbeBytes                // bytes per op × ops, per probe cycle
	drvHistBurst                 // a probe histogram: ops observations per cycle
	drvHistRate                  // a histogram observed continuously (block requests, etcd)
)

type labelPair struct{ name, value string }

// series is one series of the template (a whole histogram or summary is one).
type series struct {
	fam     *family
	typ     dto.MetricType
	labels  []labelPair
	perNode bool     // carries a node's identity (model, serial): labels rendered per node
	prefix  [][]byte // the line prefixes up to the value, when labels are shared
	base    float64
	upper   []float64 // histogram bucket bounds without +Inf
	static  []float64 // a static histogram's or summary's lines
	qs      []string  // a summary's quantile labels
	peer    int       // an etcd series' To: the rank of its member ID among the template's peers
	drv     driver
	probe   string
	slot    int // first value in target.vals
	width   int
}

// etcdMembers is how many etcd members fleetsim runs per cluster (on its
// first nodes).
const etcdMembers = 3

// etcdMemberID is member m of cluster c's etcd ID, hex as etcd prints it.
func etcdMemberID(c, m int) string { return fmt.Sprintf("%08x%08x", c+1, m+1) }

// labelsFor are the series' labels on one node.
func (s *series) labelsFor(n *node) []labelPair {
	if !s.perNode {
		return s.labels
	}
	out := make([]labelPair, len(s.labels))
	for i, l := range s.labels {
		switch l.name {
		case "model":
			l.value = n.model.name
		case "serial":
			l.value = n.serial
		case "server_id":
			l.value = etcdMemberID(n.cluster, n.member)
		case "To":
			l.value = etcdMemberID(n.cluster, (n.member+1+s.peer)%etcdMembers)
		}
		out[i] = l
	}
	return out
}

type templateOptions struct {
	path          string          // the probes' path label on every node
	keepNames     map[string]bool // if set, only these families (etcd: the ones the rules read)
	probeInterval float64         // if set, every probe's cycle, seconds (else the daemon's defaults)
}

func loadTemplate(file string, opt templateOptions) (*template, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	t, err := parseTemplate(f, opt)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", file, err)
	}
	t.captured = float64(st.ModTime().UnixNano()) / 1e9
	return t, nil
}

func parseTemplate(r io.Reader, opt templateOptions) (*template, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	t := &template{kinds: map[string]string{}, probes: map[string]probeCycle{}, byProbe: map[string][]*series{}}
	// The node's own devices: the probes' and their disks (and SMART's).
	// Other devices in the template are the capturing machine's (loop
	// devices of other tests), not a node's.
	var devices map[string]bool
	if mf := mfs["diskcanary_probe_target_info"]; mf != nil {
		devices = map[string]bool{}
		for _, m := range mf.GetMetric() {
			devices[label(m, "device")] = true
			t.kinds[label(m, "probe")] = label(m, "kind")
			c := cycleFor(label(m, "kind"))
			if opt.probeInterval > 0 {
				c.interval = opt.probeInterval
			}
			t.probes[label(m, "probe")] = c
		}
		for _, m := range mfs["diskcanary_disk_parent_info"].GetMetric() {
			if devices[label(m, "device")] {
				devices[label(m, "disk")] = true
			}
		}
		for _, m := range mfs["diskcanary_smart_device_info"].GetMetric() {
			devices[label(m, "device")] = true
		}
	}
	names := make([]string, 0, len(mfs))
	for n := range mfs {
		if opt.keepNames == nil || opt.keepNames[n] {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		mf := mfs[name]
		fam := &family{name: name}
		fam.header = fmt.Appendf(nil, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(mf.GetHelp()), name, strings.ToLower(mf.GetType().String()))
		for _, m := range mf.GetMetric() {
			if d := label(m, "device"); d != "" && devices != nil && !devices[d] {
				continue
			}
			s := t.newSeries(fam, mf.GetType(), m, opt)
			fam.series = append(fam.series, s)
		}
		if len(fam.series) > 0 {
			t.families = append(t.families, fam)
		}
	}
	// An etcd template is one member's view: its own ID (server_id) and its
	// peers' (To). Each simulated member gets IDs of its own cluster, the
	// template's peers in the order of their IDs, so the rules' joins from
	// a peer's To to its etcd_server_id find one member, not every
	// cluster's template member.
	var peers []string
	for _, fam := range t.families {
		for _, s := range fam.series {
			for _, l := range s.labels {
				if l.name == "To" && !slices.Contains(peers, l.value) {
					peers = append(peers, l.value)
				}
			}
		}
	}
	slices.Sort(peers)
	for _, fam := range t.families {
		for _, s := range fam.series {
			for _, l := range s.labels {
				if l.name == "To" {
					s.peer = slices.Index(peers, l.value)
				}
			}
			s.slot = t.width
			t.width += s.width
			switch s.drv {
			case drvRate:
				t.rates = append(t.rates, s)
			case drvHistRate:
				t.histRates = append(t.histRates, s)
			case drvRuns, drvProbeBytes, drvHistBurst, drvLastRun:
				t.byProbe[s.probe] = append(t.byProbe[s.probe], s)
			}
		}
	}
	return t, nil
}

func (t *template) newSeries(fam *family, typ dto.MetricType, m *dto.Metric, opt templateOptions) *series {
	s := &series{fam: fam, typ: typ}
	for _, lp := range m.GetLabel() {
		l := labelPair{lp.GetName(), lp.GetValue()}
		switch l.name {
		case "path":
			if opt.path != "" {
				l.value = opt.path
			}
		case "model", "serial", "server_id", "To":
			s.perNode = true
		}
		s.labels = append(s.labels, l)
	}
	s.probe = label(m, "probe")
	name := fam.name
	switch typ {
	case dto.MetricType_COUNTER:
		s.base = m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		s.base = m.GetGauge().GetValue()
	case dto.MetricType_UNTYPED:
		s.base = m.GetUntyped().GetValue()
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		for _, b := range h.GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				s.upper = append(s.upper, b.GetUpperBound())
			}
			s.static = append(s.static, float64(b.GetCumulativeCount()))
		}
		if len(s.static) == len(s.upper) { // +Inf implied
			s.static = append(s.static, float64(h.GetSampleCount()))
		}
		s.static = append(s.static, h.GetSampleSum(), float64(h.GetSampleCount()))
	case dto.MetricType_SUMMARY:
		sm := m.GetSummary()
		for _, q := range sm.GetQuantile() {
			s.qs = append(s.qs, formatFloat(q.GetQuantile()))
			s.static = append(s.static, q.GetValue())
		}
		s.static = append(s.static, sm.GetSampleSum(), float64(sm.GetSampleCount()))
	}
	switch {
	case typ == dto.MetricType_HISTOGRAM:
		if _, ok := latencyFamilies[name]; ok {
			s.drv, s.width = drvHistRate, len(s.upper)+2
			if _, ok := t.probes[s.probe]; ok && s.probe != "" {
				s.drv = drvHistBurst
			}
		}
	case typ == dto.MetricType_COUNTER:
		_, known := counterRates[name]
		switch {
		case name == "diskcanary_probe_runs_total" && s.probe != "":
			s.drv = drvRuns
		case name == "diskcanary_probe_written_bytes_total" && t.kinds[s.probe] == config.KindWAL,
			name == "diskcanary_probe_read_bytes_total" && t.kinds[s.probe] == config.KindRandRead:
			s.drv = drvProbeBytes
		case known, s.base > 0 && runtimeFamily(name):
			s.drv = drvRate
		}
	case typ == dto.MetricType_GAUGE:
		switch {
		case name == "process_start_time_seconds":
			s.drv = drvStart
		case name == "diskcanary_probe_last_run_timestamp_seconds" && s.probe != "":
			s.drv = drvLastRun
		case s.base > 1e9 && (strings.HasSuffix(name, "_timestamp_seconds") || strings.HasSuffix(name, "_time_seconds")):
			s.drv = drvShift
		case name == "diskcanary_smart_temperature_celsius":
			s.drv = drvTemperature
		case name == "diskcanary_disk_io_now":
			s.drv = drvIONow
		case runtimeFamily(name) || name == "diskcanary_collector_duration_seconds":
			s.drv = drvJitter
		}
	}
	if s.width == 0 && (s.drv == drvRate || s.drv == drvRuns || s.drv == drvProbeBytes || s.drv == drvLastRun) {
		s.width = 1
	}
	if !s.perNode {
		s.prefix = linePrefixes(s, s.labels)
	}
	return s
}

func runtimeFamily(name string) bool {
	return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_")
}

// linePrefixes renders every line of a series up to its value: one for a
// counter or gauge; for a histogram the buckets, +Inf, _sum and _count; for a
// summary the quantiles, _sum and _count.
func linePrefixes(s *series, labels []labelPair) [][]byte {
	name := s.fam.name
	switch s.typ {
	case dto.MetricType_HISTOGRAM:
		var out [][]byte
		for _, u := range s.upper {
			out = append(out, prefix(name+"_bucket", labels, "le", formatFloat(u)))
		}
		out = append(out, prefix(name+"_bucket", labels, "le", "+Inf"),
			prefix(name+"_sum", labels, "", ""), prefix(name+"_count", labels, "", ""))
		return out
	case dto.MetricType_SUMMARY:
		var out [][]byte
		for _, q := range s.qs {
			out = append(out, prefix(name, labels, "quantile", q))
		}
		return append(out, prefix(name+"_sum", labels, "", ""), prefix(name+"_count", labels, "", ""))
	}
	return [][]byte{prefix(name, labels, "", "")}
}

func prefix(name string, labels []labelPair, extraName, extraValue string) []byte {
	b := []byte(name)
	if len(labels) > 0 || extraName != "" {
		b = append(b, '{')
		for i, l := range labels {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, l.name...)
			b = append(b, '=', '"')
			b = append(b, labelEscaper.Replace(l.value)...)
			b = append(b, '"')
		}
		if extraName != "" {
			if len(labels) > 0 {
				b = append(b, ',')
			}
			b = append(b, extraName...)
			b = append(b, `="`...)
			b = append(b, extraValue...)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	return append(b, ' ')
}

func formatFloat(v float64) string {
	return string(appendFloat(nil, v))
}

func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// The text format's escapes: HELP escapes backslash and newline, label
// values also the double quote.
var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string { return helpEscaper.Replace(s) }

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

var metricToken = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

// familiesReadBy returns the metric families a rule file reads: every token
// of the file that is a family name, or one with a histogram's or summary's
// _bucket, _count or _sum suffix. A token list, not a PromQL parse: the names
// are then matched against a real exposition's families, so a word that is
// not a metric finds nothing.
func familiesReadBy(rules []byte) map[string]bool {
	out := map[string]bool{}
	for _, tok := range metricToken.FindAll(rules, -1) {
		s := string(tok)
		out[s] = true
		for _, suf := range []string{"_bucket", "_count", "_sum"} {
			if b, ok := strings.CutSuffix(s, suf); ok {
				out[b] = true
			}
		}
	}
	return out
}
