package collector

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/diskcanary/diskcanary/collector/blocklatency"
)

// BenchmarkBlocklatencyScrape is one scrape (Update + gather) of n disks x 4
// operations, each histogram with 40 populated slots, read from the real
// kernel map (seeded, so the machine needs no n disks; root only).
func BenchmarkBlocklatencyScrape(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("disks=%d", n), func(b *testing.B) {
			sys := b.TempDir()
			require := func(err error) {
				if err != nil {
					b.Fatal(err)
				}
			}
			require(os.MkdirAll(filepath.Join(sys, "dev/block"), 0o755))
			for i := range n {
				require(os.Symlink(fmt.Sprintf("../../devices/virtual/nvme%dn1", i), filepath.Join(sys, "dev/block", fmt.Sprintf("259:%d", i))))
			}
			p := openBlocklatency(b, sys)
			h := blocklatency.Hist{Slots: make([]uint64, len(blocklatency.Edges)+1), SumNS: 1e9}
			for s := 60; s < 100; s++ {
				h.Slots[s] = uint64(s)
			}
			for i := range n {
				for _, op := range blocklatency.Ops {
					require(p.tracer.Seed(blocklatency.Key{Major: 259, Minor: uint32(i), Op: op}, h))
				}
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(partCollector{p})
			mfs, err := reg.Gather()
			require(err)
			// Each seeded disk is scraped (plus the loop and real disks the
			// machine has, which the tracer sees too).
			got := 0
			for _, mf := range mfs {
				if mf.GetName() == "diskcanary_disk_request_duration_seconds" {
					got = len(mf.Metric)
				}
			}
			if got < 4*n {
				b.Fatalf("%d request histograms, want at least %d", got, 4*n)
			}
			b.ReportAllocs()
			for b.Loop() {
				_, err := reg.Gather()
				require(err)
			}
		})
	}
}
