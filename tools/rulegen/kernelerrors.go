package rulegen

import (
	"fmt"
)

// Kernel storage errors (the errors collector): the alerts on them, the
// sentence the latency alerts gain from them, and their promtool cases.

// stormKinds are the disk error kinds that mean a command did not
// complete: each stalls I/O for the driver's timeout (30 s by default for
// SCSI and NVMe) and a run of them is what a multi-second stall is made of.
const stormKinds = "timeout|timeout_polled|abort|reset|link_down|offline"

// errorsText is the sentence a latency or stall alert's description ends
// with when the kernel logged storage errors in the window on the probe's
// device: its disks' errors (through diskcanary_disk_parent_info), errors
// the kernel named with the device itself (a partition's buffer errors),
// and its filesystem's errors. Prometheus runs the query when it renders
// the alert; with none, nothing is added.
func (p Params) errorsText() string {
	w := promDuration(p.ErrorWindow)
	q := "sum by (kind) (increase(diskcanary_disk_errors_total{instance=%q}[" + w + "]) and on (device) label_replace(diskcanary_disk_parent_info{instance=%q,device=%q}, `device`, `$1`, `disk`, `(.+)`)" +
		" or increase(diskcanary_disk_errors_total{instance=%q,device=%q}[" + w + "])" +
		" or increase(diskcanary_filesystem_errors_total{instance=%q,device=%q,kind!=`warning`}[" + w + "])) > 0"
	return kindsText(q, "$labels.instance $labels.instance $labels.device $labels.instance $labels.device $labels.instance $labels.device",
		" Kernel storage errors on this device in the last "+w+":")
}

// kindsText is an alert-text template: when the query (a printf format
// over args, label references) returns series by kind, it renders the
// lead followed by each kind and its count, sorted by kind.
func kindsText(query, args, lead string) string {
	return "{{ with printf \"" + query + "\" " + args + " | query | sortByLabel \"kind\" }}" + lead +
		"{{ range . }} {{ .Labels.kind }} ×{{ printf \"%.0f\" .Value }}{{ end }}.{{ end }}"
}

// errorsAlerts page on what the kernel says of its disks and filesystems
// (the errors collector), by severity: a storm of timeouts and resets
// (I/O stalls now), medium errors (data the disk cannot read), other I/O
// errors, filesystem errors, and a filesystem the kernel made read-only.
func errorsAlerts(p Params) Group {
	g := Group{Name: "diskcanary.errors.alerts"}
	w, sw := promDuration(p.ErrorWindow), promDuration(p.ErrorStormWindow)
	on := "{{ $labels.device }} on {{ $labels.instance }}"
	byKind := kindsText("sum by (kind) (increase(diskcanary_disk_errors_total{instance=%q,device=%q}["+w+"])) > 0", "$labels.instance $labels.device", " By kind:")
	g.Rules = append(g.Rules,
		p.alert("DiskcanaryDiskTimeoutStorm", "critical",
			fmt.Sprintf("sum by ("+p.deviceLabels()+") (increase(diskcanary_disk_errors_total{kind=~%q}[%s])) >= %d", stormKinds, sw, p.ErrorStormCount), 0,
			"disk timeouts and resets: I/O is stalling",
			fmt.Sprintf("The kernel logged {{ $value | printf \"%%.0f\" }} command timeouts, aborts, resets or link losses on %s in the last %s (%d or more page): each one stalls I/O for the driver's timeout.", on, sw, p.ErrorStormCount)+byKind),
		p.alert("DiskcanaryDiskMediumErrors", "warning",
			fmt.Sprintf(`sum by (`+p.deviceLabels()+`) (increase(diskcanary_disk_errors_total{kind="medium"}[%s])) > 0`, w), 0,
			"the disk cannot read or write some of its sectors",
			"The kernel logged medium errors on "+on+" in the last "+w+": the disk failed requests for sectors it cannot read or write. Compare SMART's pending and reallocated sectors."),
		p.alert("DiskcanaryDiskIOErrors", "warning",
			fmt.Sprintf(`sum by (`+p.deviceLabels()+`) (increase(diskcanary_disk_errors_total{kind!~"medium|%s"}[%s])) > 0`, stormKinds, w), 0,
			"I/O errors on a disk",
			"The kernel logged I/O errors on "+on+" in the last "+w+"."+byKind),
		p.alert("DiskcanaryFilesystemErrors", "warning",
			fmt.Sprintf(`sum by (`+p.deviceLabels()+`, fstype) (increase(diskcanary_filesystem_errors_total{kind!="warning"}[%[1]s]))
or
sum by (`+p.deviceLabels()+`, fstype) (delta(diskcanary_filesystem_recorded_errors[%[1]s]) > 0)`, w), 0,
			"filesystem errors",
			"The {{ $labels.fstype }} filesystem on "+on+" reported errors in the last "+w+" (diskcanary_filesystem_errors_total by kind: error, io, corruption, journal_abort, shutdown, remount_ro): run its fsck at the next chance; an XFS shutdown or an aborted journal stops all writes now."),
		p.alert("DiskcanaryFilesystemReadOnly", "critical",
			"diskcanary_filesystem_readonly == 1", 0,
			"the kernel made a filesystem read-only",
			"The kernel holds the filesystem on "+on+" at {{ $labels.mountpoint }} read-only after an error, under a read-write mount: every write to it fails (etcd on it stops). Fix the cause, then unmount, fsck and mount it again: a remount read-write is refused after the error (ext4's emergency_ro)."),
	)
	return p.linkDashboard(g, dashboardNode, "job", "instance", "disk=device")
}

// errorsCases test the kernel-error alerts and the sentence the latency
// alerts gain from them. Counters start at 0 in a case, so increase()
// does not extrapolate below zero and the values are exact.
func errorsCases() []alertCase {
	const host = `job="diskcanary", instance="n1:9742"`
	disk := func(device, kind, values string) []series {
		return s(`diskcanary_disk_errors_total{`+host+`, device="`+device+`", kind="`+kind+`"}`, values)
	}
	fsErr := func(device, kind, values string) []series {
		return s(`diskcanary_filesystem_errors_total{`+host+`, device="`+device+`", fstype="ext4", kind="`+kind+`"}`, values)
	}
	const n = 60
	slow := hist(fdsMetric, walLabels, n, bucket{"0.005", 95}, bucket{"0.01", 97}, bucket{"0.025", 100})
	return []alertCase{
		{name: "3 timeouts and resets on one disk in 10 minutes: a storm", alert: "DiskcanaryDiskTimeoutStorm", at: "10m",
			input:       concat(disk("sda", "timeout", "0x4 1 2 2x12"), disk("sda", "reset", "0x6 1x12"), disk("sdb", "timeout", "0x4 1x14")),
			fire:        []string{host + `, device="sda"`},
			description: "The kernel logged 3 command timeouts, aborts, resets or link losses on sda on n1:9742 in the last 10m (3 or more page): each one stalls I/O for the driver's timeout. By kind: reset ×1 timeout ×2."},
		// A global ruler (Thanos, Mimir) over two clusters whose node
		// names repeat: counted per cluster, and the text's query too.
		{name: "3 timeouts in cluster a, 2 on the same instance and disk in cluster b: a storm in a only", alert: "DiskcanaryDiskTimeoutStorm", at: "10m",
			input: concat(s(`diskcanary_disk_errors_total{cluster="a", `+host+`, device="sda", kind="timeout"}`, "0x4 1 2 3x12"),
				s(`diskcanary_disk_errors_total{cluster="b", `+host+`, device="sda", kind="timeout"}`, "0x4 1 2 2x12")),
			fire:        []string{`cluster="a", ` + host + `, device="sda"`},
			description: "The kernel logged 3 command timeouts, aborts, resets or link losses on sda on n1:9742 in the last 10m (3 or more page): each one stalls I/O for the driver's timeout. By kind: timeout ×3."},
		{name: "2 timeouts in 10 minutes: silent", alert: "DiskcanaryDiskTimeoutStorm", at: "10m",
			input: disk("sda", "timeout", "0x4 1 2 2x12")},
		{name: "a medium error", alert: "DiskcanaryDiskMediumErrors", at: "10m",
			input: concat(disk("sdb", "medium", "0x4 1x15"), disk("sdc", "medium", "4x20")),
			fire:  []string{host + `, device="sdb"`}},
		{name: "medium errors from before the window: silent", alert: "DiskcanaryDiskMediumErrors", at: "10m",
			input: disk("sdc", "medium", "4x20")},
		{name: "I/O errors, not timeouts nor medium", alert: "DiskcanaryDiskIOErrors", at: "10m",
			input:       concat(disk("loop3", "io", "0x4 2x15"), disk("loop3", "buffer_io", "0x4 1x15"), disk("sdc", "timeout", "0x4 2x15"), disk("sdd", "medium", "0x4 1x15")),
			fire:        []string{host + `, device="loop3"`},
			description: "The kernel logged I/O errors on loop3 on n1:9742 in the last 1h. By kind: buffer_io ×1 io ×2."},
		{name: "only timeouts and medium errors: not I/O errors", alert: "DiskcanaryDiskIOErrors", at: "10m",
			input: concat(disk("sdc", "timeout", "0x4 2x15"), disk("sdd", "medium", "0x4 1x15"))},
		{name: "an ext4 error in the log, and one recorded in a superblock", alert: "DiskcanaryFilesystemErrors", at: "10m",
			input: concat(fsErr("sda1", "error", "0x4 1x15"),
				s(`diskcanary_filesystem_recorded_errors{`+host+`, device="sdd1", fstype="ext4", kind="error"}`, "0x4 1x15")),
			fire: []string{host + `, device="sda1", fstype="ext4"`, host + `, device="sdd1", fstype="ext4"`}},
		{name: "an ext4 warning and an old recorded count: silent", alert: "DiskcanaryFilesystemErrors", at: "10m",
			input: concat(fsErr("sda1", "warning", "0x4 3x15"),
				s(`diskcanary_filesystem_recorded_errors{`+host+`, device="sdd1", fstype="ext4", kind="error"}`, "3x20"))},
		{name: "the kernel made a filesystem read-only", alert: "DiskcanaryFilesystemReadOnly", at: "10m",
			input: concat(s(`diskcanary_filesystem_readonly{`+host+`, device="sda1", mountpoint="/var/lib/etcd"}`, "0x4 1x15"),
				s(`diskcanary_filesystem_readonly{`+host+`, device="sda2", mountpoint="/srv"}`, "0x20")),
			fire: []string{host + `, device="sda1", mountpoint="/var/lib/etcd"`}},
		{name: "remounted writable: silent", alert: "DiskcanaryFilesystemReadOnly", at: "10m",
			input: s(`diskcanary_filesystem_readonly{`+host+`, device="sda1", mountpoint="/var/lib/etcd"}`, "0x4 1x3 0x10")},
		// The latency alert names the errors on the probe's device: its
		// disk's (sda under sda1) and its filesystem's, not another disk's.
		{name: "fdatasync p99 20 ms with timeouts on its disk: the alert names them", alert: "DiskcanaryFdatasyncSlow", at: "40m",
			values: []string{"20ms"},
			input: concat(slow,
				s(`diskcanary_disk_parent_info{`+host+`, device="sda1", disk="sda"}`, "1x60"),
				disk("sda", "timeout", "0x29 1 2x29"), fsErr("sda1", "io", "0x29 1x30"), disk("sdz", "medium", "0x29 5x30")),
			fire: []string{walLabels}, kernelErrors: " Kernel storage errors on this device in the last 1h: io ×1 timeout ×2."},
	}
}
