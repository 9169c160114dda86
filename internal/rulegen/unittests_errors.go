package rulegen

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
		{name: "no kernel log for 15 minutes", alert: "DiskcanaryKernelLogUnread", at: "20m",
			input: s(`diskcanary_kernel_log_available{`+host+`}`, "0x30"),
			fire:  []string{host}},
		{name: "kernel log read, nothing lost: silent", alert: "DiskcanaryKernelLogUnread", at: "20m",
			input: concat(s(`diskcanary_kernel_log_available{`+host+`}`, "1x30"),
				s(`diskcanary_kernel_log_lost_records_total{`+host+`, reason="overwritten"}`, "0x30"))},
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
