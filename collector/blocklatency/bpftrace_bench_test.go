package blocklatency

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/testkit"
	"github.com/diskcanary/diskcanary/probes"
)

// BenchmarkBlocklatencyVsBpftrace: the collector's per-device read p50 and
// p99 against bpftrace timing the very same requests (block_rq_issue →
// block_rq_complete, keyed by sector, one line per request: exact
// percentiles), both attached at once, on a tmpfs-backed loop device under
// fio's 4 KiB O_DIRECT random reads at 2,000 IOPS for 3 s per iteration
// (-benchtime=5x: five rounds). It reports both sides' percentiles (µs)
// and their ratio, and fails when a ratio is outside one slot (a schema-3
// native bucket: 2^(1/8) ≈ 1.09).
//
//	go test -run '^$' -bench BlocklatencyVsBpftrace -benchtime 5x ./collector/blocklatency/
func BenchmarkBlocklatencyVsBpftrace(b *testing.B) {
	testkit.RequireRoot(b)
	for _, tool := range []string{"bpftrace", "fio"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("skipping: %s is not installed (apt-get install %s)", tool, tool)
		}
	}
	if _, err := os.Stat("/sys/kernel/tracing/events/block"); err != nil {
		if err := unix.Mount("nodev", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil {
			b.Skipf("skipping: bpftrace needs tracefs: %v", err)
		}
	}
	f, err := os.CreateTemp("/dev/shm", "dc-blocklatency-vs-bpftrace-*.img")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.Remove(f.Name()) })
	if err := f.Truncate(256 << 20); err != nil {
		b.Fatal(err)
	}
	f.Close()
	dev := testkit.LoopDevice(b, f.Name())
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		b.Fatal(err)
	}
	major, minor := unix.Major(st.Rdev), unix.Minor(st.Rdev)
	t, err := Open()
	if err != nil {
		b.Skip(err)
	}
	defer t.Close()
	read := func() []uint64 {
		var slots []uint64
		if err := t.Read(func(k Key, h Hist) {
			if k.Major == major && k.Minor == minor && k.Op == "read" {
				slots = slices.Clone(h.Slots)
			}
		}); err != nil {
			b.Fatal(err)
		}
		return slots
	}
	script := fmt.Sprintf(`tracepoint:block:block_rq_issue /args->dev == %[1]d/ { @s[args->sector] = nsecs; }
tracepoint:block:block_rq_complete /args->dev == %[1]d && @s[args->sector]/ { printf("%%llu\n", nsecs - @s[args->sector]); delete(@s[args->sector]); }
END { clear(@s); }`, major<<20|minor)

	var ours50, ours99, bt50, bt99 []float64
	for b.Loop() {
		bt := exec.Command("bpftrace", "-e", script)
		out, err := bt.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		bt.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := bt.Start(); err != nil {
			b.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		if !lines.Scan() || !strings.HasPrefix(lines.Text(), "Attaching") {
			b.Fatalf("bpftrace did not attach: %q", lines.Text())
		}
		before := read()
		fio := exec.Command("fio", "--name=randread", "--filename="+dev, "--rw=randread", "--bs=4k", "--direct=1",
			"--ioengine=psync", "--rate_iops=2000", "--runtime=3", "--time_based", "--output=/dev/null")
		if msg, err := fio.CombinedOutput(); err != nil {
			b.Fatalf("fio: %v: %s", err, msg)
		}
		time.Sleep(100 * time.Millisecond) // the last completions reach bpftrace's buffer
		after := read()
		_ = bt.Process.Signal(syscall.SIGINT)
		var exact []time.Duration
		for lines.Scan() {
			if ns, err := strconv.ParseUint(strings.TrimSpace(lines.Text()), 10, 64); err == nil {
				exact = append(exact, time.Duration(ns))
			}
		}
		_ = bt.Wait()
		if len(exact) < 1000 {
			b.Fatalf("bpftrace timed %d requests, want the ~6,000 fio made", len(exact))
		}
		slices.Sort(exact)
		ours50 = append(ours50, Quantile(0.5, before, after)*1e6)
		ours99 = append(ours99, Quantile(0.99, before, after)*1e6)
		bt50 = append(bt50, float64(probes.Percentile(exact, 50))/1e3)
		bt99 = append(bt99, float64(probes.Percentile(exact, 99))/1e3)
		b.Logf("round %d: %d requests; bpftrace p50 %.1f µs p99 %.1f µs, diskcanary p50 %.1f µs p99 %.1f µs",
			len(bt50), len(exact), bt50[len(bt50)-1], bt99[len(bt99)-1], ours50[len(ours50)-1], ours99[len(ours99)-1])
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	var r50, r99 []float64
	for i := range ours50 {
		r50 = append(r50, ours50[i]/bt50[i])
		r99 = append(r99, ours99[i]/bt99[i])
	}
	b.ReportMetric(median(bt50), "bpftrace-p50-µs")
	b.ReportMetric(median(bt99), "bpftrace-p99-µs")
	b.ReportMetric(median(ours50), "diskcanary-p50-µs")
	b.ReportMetric(median(ours99), "diskcanary-p99-µs")
	b.ReportMetric(median(r50), "p50-ratio")
	b.ReportMetric(median(r99), "p99-ratio")
	slot := 1.0905077 // 2^(1/8)
	for name, r := range map[string]float64{"p50": median(r50), "p99": median(r99)} {
		if r > slot || r < 1/slot {
			b.Errorf("%s: diskcanary / bpftrace = %.3f, more than one slot (%.3f) apart", name, r, slot)
		}
	}
}
