package collector

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

// BenchmarkErrorsScrapeUnderKmsgFlood (root): does reading the kernel log
// cost a scrape anything, and does the daemon's memory stay bounded while
// the kernel logs storage errors at 10,000 records a minute? Rounds
// alternate a quiet phase and a flood phase (storage-error lines written
// to /dev/kmsg, kernel.printk_devkmsg=on for the run so the kernel does
// not rate-limit them); both phases scrape the errors part every 100 ms.
// Reported: the medians of the scrape time in each phase and their ratio,
// the records the reader got, and the Go heap's growth over the flood.
//
// The injected lines come from userspace, so they are read and parsed but
// not counted (only the kernel's facility counts): the reading path is
// what a flood costs; BenchmarkClassify in internal/kmsg times the
// classification of real lines on top (under a microsecond each).
func BenchmarkErrorsScrapeUnderKmsgFlood(b *testing.B) {
	testkit.RequireRoot(b)
	const path = "/proc/sys/kernel/printk_devkmsg"
	old, err := os.ReadFile(path)
	if err != nil {
		b.Skipf("skipping: %v", err)
	}
	if err := os.WriteFile(path, []byte("on\n"), 0); err != nil {
		b.Skipf("skipping: cannot turn off /dev/kmsg rate limiting: %v", err)
	}
	b.Cleanup(func() { _ = os.WriteFile(path, old, 0) })

	p, stop := startErrorsCollector(b)
	defer stop()

	rounds, phase := 5, 10*time.Second
	if testing.Short() {
		rounds, phase = 2, 3*time.Second
	}
	scrapeFor := func(d time.Duration, flood bool) []float64 {
		done := make(chan struct{})
		if flood {
			go func() {
				f, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
				if err != nil {
					return
				}
				defer f.Close()
				tick := time.NewTicker(time.Minute / 10000)
				defer tick.Stop()
				for i := 0; ; i++ {
					select {
					case <-done:
						return
					case <-tick.C:
						fmt.Fprintf(f, "<3>I/O error, dev loop%d, sector %d op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2\n", i%8, i)
					}
				}
			}()
		}
		var ds []float64
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			ch := make(chan prometheus.Metric, 1024)
			start := time.Now()
			_ = p.Update(ch)
			ds = append(ds, float64(time.Since(start).Microseconds()))
		}
		close(done)
		return ds
	}
	var quiet, flooded []float64
	var heapBefore, heapAfter runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&heapBefore)
	p.mu.Lock()
	records0 := p.records
	p.mu.Unlock()
	b.ResetTimer()
	for range rounds {
		quiet = append(quiet, scrapeFor(phase, false)...)
		flooded = append(flooded, scrapeFor(phase, true)...)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&heapAfter)
	p.mu.Lock()
	read := p.records - records0
	p.mu.Unlock()
	mq, mf := median(quiet), median(flooded)
	b.ReportMetric(mq, "scrape-µs-quiet")
	b.ReportMetric(mf, "scrape-µs-flood")
	b.ReportMetric(mf/mq, "ratio")
	b.ReportMetric(float64(read), "records-read")
	b.ReportMetric((float64(heapAfter.HeapInuse)-float64(heapBefore.HeapInuse))/1024, "heap-KiB-growth")
	b.Logf("%d rounds of %v quiet / %v at 10,000 records a minute: scrape p50 %.0f µs quiet, %.0f µs flooded (×%.2f); %d records read; heap in use %d → %d KiB",
		rounds, phase, phase, mq, mf, mf/mq, read, heapBefore.HeapInuse>>10, heapAfter.HeapInuse>>10)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
