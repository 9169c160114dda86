package iostat

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Row is one device in a report.
type Row struct {
	Device string
	Ext
}

// Report is one iostat report: every selected device over one interval.
type Report struct {
	Time time.Time
	// IntervalCS is the uptime difference the rates are over; for the
	// first report since boot it is the uptime.
	IntervalCS uint64
	// Discard and Flush say whether the kernel has those columns.
	Discard, Flush bool
	Rows           []Row
	// Skipped are the selected devices without a row this interval, and
	// why; the table's caller prints them on stderr, the JSON carries them.
	Skipped []Skip
	// Latency, when set, is each whole disk's block-request latency over
	// the interval (iostat --latency), by device name.
	Latency map[string]RequestLatency
}

// Skip is a selected device with no row in a report and the reason: it was
// not in the previous sample, its counters are not one interval of one
// device (Compute), or there is no elapsed time to divide by.
type Skip struct {
	Device, Reason string
}

// RequestLatency is one disk's request latency percentiles over an
// interval, in seconds, by op (read, write, discard, flush): the block
// layer's own histograms (the blocklatency collector), where await is a
// mean. NaN for an op with no request.
type RequestLatency map[string]Percentiles

// Percentiles of one op.
type Percentiles struct{ P50, P99 float64 }

// latencyColumns are the ops the latency block shows, with sysstat's
// column prefixes, in its column order.
func (r Report) latencyColumns() (prefixes, ops []string) {
	prefixes, ops = []string{"r", "w"}, []string{"read", "write"}
	if r.Discard {
		prefixes, ops = append(prefixes, "d"), append(ops, "discard")
	}
	if r.Flush {
		prefixes, ops = append(prefixes, "f"), append(ops, "flush")
	}
	return prefixes, ops
}

// ms is a latency for the tables, in ms like await; 0.00 without
// requests, as sysstat prints an await without I/O.
func ms(s float64) float64 {
	if math.IsNaN(s) {
		return 0
	}
	return s * 1e3
}

// Selection decides which devices a report shows, as iostat does.
type Selection struct {
	// Names, when set, are the only devices shown, in /proc/diskstats order,
	// whether or not they had I/O (iostat's "unfiltered" mode).
	Names []string
	// WholeDisk tells a disk from a partition; without Names only whole
	// disks with I/O since boot are shown (iostat -dx without -p).
	WholeDisk func(name string) bool
	// OmitIdle drops devices with no reads or writes in the interval (-z).
	OmitIdle bool
}

// Build computes a report from two snapshots. prev may be the zero
// Snapshot: the report is then since boot.
//
// A device first seen in curr, or under another MAJ:MIN, or re-created
// (Restarted) gets no row this interval, as a Prometheus counter gets no
// rate from its first sample: its counters since it appeared cover an
// unknown part of the interval, and a since-boot device's are not a delta.
// Its row starts with the next interval; Skipped says why it has none.
func Build(prev, curr Snapshot, sel Selection, now time.Time) Report {
	itv := Interval(prev, curr)
	sinceBoot := prev.Devices == nil && prev.UptimeCS == 0 && prev.Taken.IsZero()
	noInterval := ""
	if itv == 0 {
		noInterval = fmt.Sprintf("no elapsed time to divide by: /proc/uptime went from %d.%02d to %d.%02d s",
			prev.UptimeCS/100, prev.UptimeCS%100, curr.UptimeCS/100, curr.UptimeCS%100)
	}
	before := make(map[string]Device, len(prev.Devices))
	for _, d := range prev.Devices {
		before[d.Name] = d
	}
	want := map[string]bool{}
	for _, n := range sel.Names {
		want[n] = true
	}
	r := Report{Time: now, IntervalCS: itv}
	for _, d := range curr.Devices {
		if len(want) > 0 {
			if !want[d.Name] {
				continue
			}
		} else {
			if sel.WholeDisk != nil && !sel.WholeDisk(d.Name) {
				continue
			}
			if d.RdIOs == 0 && d.WrIOs == 0 && d.DcIOs == 0 && d.FlIOs == 0 {
				continue
			}
		}
		r.Discard = r.Discard || d.HasDiscard()
		r.Flush = r.Flush || d.HasFlush()
		p, seen := before[d.Name] // zero for the since-boot report
		switch {
		case noInterval != "":
			r.Skipped = append(r.Skipped, Skip{d.Name, noInterval})
			continue
		case sinceBoot:
		case !seen:
			r.Skipped = append(r.Skipped, Skip{d.Name, "not in the previous sample: its first row is the next interval's"})
			continue
		case p.Major != d.Major || p.Minor != d.Minor:
			r.Skipped = append(r.Skipped, Skip{d.Name, fmt.Sprintf("re-created since the previous sample as %d:%d (was %d:%d)", d.Major, d.Minor, p.Major, p.Minor)})
			continue
		}
		if sel.OmitIdle && p.RdIOs == d.RdIOs && p.WrIOs == d.WrIOs && p.DcIOs == d.DcIOs && p.FlIOs == d.FlIOs {
			continue
		}
		ext, err := Compute(p.Counters, d.Counters, itv, curr.UptimeCS)
		if err != nil {
			r.Skipped = append(r.Skipped, Skip{d.Name, err.Error()})
			continue
		}
		r.Rows = append(r.Rows, Row{Device: d.Name, Ext: ext})
	}
	return r
}

type column struct {
	name  string
	width int // header width; a value takes one space and width-1, or more
	value func(Ext) float64
}

var (
	readCols = []column{
		{"r/s", 8, func(e Ext) float64 { return e.RPS }},
		{"rkB/s", 10, func(e Ext) float64 { return e.RkBPS }},
		{"rrqm/s", 9, func(e Ext) float64 { return e.RrqmPS }},
		{"%rrqm", 7, func(e Ext) float64 { return e.RrqmPct }},
		{"r_await", 8, func(e Ext) float64 { return e.RAwait }},
		{"rareq-sz", 9, func(e Ext) float64 { return e.RareqSz }},
	}
	writeCols = []column{
		{"w/s", 8, func(e Ext) float64 { return e.WPS }},
		{"wkB/s", 10, func(e Ext) float64 { return e.WkBPS }},
		{"wrqm/s", 9, func(e Ext) float64 { return e.WrqmPS }},
		{"%wrqm", 7, func(e Ext) float64 { return e.WrqmPct }},
		{"w_await", 8, func(e Ext) float64 { return e.WAwait }},
		{"wareq-sz", 9, func(e Ext) float64 { return e.WareqSz }},
	}
	discardCols = []column{
		{"d/s", 8, func(e Ext) float64 { return e.DPS }},
		{"dkB/s", 10, func(e Ext) float64 { return e.DkBPS }},
		{"drqm/s", 9, func(e Ext) float64 { return e.DrqmPS }},
		{"%drqm", 7, func(e Ext) float64 { return e.DrqmPct }},
		{"d_await", 8, func(e Ext) float64 { return e.DAwait }},
		{"dareq-sz", 9, func(e Ext) float64 { return e.DareqSz }},
	}
	flushCols = []column{
		{"f/s", 8, func(e Ext) float64 { return e.FPS }},
		{"f_await", 8, func(e Ext) float64 { return e.FAwait }},
	}
	queueCols = []column{
		{"aqu-sz", 8, func(e Ext) float64 { return e.AquSz }},
		{"%util", 7, func(e Ext) float64 { return e.Util }},
	}
)

// Columns lists the report's columns in iostat -dx order: discard and flush
// columns only where the kernel has them.
func (r Report) columns() []column {
	cols := append(append([]column{}, readCols...), writeCols...)
	if r.Discard {
		cols = append(cols, discardCols...)
	}
	if r.Flush {
		cols = append(cols, flushCols...)
	}
	return append(cols, queueCols...)
}

// ColumnNames returns the header names, for tests and tools.
func (r Report) ColumnNames() []string {
	var out []string
	for _, c := range r.columns() {
		out = append(out, c.name)
	}
	return out
}

// Values returns a row's values in column order.
func (r Report) Values(row Row) []float64 {
	var out []float64
	for _, c := range r.columns() {
		out = append(out, c.value(row.Ext))
	}
	return out
}

// WriteTable prints the report the way iostat -dx prints it: a 13-column
// device name, then each column right-aligned with two decimals after at
// least one space, and a blank line.
func (r Report) WriteTable(w io.Writer) error {
	cols := r.columns()
	var b strings.Builder
	fmt.Fprintf(&b, "%-13s", "Device")
	for _, c := range cols {
		fmt.Fprintf(&b, "%*s", c.width, c.name)
	}
	b.WriteByte('\n')
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "%-13s", row.Device)
		for _, c := range cols {
			// sysstat prints every value as " %*.2f": one space, then the
			// field, which widens for a value that does not fit (56220.00
			// w/s, 7196160.00 wkB/s). Columns stay apart, so splitting
			// on whitespace always gives the right fields.
			fmt.Fprintf(&b, " %*.2f", c.width-1, c.value(row.Ext))
		}
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	if r.Latency != nil {
		// The same devices' request latency percentiles (ms): whole disks
		// only, the level at which the kernel issues requests.
		prefixes, ops := r.latencyColumns()
		fmt.Fprintf(&b, "%-13s", "Device")
		for _, p := range prefixes {
			fmt.Fprintf(&b, "%9s%9s", p+"_p50", p+"_p99")
		}
		b.WriteByte('\n')
		for _, row := range r.Rows {
			l, ok := r.Latency[row.Device]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "%-13s", row.Device)
			for _, op := range ops {
				fmt.Fprintf(&b, " %8.2f %8.2f", ms(l[op].P50), ms(l[op].P99))
			}
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteSkipped prints one line per device without a row and why, for
// stderr under the table: the table itself stays iostat's for awk.
func (r Report) WriteSkipped(w io.Writer) error {
	var b strings.Builder
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "diskcanary iostat: %s: no row this interval: %s\n", s.Device, s.Reason)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// jsonKeys are sysstat's JSON names (iostat -dx -o JSON), so per-device
// objects read the same as iostat's.
var jsonKeys = map[string]string{
	"%rrqm": "rrqm", "%wrqm": "wrqm", "%drqm": "drqm", "%util": "util",
}

// WriteJSON prints the report as one JSON object on one line:
// {"timestamp", "interval_seconds", "disk": [{"disk_device", "r/s", ...}],
// "skipped": [{"disk_device", "reason"}]}.
func (r Report) WriteJSON(w io.Writer) error {
	cols := r.columns()
	disks := make([]json.RawMessage, 0, len(r.Rows))
	for _, row := range r.Rows {
		var b strings.Builder
		name, _ := json.Marshal(row.Device)
		fmt.Fprintf(&b, `{"disk_device":%s`, name)
		for _, c := range cols {
			key := c.name
			if k, ok := jsonKeys[key]; ok {
				key = k
			}
			// Two decimals, as iostat prints, keeps the two outputs comparable.
			fmt.Fprintf(&b, `,%q:%.2f`, key, c.value(row.Ext))
		}
		if l, ok := r.Latency[row.Device]; ok {
			prefixes, ops := r.latencyColumns()
			for i, op := range ops {
				fmt.Fprintf(&b, `,"%s_p50":%.2f,"%s_p99":%.2f`, prefixes[i], ms(l[op].P50), prefixes[i], ms(l[op].P99))
			}
		}
		b.WriteByte('}')
		disks = append(disks, json.RawMessage(b.String()))
	}
	type skip struct {
		Device string `json:"disk_device"`
		Reason string `json:"reason"`
	}
	skipped := make([]skip, 0, len(r.Skipped))
	for _, s := range r.Skipped {
		skipped = append(skipped, skip(s))
	}
	out := struct {
		Timestamp       string            `json:"timestamp"`
		IntervalSeconds float64           `json:"interval_seconds"`
		Disk            []json.RawMessage `json:"disk"`
		Skipped         []skip            `json:"skipped"`
	}{r.Time.Format(time.RFC3339), float64(r.IntervalCS) / 100, disks, skipped}
	enc := json.NewEncoder(w)
	return enc.Encode(out)
}
