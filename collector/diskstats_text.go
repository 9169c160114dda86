package collector

import (
	"bufio"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs/blockdevice"
)

// diskFamily is one per-device series of /proc/diskstats, in base units.
type diskFamily struct {
	name, help string
	gauge      bool
	fields     int // the /proc/diskstats field count that has it
	value      func(*blockdevice.Diskstats) float64
	desc       *prometheus.Desc
}

// newDiskFamilies is every per-device family, sorted by name as the text
// exposition lists them.
func newDiskFamilies() []diskFamily {
	const ms = 0.001
	sectors := func(v uint64) float64 { return float64(v) * diskSectorSize }
	fs := []diskFamily{
		{name: "reads_completed_total", help: "The total number of reads completed successfully.", value: func(s *blockdevice.Diskstats) float64 { return float64(s.ReadIOs) }},
		{name: "reads_merged_total", help: "The total number of adjacent reads merged into one.", value: func(s *blockdevice.Diskstats) float64 { return float64(s.ReadMerges) }},
		{name: "read_bytes_total", help: "The total number of bytes read successfully.", value: func(s *blockdevice.Diskstats) float64 { return sectors(s.ReadSectors) }},
		{name: "read_time_seconds_total", help: "The total number of seconds spent by all reads.", value: func(s *blockdevice.Diskstats) float64 { return float64(s.ReadTicks) * ms }},
		{name: "writes_completed_total", help: "The total number of writes completed successfully.", value: func(s *blockdevice.Diskstats) float64 { return float64(s.WriteIOs) }},
		{name: "writes_merged_total", help: "The total number of adjacent writes merged into one.", value: func(s *blockdevice.Diskstats) float64 { return float64(s.WriteMerges) }},
		{name: "written_bytes_total", help: "The total number of bytes written successfully.", value: func(s *blockdevice.Diskstats) float64 { return sectors(s.WriteSectors) }},
		{name: "write_time_seconds_total", help: "The total number of seconds spent by all writes.", value: func(s *blockdevice.Diskstats) float64 { return float64(s.WriteTicks) * ms }},
		{name: "io_now", help: "The number of I/Os currently in progress.", gauge: true, value: func(s *blockdevice.Diskstats) float64 { return float64(s.IOsInProgress) }},
		{name: "io_time_seconds_total", help: "Total seconds the device had I/O in flight (the basis of iostat's %util).", value: func(s *blockdevice.Diskstats) float64 { return float64(s.IOsTotalTicks) * ms }},
		{name: "io_time_weighted_seconds_total", help: "Total seconds spent doing I/Os, weighted by the number in flight (the basis of iostat's aqu-sz).", value: func(s *blockdevice.Diskstats) float64 { return float64(s.WeightedIOTicks) * ms }},
		{name: "discards_completed_total", help: "The total number of discards completed successfully (Linux 4.18+).", fields: diskstatsFieldsDiscard, value: func(s *blockdevice.Diskstats) float64 { return float64(s.DiscardIOs) }},
		{name: "discards_merged_total", help: "The total number of adjacent discards merged into one (Linux 4.18+).", fields: diskstatsFieldsDiscard, value: func(s *blockdevice.Diskstats) float64 { return float64(s.DiscardMerges) }},
		{name: "discarded_bytes_total", help: "The total number of bytes discarded successfully (Linux 4.18+).", fields: diskstatsFieldsDiscard, value: func(s *blockdevice.Diskstats) float64 { return sectors(s.DiscardSectors) }},
		{name: "discard_time_seconds_total", help: "The total number of seconds spent by all discards (Linux 4.18+).", fields: diskstatsFieldsDiscard, value: func(s *blockdevice.Diskstats) float64 { return float64(s.DiscardTicks) * ms }},
		{name: "flush_requests_total", help: "The total number of flush requests completed successfully (Linux 5.5+).", fields: diskstatsFieldsFlush, value: func(s *blockdevice.Diskstats) float64 { return float64(s.FlushRequestsCompleted) }},
		{name: "flush_requests_time_seconds_total", help: "The total number of seconds spent by all flush requests (Linux 5.5+).", fields: diskstatsFieldsFlush, value: func(s *blockdevice.Diskstats) float64 { return float64(s.TimeSpentFlushing) * ms }},
	}
	for i := range fs {
		fs[i].name = namespace + "_disk_" + fs[i].name
		fs[i].desc = prometheus.NewDesc(fs[i].name, fs[i].help, []string{"device"}, nil)
	}
	slices.SortFunc(fs, func(a, b diskFamily) int { return strings.Compare(a.name, b.name) })
	return fs
}

// Snapshot implements TextCollector: this scrape's /proc/diskstats, to be
// written in the text format with no per-series allocation. A thousand
// disks are twenty thousand series; as client_golang metrics they were
// most of a scrape's heap (go run ./bench diskstats-1000).
func (c *diskstatsCollector) Snapshot() (TextSeries, error) {
	snap, err := c.snapshot(false)
	if err != nil {
		return nil, err
	}
	return &diskText{c: c, snap: snap}, nil
}

// diskText writes a snapshot as the registry would: families by name, the
// series of each by label values, no family without a series.
type diskText struct {
	c    *diskstatsCollector
	snap *diskSnapshot
}

func (t *diskText) WriteText(w *bufio.Writer, want func(family string) bool) error {
	order := make([]int, len(t.snap.stats))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return strings.Compare(t.snap.stats[a].DeviceName, t.snap.stats[b].DeviceName)
	})
	// The families in name order, info and parent_info among the counters.
	fams := t.c.families
	next := 0
	counters := func(upTo string) {
		for ; next < len(fams) && (upTo == "" || fams[next].name < upTo); next++ {
			f := &fams[next]
			if !want(f.name) {
				continue
			}
			head := false
			for _, i := range order {
				s, st := &t.snap.stats[i], t.snap.static[i]
				if !st.included || s.IoStatsCount < f.fields {
					continue
				}
				if !head {
					writeHead(w, f.name, f.help, f.gauge)
					head = true
				}
				w.WriteString(f.name)
				writeLabels(w, deviceLabelOrder, diskInfoLabels, st.infoLabels)
				writeValue(w, f.value(s))
			}
		}
	}
	counters(diskInfoName)
	if want(diskInfoName) {
		head := false
		for _, i := range order {
			st := t.snap.static[i]
			if !st.included {
				continue
			}
			if !head {
				writeHead(w, diskInfoName, diskInfoHelp, true)
				head = true
			}
			w.WriteString(diskInfoName)
			writeLabels(w, diskInfoLabelOrder, diskInfoLabels, st.infoLabels)
			writeValue(w, 1)
		}
	}
	counters(diskParentInfoName)
	if want(diskParentInfoName) {
		head := false
		for _, i := range order {
			st := t.snap.static[i]
			for _, disk := range st.joinDisks {
				if !head {
					writeHead(w, diskParentInfoName, diskParentInfoHelp, true)
					head = true
				}
				w.WriteString(diskParentInfoName)
				writeLabels(w, parentInfoLabelOrder, diskParentInfoLabels, []string{st.infoLabels[0], disk})
				writeValue(w, 1)
			}
		}
	}
	counters("")
	return w.Flush()
}

// writeHead writes a family's HELP and TYPE lines.
func writeHead(w *bufio.Writer, name, help string, gauge bool) {
	w.WriteString("# HELP ")
	w.WriteString(name)
	w.WriteByte(' ')
	escape(w, help, false)
	w.WriteString("\n# TYPE ")
	w.WriteString(name)
	if gauge {
		w.WriteString(" gauge\n")
	} else {
		w.WriteString(" counter\n")
	}
}

// Label orders: the text format's encoder writes a series' labels sorted
// by name; these are the positions of diskInfoLabels and
// diskParentInfoLabels in that order.
var (
	deviceLabelOrder     = []int{0}
	diskInfoLabelOrder   = sortedOrder(diskInfoLabels)
	parentInfoLabelOrder = sortedOrder(diskParentInfoLabels)
)

func sortedOrder(names []string) []int {
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	return order
}

// writeLabels writes {name="value",...} in order; names and values are
// parallel slices.
func writeLabels(w *bufio.Writer, order []int, names, values []string) {
	w.WriteByte('{')
	for k, i := range order {
		if k > 0 {
			w.WriteByte(',')
		}
		w.WriteString(names[i])
		w.WriteString(`="`)
		escape(w, values[i], true)
		w.WriteByte('"')
	}
	w.WriteByte('}')
}

// escape writes s as the text format wants it: a backslash and a newline
// escaped everywhere, a double quote too in a label value.
func escape(w *bufio.Writer, s string, labelValue bool) {
	if !strings.ContainsAny(s, "\\\n\"") {
		w.WriteString(s)
		return
	}
	for _, r := range s {
		switch {
		case r == '\\':
			w.WriteString(`\\`)
		case r == '\n':
			w.WriteString(`\n`)
		case r == '"' && labelValue:
			w.WriteString(`\"`)
		default:
			w.WriteRune(r)
		}
	}
}

// writeValue writes " value\n" with the text encoder's float format.
func writeValue(w *bufio.Writer, v float64) {
	w.WriteByte(' ')
	switch {
	case v == 1:
		w.WriteByte('1')
	case v == 0:
		w.WriteByte('0')
	case v == -1:
		w.WriteString("-1")
	case math.IsNaN(v):
		w.WriteString("NaN")
	case math.IsInf(v, +1):
		w.WriteString("+Inf")
	case math.IsInf(v, -1):
		w.WriteString("-Inf")
	default:
		var buf [32]byte
		w.Write(strconv.AppendFloat(buf[:0], v, 'g', -1, 64))
	}
	w.WriteByte('\n')
}
