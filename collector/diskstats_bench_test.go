package collector

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
)

// synthTree writes a proc + sys tree of n whole disks with 20-field lines.
func synthTree(tb testing.TB, n int) (proc, sys string) {
	tb.Helper()
	dir := tb.TempDir()
	proc, sys = filepath.Join(dir, "proc"), filepath.Join(dir, "sys")
	var b strings.Builder
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("nvme%dn1", i)
		fmt.Fprintf(&b, "259 %d %s %d 1 2 3 4 5 6 7 0 9 10 11 12 13 14 15 16\n", i, name, i*1000)
		q := filepath.Join(sys, "block", name, "queue")
		if err := os.MkdirAll(q, 0o755); err != nil {
			tb.Fatal(err)
		}
		for f, v := range map[string]string{"rotational": "0", "logical_block_size": "512", "physical_block_size": "4096"} {
			if err := os.WriteFile(filepath.Join(q, f), []byte(v+"\n"), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(proc, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "diskstats"), []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return proc, sys
}

// BenchmarkDiskstatsScrape is one full scrape (Update + gather) of 1,000
// devices after the sysfs cache is warm.
func BenchmarkDiskstatsScrape(b *testing.B) {
	proc, sys := synthTree(b, 1000)
	p, err := newDiskstatsCollector(Options{Config: &config.Config{}, Paths: hostpath.Paths{ProcFS: proc, SysFS: sys}})
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(partCollector{p})
	if _, err := reg.Gather(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
