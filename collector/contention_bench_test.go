package collector

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchCgroupTree makes a cgroup v2 tree of n leaf cgroups under 10 slices,
// each with io.stat lines for two devices, hierarchical as the kernel's.
func benchCgroupTree(b *testing.B, n int) string {
	b.Helper()
	root := b.TempDir()
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	line := func(k uint64) string {
		return fmt.Sprintf("8:0 rbytes=%d wbytes=%d rios=%d wios=%d dbytes=0 dios=0\n259:0 rbytes=%d wbytes=%d rios=%d wios=%d dbytes=0 dios=0\n",
			4096*k, 8192*k, k, 2*k, 4096*k, 4096*k, k, k)
	}
	write(filepath.Join(root, "cgroup.controllers"), "cpu io memory\n")
	write(filepath.Join(root, "io.stat"), line(uint64(n*n)))
	per := n / 10
	for s := range 10 {
		slice := filepath.Join(root, fmt.Sprintf("s%d.slice", s))
		if err := os.Mkdir(slice, 0o755); err != nil {
			b.Fatal(err)
		}
		write(filepath.Join(slice, "io.stat"), line(uint64(per*per)))
		for i := range per {
			dir := filepath.Join(slice, fmt.Sprintf("u%d.service", i))
			if err := os.Mkdir(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			write(filepath.Join(dir, "io.stat"), line(uint64(i+1)))
		}
	}
	return root
}

// BenchmarkContentionPass1000 is one pass of the contention collector over
// 1,000 cgroups: the walk, the ranking and the metrics a scrape will send.
// go test -run '^$' -bench ContentionPass -benchmem ./collector/
func BenchmarkContentionPass1000(b *testing.B) {
	root := benchCgroupTree(b, 1000)
	c := newTestContention(b, ContentionConfig{Root: root}, nil)
	c.collect(time.Now)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c.collect(time.Now)
	}
}
