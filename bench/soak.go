package main

import (
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/diskcanary/diskcanary/bench/read"
	"github.com/diskcanary/diskcanary/bench/stats"
	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/testkit"
)

// soak: does the daemon stay flat when it runs for a long time? Probes run
// every ~100 ms (tens of thousands of cycles in 30 minutes) while RSS,
// goroutines, OS threads, open file descriptors and the probe directory's
// size are sampled every -interval for -duration; at the end, the bytes
// the daemon says it wrote (diskcanary_probe_written_bytes_total) are
// compared with what the kernel counted for the process (/proc/PID/io
// write_bytes). Verdict: RSS within 10 % and the counts within 2 from the
// second quarter of the run to the last, the directory no bigger than the
// working set and the WAL segment, the written bytes within 2 %.
func soak(r *run, p params) bool {
	// A directory of its own: its size is judged.
	dir := filepath.Join(p.Dir, "soak")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() { os.RemoveAll(dir) })
	configFile := filepath.Join(r.TempDir(), "soak.yml")
	if err := os.WriteFile(configFile, []byte(fmt.Sprintf(`probes:
  targets:
    - {name: wal, kind: wal, dir: %s, interval: 100ms, ops: 5, min_free: 1GiB, daily_write_budget: 1TB}
    - {name: rr, kind: randread, dir: %s, interval: 100ms, ops: 20, working_set: 256MiB, min_free: 1GiB}
smart:
  enabled: false
`, dir, dir)), 0o644); err != nil {
		r.Fatal(err)
	}
	addr := testkit.FreeAddr(r)
	url := "http://" + addr + "/metrics"
	// The log goes through a pipe to this process: a log file the daemon
	// wrote itself would count in its /proc/PID/io write_bytes.
	cmd := exec.Command(diskcanary, "serve", "--config.file", configFile, "--web.listen-address", addr, "--log.level", "warn")
	var log lockedBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // it dies with the bench
	if err := cmd.Start(); err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	metrics := func() read.Metrics {
		text, err := scrapeText(url)
		if err != nil {
			r.Fatal(err)
		}
		m, err := read.ParseText(strings.NewReader(text))
		if err != nil {
			r.Fatal(err)
		}
		return m
	}
	if !waitFor(10*time.Second, 100*time.Millisecond, func() bool { _, err := scrapeText(url); return err == nil }) {
		r.Fatalf("the daemon did not answer on %s:\n%s", url, log.String())
	}

	series := []string{"rss_kib", "goroutines", "threads", "fds", "dir_kib"}
	var rows [][]float64 // per sample: series..., then WAL runs
	var at []time.Duration
	fmt.Printf("t_s %s runs\n", strings.Join(series, " "))
	start := time.Now()
	for time.Since(start) < p.Duration {
		m := metrics()
		goroutines, _ := m.Sum("go_goroutines", nil)
		runs, _ := m.Sum("diskcanary_probe_runs_total", map[string]string{"probe": "wal"})
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			r.Fatal(err)
		}
		row := []float64{procStatus(r, pid, "VmRSS"), goroutines, procStatus(r, pid, "Threads"), float64(len(fds)), dirKiB(dir), runs}
		rows, at = append(rows, row), append(at, time.Since(start))
		fmt.Printf("%.0f %.0f %.0f %.0f %.0f %.0f %.0f\n", at[len(at)-1].Seconds(), row[0], row[1], row[2], row[3], row[4], row[5])
		time.Sleep(p.Interval)
	}
	m := metrics()
	said, _ := m.Sum("diskcanary_probe_written_bytes_total", map[string]string{"probe": "wal"})
	rrSaid, _ := m.Sum("diskcanary_probe_written_bytes_total", map[string]string{"probe": "rr"})
	io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		r.Fatal(err)
	}
	var kernel float64
	for _, l := range strings.Split(string(io), "\n") {
		_, _ = fmt.Sscanf(l, "write_bytes: %f", &kernel) // fails on every other line
	}

	n := len(rows)
	r.printf("soak: %.0f s, %.0f WAL cycles, %d samples every %v\n", at[n-1].Seconds(), rows[n-1][5], n, p.Interval)
	r.printf("%-12s %12s %13s %8s  verdict\n", "series", "2nd quarter", "last quarter", "max")
	ok := true
	for i, name := range series {
		quarter := func(from, to int) float64 {
			if from >= to {
				from, to = 0, n
			}
			var xs []float64
			for _, row := range rows[from:to] {
				xs = append(xs, row[i])
			}
			return stats.Median(xs)
		}
		q2, q4 := quarter(n/4, n/2), quarter(3*n/4, n)
		mx := slices.MaxFunc(rows, func(a, b []float64) int { return cmp.Compare(a[i], b[i]) })[i]
		// Flat within noise: RSS within 10 %, counts within 2.
		tol := 2.0
		if name == "rss_kib" {
			tol = 0.10 * q2
		}
		good := q4-q2 <= tol && q2-q4 <= tol
		if name == "dir_kib" {
			// The working set and the WAL probe's one preallocated segment,
			// with 2 MiB to spare: nothing piles up.
			good = mx <= (256<<20+config.DefaultSegmentSize)/1024+2048
		}
		verdict := "flat"
		if !good {
			verdict, ok = "GROWING", false
		}
		r.printf("%-12s %12.0f %13.0f %8.0f  %s\n", name, q2, q4, mx, verdict)
	}
	total := said + rrSaid
	ratio := total / kernel
	verdict := "ok"
	if !(ratio >= 0.98 && ratio <= 1.02) {
		verdict, ok = "MISMATCH", false
	}
	r.printf("written bytes: diskcanary says %.0f (wal %.0f + working set %.0f), kernel /proc/PID/io write_bytes %.0f, ratio %.4f  %s\n",
		total, said, rrSaid, kernel, ratio, verdict)
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if lines[0] == "" {
		lines = nil
	}
	r.printf("daemon warning/error log lines: %d\n", len(lines))
	if len(lines) > 0 {
		r.printf("most frequent log messages:\n")
		for _, x := range mostFrequent(lines, 5) {
			r.printf("%7d %s\n", x.n, x.line)
		}
	}
	return ok
}

// logNoise is what differs between two records of one message.
var logNoise = regexp.MustCompile(`^time=\S+ |(err|path|in_flight|age|took)=("[^"]*"|\S+)`)

type counted struct {
	n    int
	line string
}

// mostFrequent counts log records by message, their times and varying
// attributes left out, most frequent first.
func mostFrequent(lines []string, top int) []counted {
	by := map[string]int{}
	for _, l := range lines {
		by[logNoise.ReplaceAllString(l, "")]++
	}
	var out []counted
	for l, n := range by {
		out = append(out, counted{n, l})
	}
	slices.SortFunc(out, func(a, b counted) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.line, b.line)
	})
	return out[:min(top, len(out))]
}

// procStatus is a numeric field of /proc/PID/status (VmRSS in KiB,
// Threads).
func procStatus(r *run, pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		r.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == field {
			var x float64
			if _, err := fmt.Sscan(strings.TrimSpace(v), &x); err != nil {
				r.Fatalf("/proc/%d/status: %s: %v", pid, field, err)
			}
			return x
		}
	}
	r.Fatalf("/proc/%d/status: no %s", pid, field)
	return 0
}

// dirKiB is the space dir's files take on disk, as du -sk counts it.
func dirKiB(dir string) float64 {
	var blocks int64
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a probe's file removed under the walk
		}
		if info, err := d.Info(); err == nil {
			blocks += info.Sys().(*syscall.Stat_t).Blocks
		}
		return nil
	})
	return float64(blocks) / 2 // 512-byte blocks
}

// lockedBuffer collects a child's output from the copying goroutine
// exec starts for it, read from this one.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
