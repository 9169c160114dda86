//go:build !race

package probes

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkWakePathAB asks what in a process changes the cost of a paced
// fdatasync. The same WAL op (timedWALOp, 2300 bytes, 10 ms gap) runs under
// each condition, interleaved block by block, the order rotating: daemon
// (etcd's path), raw (check's), +ticker, nanosleep (fio's thinktime: the gap
// slept in the kernel), +listener (an idle listening socket), daemon+env
// (listener and the daemon's tickers), daemon+bpf (the blocklatency eBPF
// program attached; needs root and DISKCANARY_AB_BIN). DISKCANARY_AB_DIR
// names the directory, DISKCANARY_AB_BLOCKS the blocks of 100 ops (20).
//
//	DISKCANARY_AB_DIR=/mnt/x go test -run '^$' -bench WakePathAB -benchtime 1x ./probes/
func BenchmarkWakePathAB(b *testing.B) {
	dir := os.Getenv("DISKCANARY_AB_DIR")
	if dir == "" {
		b.Skip("DISKCANARY_AB_DIR is not set: it names the directory to measure")
	}
	blocks, _ := strconv.Atoi(os.Getenv("DISKCANARY_AB_BLOCKS"))
	if blocks <= 0 {
		blocks = 20
	}
	const perBlock, gap, bs, segment = 100, 10 * time.Millisecond, 2300, 64 << 20
	path := filepath.Join(dir, "wake-path-ab.wal")
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(path)
	defer unix.Close(fd)
	if err := unix.Fallocate(fd, 0, 0, segment); err != nil {
		b.Fatal(err)
	}
	_ = unix.Fsync(fd)
	buf, err := alignedBuffer(bs)
	if err != nil {
		b.Fatal(err)
	}
	defer freeBuffer(buf)

	// fio's thinktime: the thread sleeps in the kernel to a deadline
	nanosleep := func() {
		dl := nanotime() + int64(gap)
		ts := unix.Timespec{Sec: dl / 1e9, Nsec: dl % 1e9}
		for errors.Is(unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil), unix.EINTR) {
		}
	}
	tickerEvery := func(d time.Duration) func() {
		stop := make(chan struct{})
		go func() {
			t := time.NewTicker(d)
			defer t.Stop()
			for {
				select {
				case <-t.C:
				case <-stop:
					return
				}
			}
		}()
		return func() { close(stop) }
	}
	ticker := func() func() { return tickerEvery(100 * time.Millisecond) }
	nothing := func() func() { return func() {} }
	// an idle listening socket, as the daemon's /metrics server has: the
	// runtime's netpoller then has a descriptor to watch, and the thread
	// waiting for the next timer waits in epoll_pwait, woken through it
	listener := func() func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return func() { l.Close() }
	}
	// the daemon's blocklatency collector: an eBPF program on every block
	// request's issue and completion
	// (system-wide, so a second diskcanary with only that collector on;
	// DISKCANARY_AB_BIN names the binary)
	bpf := func() func() {
		bin := os.Getenv("DISKCANARY_AB_BIN")
		if bin == "" {
			return func() {}
		}
		cmd := exec.Command(bin, "serve", "--no-collector.probes", "--no-collector.smart", "--no-collector.diskstats",
			"--no-collector.errors", "--no-collector.pressure", "--web.listen-address", "127.0.0.1:19747")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 100; i++ {
			if out, err := exec.Command("curl", "-sf", "http://127.0.0.1:19747/metrics").Output(); err == nil && strings.Contains(string(out), "diskcanary_blocklatency_available 1") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		return func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	}
	// nil sleep: the gap slept by timedWALOp (time.Sleep)
	conds := []struct {
		name  string
		raw   bool
		sleep func()
		bg    func() func()
	}{
		{"daemon", false, nil, nothing},
		{"raw", true, nil, nothing},
		{"daemon+ticker", false, nil, ticker},
		{"nanosleep", true, nanosleep, nothing},
		{"daemon+bpf", false, nil, bpf},
		{"daemon+listener", false, nil, listener},
		// the daemon's own background: its /metrics listener, the stall
		// watchdog's 250 ms tick and the SMART runner's 1 s tick
		{"daemon+env", false, nil, func() func() {
			a, w, r := listener(), tickerEvery(250*time.Millisecond), tickerEvery(time.Second)
			return func() { a(); w(); r() }
		}},
		{"raw+listener", true, nil, listener},
	}
	got := make([][]time.Duration, len(conds))
	off := int64(0)
	for i := 0; i < b.N; i++ {
		for blk := 0; blk < blocks; blk++ {
			for k := range conds {
				ci := (k + blk) % len(conds)
				c := conds[ci]
				stopBG := c.bg()
				fl := &inflight{}
				for n := 0; n <= perBlock; n++ { // op 0 primes, untimed
					if off+bs > segment {
						off = 0
					}
					inside := gap
					if c.sleep != nil {
						c.sleep()
						inside = 0
					}
					op := timedWALOp(fl, c.raw, fd, buf, off, inside)
					if op.err != nil {
						b.Fatal(op.err)
					}
					off += bs
					if n > 0 {
						got[ci] = append(got[ci], op.fdatasync)
					}
				}
				stopBG()
			}
		}
	}
	for ci, c := range conds {
		d := got[ci]
		slices.Sort(d)
		q := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Nanoseconds()) / 1e3 }
		b.ReportMetric(q(0.5), c.name+"-p50-µs")
		b.ReportMetric(q(0.99), c.name+"-p99-µs")
		b.Logf("%-14s %6d fdatasyncs  p50 %6.1f  p90 %6.1f  p99 %6.1f µs", c.name, len(d), q(0.5), q(0.9), q(0.99))
	}
}
