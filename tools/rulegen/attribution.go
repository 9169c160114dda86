package rulegen

import (
	"fmt"
	"strings"
	"time"
)

// Attribution: a slow probe target's p99 beside its device's own request
// latency, the verdict the latency alerts name, and their promtool cases.

// Attribution rule names.
const (
	ruleDiskRequestP99   = "disk:diskcanary_disk_request_duration_seconds:p99_15m"
	ruleDeviceRequestP99 = "device:diskcanary_disk_request_duration_seconds:p99_15m"
	ruleTargetDeviceLat  = "target:diskcanary_device_latency_seconds:15m"
	ruleAttribution      = "target:diskcanary_probe_attribution:info"
)

// sourceNoDevice is the attribution source of a target with no block
// device under it (probe target_info device="": FUSE, tmpfs, overlay, a
// network filesystem): nothing below the filesystem to blame.
const sourceNoDevice = "no_device"

// Verdicts of the attribution rules.
const (
	verdictDevice = "device" // the device's own requests are slow
	verdictStack  = "stack"  // the probe is slow, its device's requests are not
	verdictNone   = "none"   // the probe is not slow
)

// attributed is a probe latency and the block requests that make it up:
// an fdatasync is data writes and a cache flush, a read one read.
type attributed struct {
	op       string // the probe's op: fdatasync, read
	requests string // the block layer's ops (diskcanary_disk_request_duration_seconds{op})
	// diskstats' counters for the fallback's mean await, per request op.
	awaits [][2]string
	slow   func(Params) time.Duration
}

// requestOps are the block requests the attributed ops are made of.
var requestOps = []string{"flush", "write", "read"}

var attributedOps = []attributed{
	{"fdatasync", "flush|write", [][2]string{
		{"diskcanary_disk_flush_requests_time_seconds_total", "diskcanary_disk_flush_requests_total"},
		{"diskcanary_disk_write_time_seconds_total", "diskcanary_disk_writes_completed_total"},
	}, func(p Params) time.Duration { return p.FdatasyncSlow }},
	{"read", "read", [][2]string{
		{"diskcanary_disk_read_time_seconds_total", "diskcanary_disk_reads_completed_total"},
	}, func(p Params) time.Duration { return p.ReadSlow }},
}

// attributionRecording puts each probe target's p99 beside its device's
// latency for the same requests and says whose fault a slow probe is:
// the device's (its own requests are slow) or the stack's above it
// (filesystem, journal, cgroup I/O throttle, virtualisation, FUSE). The
// device latency is the block layer's request p99 (the blocklatency
// collector, eBPF); without it, diskstats' mean await, a weaker witness
// (a mean hides a tail), labelled source="diskstats". One group, the
// probes' 15-minute p99s and the devices' request p99s first: the
// fallback is chosen where a device has no p99, and in a group of their
// own (which Prometheus evaluates in no set order beside this one) a
// target would read the fallback until that group's first evaluation,
// then switch, and a verdict would wait up to an interval, minutes, for
// the probes' group.
func attributionRecording(p Params) []Group {
	var d Group // the devices' request p99s, which the verdicts read
	g := Group{Name: "diskcanary.attribution.recording", Interval: interval(p.Interval15m)}
	t := p.target()
	// The kernel times requests per whole disk (a partition's and a
	// device-mapper device's requests reach the disk under them); NaN
	// (no request in the window) is dropped, not compared. Only the ops a
	// probe's requests are: discards make no probe slow.
	d.Rules = append(d.Rules, Rule{
		Record: ruleDiskRequestP99,
		Expr:   fmt.Sprintf("histogram_quantile(0.99, sum by (%s, device, op, le) (rate(diskcanary_disk_request_duration_seconds_bucket{op=~%q}[15m]))) >= 0", p.instanceLabels(), strings.Join(requestOps, "|")),
	})
	// A probe's device: a disk is its own; a partition or dm/md device
	// takes the slowest disk under it (diskcanary_disk_parent_info). One
	// rule per op keeps the join one-to-many.
	for _, op := range requestOps {
		d.Rules = append(d.Rules, Rule{
			Record: ruleDeviceRequestP99,
			Labels: map[string]string{"op": op},
			Expr: fmt.Sprintf(`%[2]s{op="%[3]s"}
or
max by (%[1]s, device, op) (
  max by (%[1]s, device, disk) (diskcanary_disk_parent_info)
  * on (%[1]s, disk) group_left (op)
  label_replace(%[2]s{op="%[3]s"}, "disk", "$1", "device", "(.+)")
)`, p.instanceLabels(), ruleDiskRequestP99, op),
		})
	}
	for _, a := range attributedOps {
		probeP99 := quantileRule(a.op, "p99", "15m")
		// 1 for every target with a p99 (NaN: no samples in the window).
		onTargets := fmt.Sprintf("((%s >= 0) * 0 + 1)", probeP99)
		g.Rules = append(g.Rules, Rule{
			Record: ruleTargetDeviceLat,
			Labels: map[string]string{"op": a.op, "source": "blocklatency"},
			Expr: fmt.Sprintf(`max by (%[1]s, device) (%[2]s{op=~"%[3]s"})
* on (%[1]s, device) group_right ()
%[4]s`, p.instanceLabels(), ruleDeviceRequestP99, a.requests, onTargets),
		})
		var awaits []string
		for i, c := range a.awaits {
			awaits = append(awaits, fmt.Sprintf(`label_replace(rate(%s[15m]) / (rate(%s[15m]) > 0), "request", "%d", "", "")`, c[0], c[1], i))
		}
		g.Rules = append(g.Rules, Rule{
			Record: ruleTargetDeviceLat,
			Labels: map[string]string{"op": a.op, "source": "diskstats"},
			Expr: fmt.Sprintf(`(
  max by (%[1]s, device) (
    %[2]s
  )
  * on (%[1]s, device) group_right ()
  %[3]s
)
unless on (%[1]s, device)
%[4]s{op=~"%[5]s"}`, p.instanceLabels(), strings.Join(awaits, "\n    or\n    "), onTargets, ruleDeviceRequestP99, a.requests),
		})
		lat := fmt.Sprintf(`%s{op="%s"}`, ruleTargetDeviceLat, a.op)
		share := fmt.Sprintf("on (%s) group_left () (%s * %s)", t, num(p.AttributionDeviceShare), probeP99)
		// A target with no device: a slow one is the stack's.
		for _, v := range []struct{ verdict, cmp string }{{verdictStack, ">"}, {verdictNone, "<="}} {
			g.Rules = append(g.Rules, Rule{
				Record: ruleAttribution,
				Labels: map[string]string{"op": a.op, "source": sourceNoDevice, "verdict": v.verdict},
				Expr:   fmt.Sprintf(`(%s{device=""} %s %s) * 0 + 1`, probeP99, v.cmp, seconds(a.slow(p))),
			})
		}
		for _, v := range []struct{ verdict, expr string }{
			{verdictDevice, fmt.Sprintf("(%s >= %s)\nand on (%s)\n%s > %s", lat, share, t, probeP99, seconds(a.slow(p)))},
			{verdictStack, fmt.Sprintf("(%s < %s)\nand on (%s)\n%s > %s", lat, share, t, probeP99, seconds(a.slow(p)))},
			{verdictNone, fmt.Sprintf("%s\nand on (%s)\n%s <= %s", lat, t, probeP99, seconds(a.slow(p)))},
		} {
			g.Rules = append(g.Rules, Rule{
				Record: ruleAttribution,
				Labels: map[string]string{"op": a.op, "verdict": v.verdict},
				Expr:   fmt.Sprintf("(\n%s\n) * 0 + 1", v.expr),
			})
		}
	}
	g.Rules = append(append(probe15mRules(p), d.Rules...), g.Rules...)
	return []Group{g}
}

// attributionText is the sentence a latency alert's description ends with,
// from the target's attribution verdict when there is one (Prometheus
// evaluates the query when it renders the alert).
const attributionText = `{{ with printf "` + ruleAttribution + `{instance=%q,probe=%q,path=%q}" $labels.instance $labels.probe $labels.path | query }}{{ with first . }} Cause: {{ if eq .Labels.verdict "device" }}the device ({{ .Labels.source }}: its own requests are slow too){{ else if eq .Labels.verdict "stack" }}{{ if eq .Labels.source "` + sourceNoDevice + `" }}the stack (no block device under the probe: the filesystem and what serves it, a FUSE daemon, tmpfs, overlay, a network filesystem){{ else }}the stack above the device ({{ .Labels.source }}: its requests are not slow; look at the filesystem, its journal, a cgroup I/O limit, the hypervisor){{ end }}{{ else }}none over the last 15 minutes{{ end }}.{{ end }}{{ end }}`

// causeText is what attributionText renders for a verdict/source.
func causeText(cause string) string {
	verdict, source, _ := strings.Cut(cause, "/")
	switch verdict {
	case "":
		return ""
	case verdictDevice:
		return " Cause: the device (" + source + ": its own requests are slow too)."
	case verdictStack:
		if source == sourceNoDevice {
			return " Cause: the stack (no block device under the probe: the filesystem and what serves it, a FUSE daemon, tmpfs, overlay, a network filesystem)."
		}
		return " Cause: the stack above the device (" + source + ": its requests are not slow; look at the filesystem, its journal, a cgroup I/O limit, the hypervisor)."
	}
	return " Cause: none over the last 15 minutes."
}

// attributionCases: a slow probe target beside its disk's own request
// latency (the blocklatency histogram of the disk under its partition or
// dm device), or diskstats' mean await without it, and the verdict the
// latency alerts name.
func attributionCases() []alertCase {
	const n = 60
	const host = `job="diskcanary", instance="n1:9742"`
	// The probe exports device="" (no label) on a device-less filesystem.
	const fuseLabels = host + `, probe="wal", path="/mnt/fuse/canary"`
	reqMetric := "diskcanary_disk_request_duration_seconds"
	req := func(device, op string, bs ...bucket) []series {
		return hist(reqMetric, host+`, device="`+device+`", op="`+op+`"`, n, bs...)
	}
	parent := func(device, disk string) []series {
		return s(`diskcanary_disk_parent_info{`+host+`, device="`+device+`", disk="`+disk+`"}`, fmt.Sprintf("1x%d", n))
	}
	// fdatasync p99 20 ms (latencyCases' slow), 9.44 ms (edge); read 37.5 ms.
	slow := hist(fdsMetric, walLabels, n, bucket{"0.005", 95}, bucket{"0.01", 97}, bucket{"0.025", 100})
	edge := hist(fdsMetric, walLabels, n, bucket{"0.005", 190}, bucket{"0.01", 199}, bucket{"0.025", 200})
	readSlow := hist(readMetric, readLabels, n, bucket{"0.01", 190}, bucket{"0.025", 196}, bucket{"0.05", 200})
	// Flush requests: p99 9 ms (4 of 5 in (5, 10] ms), or 248.5 µs.
	slowFlush := func(disk string) []series { return req(disk, "flush", bucket{"0.005", 95}, bucket{"0.01", 100}) }
	fastFlush := func(disk string) []series { return req(disk, "flush", bucket{"0.0001", 0}, bucket{"0.00025", 100}) }
	verdict := func(labels, op, source, v string) exprTest {
		return exprTest{Expr: ruleAttribution, EvalTime: "40m", ExpSamples: []expSample{{
			fmt.Sprintf(`%s{%s, op="%s", source="%s", verdict="%s"}`, ruleAttribution, labels, op, source, v), 1}}}
	}
	// one: the series of rule with exactly these labels is want.
	one := func(rule, labels string, want float64) exprTest {
		return near(rule+"{"+labels+"}", "40m", labels, want)
	}
	deviceLat := func(labels, op, source string, want float64) exprTest {
		return one(ruleTargetDeviceLat, fmt.Sprintf(`%s, op="%s", source="%s"`, labels, op, source), want)
	}
	return []alertCase{
		{name: "fdatasync p99 20 ms, its disk's flushes p99 9 ms: the device", alert: "DiskcanaryFdatasyncSlow", at: "40m",
			values: []string{"20ms"},
			input:  concat(slow, parent("sda1", "sda"), slowFlush("sda"), parent("dm-0", "sda"), parent("dm-0", "sdb"), fastFlush("sdb")),
			fire:   []string{walLabels}, cause: "device/blocklatency",
			expr: []exprTest{
				one(ruleDiskRequestP99, host+`, device="sda", op="flush"`, 0.009),
				one(ruleDeviceRequestP99, host+`, device="sda1", op="flush"`, 0.009),
				one(ruleDeviceRequestP99, host+`, device="sdb", op="flush"`, 0.0001+0.00015*0.99),
				// A dm device over two disks takes the slower one.
				one(ruleDeviceRequestP99, host+`, device="dm-0", op="flush"`, 0.009),
				deviceLat(walLabels, "fdatasync", "blocklatency", 0.009),
				verdict(walLabels, "fdatasync", "blocklatency", verdictDevice),
			}},
		{name: "fdatasync p99 20 ms, its disk's flushes p99 248.5 µs: the stack above the device", alert: "DiskcanaryFdatasyncSlow", at: "40m",
			values: []string{"20ms"},
			input:  concat(slow, parent("sda1", "sda"), fastFlush("sda")),
			fire:   []string{walLabels}, cause: "stack/blocklatency",
			expr: []exprTest{
				deviceLat(walLabels, "fdatasync", "blocklatency", 0.0001+0.00015*0.99),
				verdict(walLabels, "fdatasync", "blocklatency", verdictStack),
			}},
		{name: "fdatasync p99 9.44 ms: no verdict to give, silent", alert: "DiskcanaryFdatasyncSlow", at: "40m",
			input: concat(edge, parent("sda1", "sda"), fastFlush("sda")),
			expr:  []exprTest{verdict(walLabels, "fdatasync", "blocklatency", verdictNone)}},
		// Without the eBPF collector: diskstats' f_await 15 ms (1.5 s of
		// flushing per 100 flushes a minute), w_await 5 ms.
		{name: "fdatasync p99 20 ms, no blocklatency, f_await 15 ms: the device, by diskstats", alert: "DiskcanaryFdatasyncSlow", at: "40m",
			values: []string{"20ms"},
			input: concat(slow,
				s(`diskcanary_disk_flush_requests_total{`+host+`, device="sda1"}`, "0+100x60"),
				s(`diskcanary_disk_flush_requests_time_seconds_total{`+host+`, device="sda1"}`, "0+1.5x60"),
				s(`diskcanary_disk_writes_completed_total{`+host+`, device="sda1"}`, "0+100x60"),
				s(`diskcanary_disk_write_time_seconds_total{`+host+`, device="sda1"}`, "0+0.5x60")),
			fire: []string{walLabels}, cause: "device/diskstats",
			expr: []exprTest{
				deviceLat(walLabels, "fdatasync", "diskstats", 0.015),
				verdict(walLabels, "fdatasync", "diskstats", verdictDevice),
			}},
		{name: "fdatasync p99 20 ms on a FUSE filesystem (no block device): the stack", alert: "DiskcanaryFdatasyncSlow", at: "40m",
			values: []string{"20ms"},
			input:  concat(hist(fdsMetric, fuseLabels, n, bucket{"0.005", 95}, bucket{"0.01", 97}, bucket{"0.025", 100})),
			fire:   []string{fuseLabels}, cause: "stack/" + sourceNoDevice,
			expr: []exprTest{verdict(fuseLabels, "fdatasync", sourceNoDevice, verdictStack)}},
		{name: "fdatasync p99 9.44 ms on a FUSE filesystem: none", alert: "DiskcanaryFdatasyncSlow", at: "40m",
			input: hist(fdsMetric, fuseLabels, n, bucket{"0.005", 190}, bucket{"0.01", 199}, bucket{"0.025", 200}),
			expr:  []exprTest{verdict(fuseLabels, "fdatasync", sourceNoDevice, verdictNone)}},
		{name: "read p99 37.5 ms, its disk's reads p99 37.5 ms: the device", alert: "DiskcanaryReadSlow", at: "40m",
			values: []string{"37.5ms"},
			input:  concat(readSlow, parent("sda1", "sda"), req("sda", "read", bucket{"0.01", 190}, bucket{"0.025", 196}, bucket{"0.05", 200})),
			fire:   []string{readLabels}, cause: "device/blocklatency",
			expr: []exprTest{verdict(readLabels, "read", "blocklatency", verdictDevice)}},
	}
}
