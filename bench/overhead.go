package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/diskcanary/diskcanary/bench/read"
	"github.com/diskcanary/diskcanary/bench/stats"
)

// probeOverhead: diskcanary's per-op cost against fio's where the disk
// costs nothing (tmpfs), so what is left is the tool. Interleaved rounds of
// fio's etcd recipe back to back, the daemon's WAL loop
// (probes.BenchmarkWALOp, GOMAXPROCS 1 as serve runs) and check's
// (probes.BenchmarkWALOpCheck, raw syscalls), Samples ops each. Overhead
// is wall time per op minus what the tool timed in the write and the
// fdatasync. Verdict: each diskcanary loop's median overhead at most fio's.
// Wall time per op is printed but cannot judge: on a VM tmpfs work swings
// between rounds for every tool alike.
func probeOverhead(r *run, p params) bool {
	r.need("fio")
	dir, err := os.MkdirTemp("/dev/shm", "dc-overhead-")
	if err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() { os.RemoveAll(dir) })
	if fsType(dir) != "tmpfs" {
		r.Fatalf("%s is not tmpfs", dir)
	}
	test := filepath.Join(r.TempDir(), "probes.test")
	r.exec("go", "test", "-c", "-o", test, "./probes")

	type loop struct {
		name           string
		overhead, wall []float64
	}
	fio, daemon, check := &loop{name: "fio"}, &loop{name: "diskcanary daemon"}, &loop{name: "diskcanary check"}
	// procs is GOMAXPROCS as each runs it: the daemon at its
	// --runtime.gomaxprocs default, 1; check with a spare P
	// (probes/check.go), 2.
	goBench := func(l *loop, bench string, procs int) {
		cmd := exec.Command(test, "-test.run=^$", "-test.bench=^"+bench+"$", "-test.benchtime="+strconv.Itoa(p.Samples)+"x",
			"-test.cpu="+strconv.Itoa(procs))
		cmd.Env = append(os.Environ(), "DISKCANARY_BENCH_DIR="+dir)
		bs, err := read.ParseGoBench(bytes.NewReader(r.output(cmd)))
		if err != nil || len(bs) != 1 {
			r.Fatalf("%s: %d results, %v", bench, len(bs), err)
		}
		l.overhead = append(l.overhead, bs[0].Values["ns/op-overhead"])
		l.wall = append(l.wall, bs[0].Values["ns/op-wall"])
	}
	for i := range p.Rounds {
		order := []*loop{fio, daemon, check}
		if i%2 == 1 {
			order = []*loop{check, daemon, fio}
		}
		for _, l := range order {
			switch l {
			case fio:
				j := r.fioWAL(dir, p.Samples, 0)
				wall := j.RuntimeMS * 1e6 / float64(j.Write.TotalIOs)
				fio.wall = append(fio.wall, wall)
				fio.overhead = append(fio.overhead, wall-j.Write.Lat.Mean-j.Sync.Lat.Mean)
			case daemon:
				goBench(daemon, "BenchmarkWALOp", 1)
			case check:
				goBench(check, "BenchmarkWALOpCheck", 2)
			}
		}
	}
	r.printf("per-op overhead on tmpfs (2300-byte write + fdatasync), %d interleaved rounds of %d ops, medians\n", p.Rounds, p.Samples)
	r.printf("%-20s %14s %7s %10s  verdict\n", "loop", "overhead ns/op", "vs fio", "wall ns/op")
	f := stats.Median(fio.overhead)
	r.printf("%-20s %14.0f %7s %10.0f\n", "fio", f, "", stats.Median(fio.wall))
	ok := true
	for _, l := range []*loop{check, daemon} {
		m := stats.Median(l.overhead)
		verdict := "ok"
		if m > f {
			verdict, ok = "over fio", false
		}
		r.printf("%-20s %14.0f %7.3f %10.0f  %s\n", l.name, m, m/f, stats.Median(l.wall), verdict)
	}
	byRound := func(xs []float64) string {
		s := make([]string, len(xs))
		for i, x := range xs {
			s[i] = strconv.FormatFloat(x, 'f', 0, 64)
		}
		return strings.Join(s, " ")
	}
	r.printf("overhead by round, fio: %s | check: %s | daemon: %s\n", byRound(fio.overhead), byRound(check.overhead), byRound(daemon.overhead))
	return ok
}
