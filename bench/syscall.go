package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/diskcanary/diskcanary/bench/read"
	"github.com/diskcanary/diskcanary/probes"
)

// syscallVsTools: does each tool's own number equal the time the kernel
// spent in the syscall? bpftrace times every fdatasync (and pread64) from
// sys_enter to sys_exit while, in turn on one directory, the daemon (a
// paced wal probe, its native histogram), check --gap, fio's etcd recipe
// with --thinktime and, with -reads, the 4k read probe and fio's reads run.
// Each tool's p50/p99 prints beside the kernel's for the same ops: a tool
// above the kernel measures itself; kernels differing between tools is the
// filesystem. It prints, it does not judge.
func syscallVsTools(r *run, p params) bool {
	r.need("fio", "bpftrace")
	r.needRoot("bpftrace")
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		r.Fatal(err)
	}
	walYAML, rrYAML := pacedWALConfig(p.Dir, p.Gap, p.Ops), pacedReadConfig(p.Dir)
	type row struct {
		round       int
		tool        string
		own, kernel percentiles
	}
	var rows []row
	add := func(i int, tool string, own percentiles, kernel []time.Duration) {
		k := percentiles{p50: us(probes.Percentile(kernel, 50)), p99: us(probes.Percentile(kernel, 99))}
		rows = append(rows, row{i + 1, tool, own, k})
		fmt.Printf("  round %d %s: own p50/p99 %.1f/%.1f µs, kernel %.1f/%.1f µs (%d syscalls)\n", i+1, tool, own.p50, own.p99, k.p50, k.p99, len(kernel))
	}
	// daemon runs one probe and traces call for a window of its histogram:
	// the same ops, up to the few that land between the window's last
	// scrape and the stop.
	daemon := func(i int, tool, config, metric, probe, call string) {
		d := r.serve(config, "--no-collector.errors", "--no-collector.blocklatency")
		d.started(r, metric, probe)
		untrace := r.traceSyscall(call, "diskcanary")
		w := d.windowSince(r, d.histogram(r, metric, probe), metric, probe, p.Samples, 0)
		kernel := untrace()
		d.stop()
		add(i, tool, histogramPercentiles(w), kernel)
	}
	for i := range p.Rounds {
		daemon(i, "daemon", walYAML, "diskcanary_fdatasync_duration_seconds", "wal", "fdatasync")

		untrace := r.traceSyscall("fdatasync", "diskcanary")
		c := r.check(p.Dir, "--profile", "etcd", "--gap", p.Gap.String(), "--samples", fmt.Sprint(p.Samples))
		add(i, "check", checkPercentiles(c), untrace())

		untrace = r.traceSyscall("fdatasync", "fio")
		j := r.fioWAL(p.Dir, p.Samples, p.Gap)
		add(i, "fio", fioPercentiles(r, j.Sync.Lat), untrace())

		if !p.Reads {
			continue
		}
		// The read probe, and fio's random reads of its working set paced
		// alike (100 reads, then 100 ms): their 4 KiB pread64s.
		daemon(i, "daemon read", rrYAML, "diskcanary_read_duration_seconds", "rr", "pread64")

		untrace = r.traceSyscall("pread64", "fio")
		j = r.fioRandRead(filepath.Join(p.Dir, ".diskcanary-rr-readset"), p.Samples, 100, 100*time.Millisecond)
		add(i, "fio read", fioPercentiles(r, j.Read.Clat), untrace())
	}
	r.printf("each tool's p50/p99 beside the kernel's (bpftrace sys_enter→sys_exit) for the same ops, %s, gap %v, %d rounds of %d (µs)\n",
		where(p.Dir), p.Gap, p.Rounds, p.Samples)
	r.printf("%-6s %-11s %9s %9s %9s %9s %8s %8s\n", "round", "tool", "own_p50", "kern_p50", "own_p99", "kern_p99", "p50_x", "p99_x")
	for _, x := range rows {
		r.printf("%-6d %-11s %9.1f %9.1f %9.1f %9.1f %8.3f %8.3f\n", x.round, x.tool, x.own.p50, x.kernel.p50, x.own.p99, x.kernel.p99,
			x.own.p50/x.kernel.p50, x.own.p99/x.kernel.p99)
	}
	return true
}

// traceSyscall starts timing every call (fdatasync; pread64 of 4 KiB: a
// probe's reads, not a runtime's file reads) of the processes named comm
// in the kernel; the returned function stops it and returns the durations.
func (r *run) traceSyscall(call, comm string) (stop func() []time.Duration) {
	filter := fmt.Sprintf("comm == %q", comm)
	if call == "pread64" {
		filter += " && args->count == 4096"
	}
	out := r.bpftrace(call, fmt.Sprintf(`tracepoint:syscalls:sys_enter_%[1]s /%[2]s/ { @s[tid] = nsecs; }
tracepoint:syscalls:sys_exit_%[1]s /@s[tid]/ { printf("%%lld\n", nsecs - @s[tid]); delete(@s[tid]); }
END { clear(@s); }`, call, filter))
	return func() []time.Duration {
		ds, err := read.ParseNanoseconds(out())
		if err != nil {
			r.Fatal(err)
		}
		if len(ds) == 0 {
			r.Fatalf("bpftrace saw no %s of %s", call, comm)
		}
		return ds
	}
}

// traceAppends times each of fio's WAL appends from its write's entry (a
// write of size bytes) to the exit of the fdatasync after it, in the
// kernel's monotonic nanoseconds: the spans check's WAL pattern times
// (timedWALOp), in the order fio made them.
func (r *run) traceAppends(size int) (stop func() []read.Span) {
	out := r.bpftrace("appends", fmt.Sprintf(`tracepoint:syscalls:sys_enter_write /comm == "fio" && args->count == %d/ { @s[tid] = nsecs; }
tracepoint:syscalls:sys_exit_fdatasync /comm == "fio" && @s[tid]/ { printf("%%d %%lld %%lld\n", tid, @s[tid], nsecs); delete(@s[tid]); }
END { clear(@s); }`, size))
	return func() []read.Span {
		spans, err := read.ParseSpans(out())
		if err != nil {
			r.Fatal(err)
		}
		return spans
	}
}

// bpftrace runs script from now (attached) until stop, which returns what
// it printed.
func (r *run) bpftrace(name, script string) (stop func() io.Reader) {
	out := filepath.Join(r.TempDir(), name+".txt")
	bt := exec.Command("bpftrace", "-q", "-o", out, "-e", script)
	var stderr bytes.Buffer
	bt.Stderr = &stderr
	bt.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // it dies with the bench
	if err := bt.Start(); err != nil {
		r.Fatal(err)
	}
	stopped := false
	r.Cleanup(func() {
		if !stopped {
			_ = bt.Process.Kill()
			_ = bt.Wait()
		}
	})
	time.Sleep(3 * time.Second) // attached
	return func() io.Reader {
		stopped = true
		_ = bt.Process.Signal(syscall.SIGINT)
		if err := bt.Wait(); err != nil {
			r.Fatalf("bpftrace: %v\n%s", err, stderr.Bytes())
		}
		b, err := os.ReadFile(out)
		if err != nil {
			r.Fatal(err)
		}
		return bytes.NewReader(b)
	}
}
