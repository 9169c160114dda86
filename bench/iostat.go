package main

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/diskcanary/diskcanary/bench/read"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// iostatVsSysstat runs `iostat -dxy INTERVAL COUNT DEV` and `diskcanary
// iostat -y DEV INTERVAL COUNT` (COUNT is -rounds) at the same moment
// while fio drives a steady, rate-limited mix of reads, writes +
// fdatasync and discards on a loop device, then prints every column of
// both and their ratio. Verdict: every column's mean over the reports
// within -tolerance of sysstat's.
func iostatVsSysstat(r *run, p params) bool {
	r.needRoot("losetup")
	r.need("fio", "iostat", "losetup")
	secs := int(p.Interval / time.Second)
	if secs < 1 || p.Rounds < 1 {
		r.Fatalf("-interval %v, -rounds %d: want whole seconds and at least one report", p.Interval, p.Rounds)
	}
	// On the disk, not tmpfs: direct I/O on the backing file keeps the
	// loop device's latency steady (no page-cache write-back bursts in
	// the middle of an interval).
	work, err := os.MkdirTemp("/var/tmp", "diskcanary-iostat-bench.")
	if err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() { os.RemoveAll(work) })
	img := filepath.Join(work, "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		r.Fatal(err)
	}
	if err := os.Truncate(img, 1<<30); err != nil {
		r.Fatal(err)
	}
	loop := testkit.LoopDevice(r, img, "--direct-io=on")
	dev := filepath.Base(loop)
	r.printf("loop device: %s, %s\n", loop, strings.SplitN(string(r.exec("iostat", "-V")), "\n", 2)[0])

	// Steady load: 4 KiB random reads, 16 KiB random writes with an
	// fdatasync every 4 writes (flush requests), 64 KiB trims (discards),
	// and batched sequential 4 KiB reads and writes that the block layer
	// merges (rrqm, wrqm); each rate-limited.
	testkit.StartProcess(r, "fio", "--filename="+loop, "--direct=1", "--ioengine=libaio", "--time_based",
		"--runtime="+strconv.Itoa(secs*(p.Rounds+1)+10), "--group_reporting",
		"--name=read", "--rw=randread", "--bs=4k", "--iodepth=4", "--rate_iops=800",
		"--name=write", "--rw=randwrite", "--bs=16k", "--iodepth=1", "--rate_iops=300", "--fdatasync=4",
		"--name=trim", "--rw=randtrim", "--bs=64k", "--iodepth=1", "--rate_iops=200",
		"--name=seqread", "--rw=read", "--bs=4k", "--iodepth=16", "--iodepth_batch_submit=16", "--rate_iops=400", "--offset=512m",
		"--name=seqwrite", "--rw=write", "--bs=4k", "--iodepth=16", "--iodepth_batch_submit=16", "--rate_iops=400", "--offset=768m")
	time.Sleep(3 * time.Second) // fio reaches its rates

	interval, count := strconv.Itoa(secs), strconv.Itoa(p.Rounds)
	tools := []struct {
		name string
		cmd  *exec.Cmd
		out  []byte
	}{
		{name: "sysstat iostat -dxy " + interval + " " + count + " " + dev, cmd: exec.Command("iostat", "-dxy", interval, count, dev)},
		{name: "diskcanary iostat -y " + dev + " " + interval + " " + count, cmd: exec.Command(diskcanary, "iostat", "-y", dev, interval, count)},
	}
	// Failures are reported from here: a Fatal unwinds only its own
	// goroutine's stack.
	errs := make([]error, len(tools))
	var wg sync.WaitGroup
	for i := range tools {
		wg.Go(func() { tools[i].out, errs[i] = tools[i].cmd.Output() })
	}
	wg.Wait()
	for i, err := range errs {
		if ee, ok := err.(*exec.ExitError); ok {
			r.Fatalf("%s: %v\n%s", tools[i].name, err, ee.Stderr)
		} else if err != nil {
			r.Fatalf("%s: %v", tools[i].name, err)
		}
	}
	var reports [2][]read.IostatReport
	for i, t := range tools {
		r.printf("\n%s:\n", t.name)
		for _, l := range strings.Split(string(t.out), "\n") {
			if strings.HasPrefix(l, "Device") || strings.HasPrefix(l, dev+" ") {
				r.printf("%s\n", l)
			}
		}
		var err error
		if reports[i], err = read.ParseIostat(bytes.NewReader(t.out)); err != nil {
			r.Fatalf("%s: %v", t.name, err)
		}
	}
	r.printf("\n")
	return compareIostat(r, reports[0], reports[1], dev, p.Tolerance)
}

// compareIostat judges each column: the mean over the reports of each
// tool, their ratio, and the worst per-report ratio. A column 0 in both
// is equal.
func compareIostat(r *run, sys, dc []read.IostatReport, dev string, tol float64) bool {
	if len(sys) == 0 || len(sys) != len(dc) {
		r.printf("report counts differ: sysstat %d, diskcanary %d\n", len(sys), len(dc))
		return false
	}
	ratio := func(a, b float64) float64 {
		switch {
		case a == 0 && b == 0:
			return 1
		case a == 0:
			return 999
		}
		return b / a
	}
	r.printf("%-9s %12s %12s %8s %10s  %s\n", "column", "sysstat", "diskcanary", "ratio", "worst", "verdict")
	fail, ties := 0, 0
	for c, name := range sys[0].Columns {
		var a, b float64
		worst := 1.0
		for i := range sys {
			x, y := sys[i].Devices[dev], dc[i].Devices[dev]
			if x == nil || y == nil || len(y) != len(x) || dc[i].Columns[c] != name {
				r.printf("report %d: %s missing or its columns differ\n", i+1, dev)
				return false
			}
			a += x[c] / float64(len(sys))
			b += y[c] / float64(len(sys))
			if q := ratio(x[c], y[c]); math.Abs(q-1) > math.Abs(worst-1) {
				worst = q
			}
		}
		q := ratio(a, b)
		ok := q >= 1-tol && q <= 1+tol
		// Both tools print two decimals: below 0.5 one printed unit (0.01)
		// is more than 2 %, so means within 0.01 are a rounding tie.
		tie := !ok && math.Abs(a-b) <= 0.01+1e-9
		verdict := "ok"
		switch {
		case tie:
			ties++
			verdict = "ok (within 0.01, print resolution)"
		case !ok:
			fail++
			verdict = "OFF"
		}
		r.printf("%-9s %12.3f %12.3f %8.4f %10.4f  %s\n", name, a, b, q, worst, verdict)
	}
	r.printf("\n")
	if fail > 0 {
		r.printf("%d column(s) outside %.0f %%\n", fail, tol*100)
		return false
	}
	r.printf("every column within %.0f %% (mean of %d reports)", tol*100, len(sys))
	if ties > 0 {
		r.printf("; %d small column(s) within one printed unit (0.01)", ties)
	}
	r.printf("\n")
	return true
}
