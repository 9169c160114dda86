package rulegen

import (
	"fmt"
	"sort"
	"time"
)

// iostat -dx's columns as recording rules, and the case that pins them to
// sysstat's formulas.

// iostatRule is one iostat column as a recording rule.
type iostatRule struct {
	column string // sysstat's column name
	name   string // recording rule name without the window suffix
	expr   func(w string) string
}

func iostatRuleName(name string, w time.Duration) string {
	return fmt.Sprintf("device:diskcanary_disk_%s%s", name, promDuration(w))
}

// perIO is sysstat's "delta of a time (or size) counter / delta of the I/O
// count", and 0 when there was no I/O (sysstat prints 0.00, not NaN).
func perIO(num, den string) func(string) string {
	return func(w string) string {
		n := fmt.Sprintf("rate(%s[%s])", num, w)
		d := fmt.Sprintf("rate(%s[%s])", den, w)
		return fmt.Sprintf("%s / (%s > 0)\nor\n%s == 0", n, d, d)
	}
}

func rate(metric string) func(string) string {
	return func(w string) string { return fmt.Sprintf("rate(%s[%s])", metric, w) }
}

// iostatRules follow sysstat 12.x (rd_sec/wr_sec are bytes here; times are
// seconds, where iostat prints ms; %util is a 0..1 ratio): the columns the
// node dashboard shows. rrqm/s and wrqm/s, which nothing reads, are left
// to a query of the raw counters (a rule per device is a series per
// device, on every node).
var iostatRules = []iostatRule{
	{"r/s", "reads_completed:rate", rate("diskcanary_disk_reads_completed_total")},
	{"w/s", "writes_completed:rate", rate("diskcanary_disk_writes_completed_total")},
	{"rkB/s", "read_bytes:rate", rate("diskcanary_disk_read_bytes_total")},
	{"wkB/s", "written_bytes:rate", rate("diskcanary_disk_written_bytes_total")},
	{"r_await", "read_await_seconds:rate", perIO("diskcanary_disk_read_time_seconds_total", "diskcanary_disk_reads_completed_total")},
	{"w_await", "write_await_seconds:rate", perIO("diskcanary_disk_write_time_seconds_total", "diskcanary_disk_writes_completed_total")},
	{"rareq-sz", "read_request_size_bytes:rate", perIO("diskcanary_disk_read_bytes_total", "diskcanary_disk_reads_completed_total")},
	{"wareq-sz", "write_request_size_bytes:rate", perIO("diskcanary_disk_written_bytes_total", "diskcanary_disk_writes_completed_total")},
	{"aqu-sz", "queue_size:rate", rate("diskcanary_disk_io_time_weighted_seconds_total")},
	{"%util", "utilization:ratio_rate", busyRatio},
}

// busyRatio is %util, clamped to 1 as diskcanary iostat clamps it to 100:
// io_time cannot grow faster than the wall clock, and a rate over 1 is the
// scrape's timestamp against when the kernel's jiffies were read.
func busyRatio(w string) string {
	return fmt.Sprintf("clamp_max(rate(diskcanary_disk_io_time_seconds_total[%s]), 1)", w)
}

func iostatRecording(p Params) Group {
	g := Group{Name: "diskcanary.iostat.recording"}
	w := promDuration(p.IostatWindow)
	for _, r := range iostatRules {
		g.Rules = append(g.Rules, Rule{Record: iostatRuleName(r.name, p.IostatWindow), Expr: r.expr(w)})
	}
	return g
}

func recordingCases(window time.Duration) []alertCase {
	const sda = `job="diskcanary", instance="n1:9742", device="sda"`
	const sdb = `job="diskcanary", instance="n1:9742", device="sdb"`
	// Per minute on sda: 600 reads (10/s) taking 3 s in total (r_await
	// 5 ms) of 4096 B each; 1200 writes (20/s) taking 12 s (w_await 10 ms)
	// of 16 KiB; the disk busy 30 s (%util 50 %) with a
	// weighted time of 90 s (aqu-sz 1.5). sdb is idle: sysstat prints 0.
	in := concat(
		s("diskcanary_disk_reads_completed_total{"+sda+"}", "0+600x10"),
		s("diskcanary_disk_read_time_seconds_total{"+sda+"}", "0+3x10"),
		s("diskcanary_disk_read_bytes_total{"+sda+"}", "0+2457600x10"),
		s("diskcanary_disk_writes_completed_total{"+sda+"}", "0+1200x10"),
		s("diskcanary_disk_write_time_seconds_total{"+sda+"}", "0+12x10"),
		s("diskcanary_disk_written_bytes_total{"+sda+"}", "0+19660800x10"),
		s("diskcanary_disk_io_time_seconds_total{"+sda+"}", "0+30x10"),
		s("diskcanary_disk_io_time_weighted_seconds_total{"+sda+"}", "0+90x10"),
		s("diskcanary_disk_reads_completed_total{"+sdb+"}", "0x10"),
		s("diskcanary_disk_read_time_seconds_total{"+sdb+"}", "0x10"),
		s("diskcanary_disk_read_bytes_total{"+sdb+"}", "0x10"),
		s("diskcanary_disk_writes_completed_total{"+sdb+"}", "0x10"),
		s("diskcanary_disk_write_time_seconds_total{"+sdb+"}", "0x10"),
		s("diskcanary_disk_written_bytes_total{"+sdb+"}", "0x10"),
	)
	want := []struct {
		name     string
		sda, sdb float64
		idle     bool
	}{
		{"reads_completed:rate", 10, 0, true},
		{"writes_completed:rate", 20, 0, true},
		{"read_bytes:rate", 40960, 0, true},
		{"written_bytes:rate", 327680, 0, true},
		{"read_await_seconds:rate", 0.005, 0, true},
		{"write_await_seconds:rate", 0.01, 0, true},
		{"read_request_size_bytes:rate", 4096, 0, true},
		{"write_request_size_bytes:rate", 16384, 0, true},
		{"queue_size:rate", 1.5, 0, false},
		{"utilization:ratio_rate", 0.5, 0, false},
	}
	var ex []exprTest
	for _, w := range want {
		name := iostatRuleName(w.name, window)
		e := exprTest{Expr: name, EvalTime: "10m", ExpSamples: []expSample{{name + "{" + sda + "}", w.sda}}}
		if w.idle {
			e.ExpSamples = append(e.ExpSamples, expSample{name + "{" + sdb + "}", w.sdb})
		}
		sort.Slice(e.ExpSamples, func(i, j int) bool { return e.ExpSamples[i].Labels < e.ExpSamples[j].Labels })
		ex = append(ex, e)
	}
	// sdc's io_time grows 90 s a minute, faster than the wall clock: the
	// recorded %util is 1, never 1.5.
	const sdc = `job="diskcanary", instance="n1:9742", device="sdc"`
	util := iostatRuleName("utilization:ratio_rate", window)
	fast := alertCase{name: "%util stays at most 1 when io_time grows faster than the wall clock",
		input: s("diskcanary_disk_io_time_seconds_total{"+sdc+"}", "0+90x10"),
		expr:  []exprTest{{Expr: util, EvalTime: "10m", ExpSamples: []expSample{{util + "{" + sdc + "}", 1}}}}}
	return []alertCase{{name: "iostat -dx formulas on a steady load and an idle disk", input: in, expr: ex}, fast}
}
