package collector

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/config"
	"github.com/diskcanary/diskcanary/internal/hostpath"
)

func writeText(t *testing.T, c TextCollector, want func(string) bool) string {
	t.Helper()
	ts, err := c.Snapshot()
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, ts.WriteText(bufio.NewWriter(&b), want))
	return b.String()
}

func all(string) bool { return true }

// The text the collector writes itself is, byte for byte, what the
// registry writes of its Update (the golden files are that).
func TestDiskstatsTextIsTheRegistrysText(t *testing.T) {
	for _, k := range []string{"k14", "k18", "k20"} {
		t.Run(k, func(t *testing.T) {
			p := newTestDiskstats(t, filepath.Join(diskstatsFixtures, k, "proc"), config.Diskstats{})
			golden, err := os.ReadFile(filepath.Join(diskstatsFixtures, k+".prom"))
			require.NoError(t, err)
			require.Equal(t, string(golden), writeText(t, p, all))
		})
	}
	t.Run("k20-removed", func(t *testing.T) {
		proc := t.TempDir()
		copyFile(t, filepath.Join(diskstatsFixtures, "k20/proc/diskstats"), filepath.Join(proc, "diskstats"))
		p := newTestDiskstats(t, proc, config.Diskstats{})
		writeText(t, p, all)
		copyFile(t, filepath.Join(diskstatsFixtures, "k20-removed/proc/diskstats"), filepath.Join(proc, "diskstats"))
		golden, err := os.ReadFile(filepath.Join(diskstatsFixtures, "k20-removed.prom"))
		require.NoError(t, err)
		require.Equal(t, string(golden), writeText(t, p, all))
	})
}

// Label values are escaped as the text format wants; a family left out by
// want is not written at all.
func TestDiskstatsTextEscapesAndFilters(t *testing.T) {
	sys, proc := t.TempDir(), t.TempDir()
	model := filepath.Join(sys, "block/sdx/device/model")
	require.NoError(t, os.MkdirAll(filepath.Dir(model), 0o755))
	require.NoError(t, os.WriteFile(model, []byte(`A "B" C\D`+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "diskstats"), []byte("8 0 sdx 10 0 80 1 0 0 0 0 0 1 1\n"), 0o644))
	part, err := newDiskstatsCollector(Options{Config: &config.Config{}, Paths: hostpath.Paths{ProcFS: proc, SysFS: sys}})
	require.NoError(t, err)
	got := writeText(t, part.(TextCollector), func(f string) bool {
		return f == "diskcanary_disk_info" || f == "diskcanary_disk_read_bytes_total"
	})
	require.Equal(t, `# HELP diskcanary_disk_info Identity of a block device from sysfs; rotational and block sizes in bytes as the kernel reports them. Partitions carry their disk's identity.
# TYPE diskcanary_disk_info gauge
diskcanary_disk_info{device="sdx",dm_name="",dm_uuid="",logical_block_size="",major="8",md_level="",minor="0",model="A \"B\" C\\D",physical_block_size="",revision="",rotational="",serial="",wwn=""} 1
# HELP diskcanary_disk_read_bytes_total The total number of bytes read successfully.
# TYPE diskcanary_disk_read_bytes_total counter
diskcanary_disk_read_bytes_total{device="sdx"} 40960
`, got)
}
