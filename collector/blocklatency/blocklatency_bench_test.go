package blocklatency

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// BenchmarkBlocklatencyPerRequest is the in-kernel cost of the collector:
// one O_DIRECT 4 KiB write per iteration to a tmpfs-backed loop device,
// without the program ("off") and with it ("on"), where it also reports
// the two programs' run time per request (bpf-ns/req, from the kernel's
// BPF run-time statistics, enabled only while the benchmark holds them).
func BenchmarkBlocklatencyPerRequest(b *testing.B) {
	testkit.RequireRoot(b)
	f, err := os.CreateTemp("/dev/shm", "dc-blocklatency-bench-*.img")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.Remove(f.Name()) })
	if err := f.Truncate(64 << 20); err != nil {
		b.Fatal(err)
	}
	f.Close()
	dev := testkit.LoopDevice(b, f.Name())
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(fd) })
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		b.Fatal(err)
	}
	write := func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, err := unix.Pwrite(fd, buf, int64(i%16384)*4096); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
	b.Run("off", write)
	b.Run("on", func(b *testing.B) {
		t, err := Open()
		if err != nil {
			b.Skip(err)
		}
		defer t.Close()
		stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err != nil {
			b.Fatal(err)
		}
		defer stats.Close()
		write(b)
		var ns, runs uint64
		for _, p := range []*ebpf.Program{t.objs.BlockRqIssue, t.objs.BlockRqComplete} {
			s, err := p.Stats()
			if err != nil {
				b.Fatal(err)
			}
			ns += uint64(s.Runtime.Nanoseconds())
			runs += s.RunCount
		}
		// Two runs per request: issue and completion.
		b.ReportMetric(float64(ns)/float64(runs/2), "bpf-ns/req")
	})
}
